"""The kernel's rounding carried through `launch` (tdiff.execute.interpreter.carry, tdiff.judge.carried): an output
the wrapper computes with torch from what the kernel wrote passes within what the kernel's admissible rounding does
to it, and a wrapper's bug fails. CPU only."""

import numpy as np
import pytest
import torch

import tdiff
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.core.rerun import CARRIED
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.judge import verdict as V
from tdiff.judge.targets import view
from tdiff.strategies import tensor_arg
from tests import carried_kernels as C

OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=5)
X = torch.tensor([0.1, -0.37, 0.25, 1.3, -2.2, 0.6])
SHIFT = torch.tensor([1.0e4])


def check(name):
    return next(c for c in C.shifted_back.__tdiff_checks__ if c.name == name)


def verdict(chk, **inputs):
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(chk)
    return judge.verdict(Case({k: tensor_arg(v) for k, v in inputs.items()}), final=True)


@pytest.mark.triton_matrix
def test_a_carried_run_moves_each_computed_store_within_its_admissible_rounding():
    chk = check("amplified")
    case = Case({"x": tensor_arg(X), "c": tensor_arg(SHIFT)})
    base = view(InterpreterBackend().run(chk, case), case).targets["returned"].values
    moved = [view(InterpreterBackend(BackendSpec("interpreter", nudge=k)).run(chk, case), case)
             .targets["returned"].values for k in (1, 2)]
    step = 2 * 2.0**-23 * 1.0e4 * C.SCALE  # two float32 roundings of the stores' magnitude (c), times the wrapper's
    for m in moved:
        assert np.all(np.abs(m - base) <= 1.01 * step + 1e-3) and np.any(m != base)
    assert not np.array_equal(moved[0], moved[1])  # another run, other signs


@pytest.mark.triton_matrix
def test_an_output_the_wrapper_amplifies_from_the_kernels_rounding_passes():
    v, ev = verdict(check("amplified"), x=X, c=SHIFT)
    assert not v.failed, v
    said = [t for k, t in v.notes if k == "kernel rounding through launch"]
    assert said and "`returned`" in said[0] and "which `launch` computes from what the kernel wrote" in said[0]
    assert sorted(r.k for r in ev.extra if r.how == CARRIED) == [1, 2, 3, 4]


@pytest.mark.triton_matrix
def test_a_wrapper_bug_fails():
    v, ev = verdict(check("misplaced"), x=X, c=SHIFT)
    assert v.label == V.VS_REFERENCE, v
    # (the two elements a reshape and the transpose put in the same place pass, within the carried rounding)
    assert "4 of 6 elements differ" in " ".join(v.reasons), v.reasons
