"""Each verdict is produced by a small kernel (or a deliberately faulty backend) built for it."""

import pytest

import tdiff
from tdiff import verdict as V
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
    assert result.backends == ("interpreter", "interpreter:reversed")  # no GPU, no reference


def test_out_of_bounds(opts):
    label, _ = _verdict(K.inplace_overrun, opts)
    assert label == V.OUT_OF_BOUNDS


def test_undefined_float_to_int_cast(opts):
    label, result = _verdict(K.cast_kernel, opts)
    assert label == V.UNDEFINED
    assert "float-to-int32 cast of a value out of range" in result.failures[0].report


needs_bf16_limitation = pytest.mark.skipif(
    hasattr(__import__("triton.runtime.interpreter").runtime.interpreter.InterpreterBuilder, "get_bf16"),
    reason="this Triton's interpreter has bf16 constants (3.9+): no limitation to report",
)


@needs_bf16_limitation
def test_interpreter_limitation_is_reported_not_failed(opts):
    (res,) = tdiff.verify(K.bf16_const_kernel, options=opts)
    assert res.status == "skipped"
    assert any("interpreter limitation" in n and "get_bf16" in n for n in res.notes)


@needs_bf16_limitation
def test_interpreter_limitation_verdict(opts):
    import torch

    from tdiff.case import Case
    from tdiff.compare import compare
    from tdiff.runner import Runner
    from tdiff.strategies import tensor_arg

    check = K.bf16_const_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.ones(8, dtype=torch.bfloat16))})
    runner = Runner(opts.with_(isolation="none"))
    a, b = runner.run_specs(check, case, ["interpreter", "reference"])
    verdict = V.decide(case, compare(a, b, case), lambda s: runner.run_specs(check, case, [s])[0],
                       has_reference=True)
    assert verdict.label == V.LIMITATION and "get_bf16" in verdict.reasons[0]


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


def test_undecided(opts):
    label, _ = _verdict(K.double_kernel, opts, backends=("tests.faulty:FakeCompiledSlightly", "interpreter"))
    assert label == V.UNDECIDED


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
