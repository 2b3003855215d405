"""Program sampling on large grids: a sample of programs interpreted, only their writes compared."""

import pytest
import torch

import tdiff
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.execute.interpreter.session import sample_programs
from tdiff.strategies import tensor_arg
from tests import kernels as K


def test_sample_holds_first_last_and_tail_programs():
    grid = (1024, 1, 1)
    s = sample_programs(grid, 8)
    assert (0, 0, 0) in s and (1023, 0, 0) in s and 8 <= len(s) <= 14
    s2 = sample_programs((32, 8, 1), 8)
    assert (31, 7, 0) in s2 and any(p[0] == 31 for p in s2 if p != (31, 7, 0))


def test_sampled_interpreter_runs_few_programs_and_agrees_with_the_reference(tmp_path):
    opts = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none")
    (res,) = tdiff.verify(K.wide_grid_kernel, options=opts)
    assert res.status == "passed"
    check = K.wide_grid_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.ones(4095))})
    out = InterpreterBackend(BackendSpec("interpreter", sample=(64, 8, 0))).run(check, case)
    assert out.trace.sampled and len(out.trace.programs_run) <= 16


def test_sampling_still_finds_a_bug_in_one_boundary_program():
    opts = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none", shrink_budget=0,
                            backends=("tests.faulty:FakeCompiledTail", "interpreter"), batched_threshold=64)
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(K.wide_grid_kernel, options=opts)
    text = str(err.value)
    assert "written by program 1023" in text and "interpreted" in text and "of 1024 programs" in text


def test_batches_interpret_the_whole_grid_up_to_their_threshold():
    opts = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none", shrink_budget=0,
                            backends=("tests.faulty:FakeCompiledTail", "interpreter"))
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(K.wide_grid_kernel, options=opts)
    text = str(err.value)
    assert "written by program 1023" in text and "of 1024 programs" not in text  # no sample: every program


def test_atomics_under_sampling_fall_back_to_every_program():
    opts = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none")
    (res,) = tdiff.verify(K.wide_atomic_kernel, options=opts)
    assert res.status == "passed"
