"""Each verdict is produced by a small kernel (or a deliberately faulty backend) built for it."""

import pytest

import tdiff
from tdiff.judge import verdict as V
from tests import kernels as K


@pytest.fixture
def opts(tmp_path):
    return tdiff.RunOptions(profile="ci", max_examples=15, corpus_dir=None, repro_dir=None, shrink_budget=10)


def _verdict(kernel, opts, **changes):
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(kernel, options=opts.with_(**changes))
    (result,) = err.value.results
    labels = [d.verdict.label for d in result.failures]
    return labels[0], result


def test_race_is_found_by_program_order_alone(opts):
    label, result = _verdict(K.race_kernel, opts)
    assert label == V.RACE
    assert result.backends == ("interpreter", "interpreter:reversed", "compile-only")  # no GPU, no reference (CI)


def test_out_of_bounds(opts):
    label, _ = _verdict(K.inplace_overrun, opts)
    assert label == V.OUT_OF_BOUNDS


def test_undefined_float_to_int_cast(opts):
    label, result = _verdict(K.cast_kernel, opts)
    assert label == V.UNDEFINED
    assert "float-to-int32 cast of a value out of range" in result.failures[0].report


def test_compiled_wrong(opts):
    label, _ = _verdict(K.double_kernel, opts, backends=("tests.faulty:FakeCompiledWrong", "interpreter"))
    assert label == V.COMPILED_WRONG


def test_interpreter_wrong(opts):
    label, _ = _verdict(K.double_kernel, opts, backends=("tests.faulty:FakeCompiledExact",
                                                         "tests.faulty:FaultyInterpreter"))
    assert label == V.INTERPRETER_WRONG


def test_both_wrong(opts):
    label, _ = _verdict(K.double_kernel, opts, backends=("tests.faulty:FakeCompiledOther",
                                                         "tests.faulty:FaultyInterpreter"))
    assert label == V.BOTH_WRONG


def test_slightly_off_compiled_side_is_blamed_by_the_reference(opts):
    label, _ = _verdict(K.double_kernel, opts, backends=("tests.faulty:FakeCompiledSlightly", "interpreter"))
    assert label == V.COMPILED_WRONG


def test_undecided_passes_with_a_note(opts):
    # compiled 4e-6 above the interpreter, the reference halfway: each side agrees with the reference
    # within tolerance, the two sides do not agree with each other
    (res,) = tdiff.verify(K.double_midref, options=opts.with_(backends=("tests.faulty:FakeCompiledUndecided",
                                                                        "interpreter")))
    assert res.status == "passed" and res.caveats["undecided"] > 0, res.caveat_lines()


def test_nondeterministic(opts):
    label, _ = _verdict(K.double_kernel, opts, backends=("tests.faulty:FakeCompiledNoisy", "interpreter"))
    assert label == V.NONDETERMINISTIC


def test_error_on_one_side(opts):
    label, result = _verdict(K.hang_kernel, opts.with_(timeout=3, max_examples=5))
    assert label == "interpreter error"
    assert "timeout" in result.failures[0].report


def test_float64_oracle_without_reference(opts):
    # no reference: the third opinion is the interpreter in float64 on upcast inputs
    label, result = _verdict(K.double_noref, opts, backends=("tests.faulty:FakeCompiledWrong", "interpreter"))
    assert label == V.COMPILED_WRONG
    assert "RMSE to the interpreter:fp64 result" in result.failures[0].report
