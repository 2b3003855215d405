"""The GPU's arithmetic as measured opinions (tdiff.execute.interpreter.gpu_arith, tdiff.judge.modelled): a NaN or
an infinity on one side passes only where a modelled run of the kernel gives it on that case. CPU only: the
compiled side is the interpreter computing as the GPU does (tests.faulty:FakeCompiledGpu)."""

import itertools

import numpy as np
import pytest
import torch

import tdiff
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.core.rerun import MODELLED
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.execute.interpreter.gpu_arith import tf32
from tdiff.execute.interpreter.rounding import pairwise_sum
from tdiff.judge import verdict as V
from tdiff.judge.targets import view
from tdiff.strategies import tensor_arg
from tests import gpu_arith_kernels as G

OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=5)
GPU = BackendSpec("interpreter", gpu_arith=True)
CAVEAT = "GPU arithmetic (NaN/inf)"


def check(kernel, name):
    return next(c for c in kernel.__tdiff_checks__ if c.name == name)


def verdict(chk, **inputs):
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(chk)
    return judge.verdict(Case({k: tensor_arg(v) for k, v in inputs.items()}), final=True)


def notes(v, kind=CAVEAT):
    return [t for k, t in v.notes if k == kind]


def modelled_runs(ev):
    return sorted(r.k for r in ev.extra if r.how == MODELLED)


def neg_inf_times(b):
    a, m = torch.zeros(16, 16), torch.zeros(16, 16)
    a[0, 0], m[0, 0] = -float("inf"), b
    return a, m


# ---------------------------------------------------------------- the model itself

def test_tf32_drops_the_low_13_bits_and_truncates_tiny_subnormals_to_zero():
    x = np.array([1.0 + 2.0**-23, -3.0, 1e-45, 3e-42, 1e-40, np.inf, np.nan], np.float32)
    y = tf32(x)
    assert y[0] == 1.0 and y[1] == -3.0  # 1 + 2^-23 needs bit 0
    assert y[2] == 0 and y[3] == 0 and y[4] != 0  # below 2^-136 nothing is left of a subnormal
    assert np.isinf(y[5]) and np.isnan(y[6])


@pytest.mark.triton_matrix
@pytest.mark.parametrize("b, tf32_gives", [(1e-45, "nan"), (3e-42, "nan"), (1e-40, "-inf")])
def test_a_modelled_dot_gives_what_the_h200_gave_for_minus_inf_times_a_subnormal(b, tf32_gives):
    # measured on an H200 (16x16 tl.dot, triton 3.6): tf32 and tf32x3 NaN, NaN, -inf; ieee -inf every time
    a, m = neg_inf_times(b)
    case = Case({"a": tensor_arg(a), "b": tensor_arg(m)})
    for name, expect in (("tf32", tf32_gives), ("ieee", "-inf")):
        chk = check(G.dot16, name)
        got = view(InterpreterBackend(GPU).run(chk, case), case).targets["returned"].values[0, 0]
        assert str(got) == expect, (name, b)
        plain = view(InterpreterBackend().run(chk, case), case).targets["returned"].values[0, 0]
        assert plain == -np.inf  # the interpreter as an opinion stays IEEE


def decay_case():
    """x = 3, c = 1/3 in the first lane: fl(3 * fl(1/3)) - 1 is 0 in IEEE float32, the exact residual with an fma."""
    x, c, y, w = (torch.tensor(v, dtype=torch.float32) for v in ([3.0, 1, 1, 1], [1 / 3, 1, 1, 1], [1.0, 1, 1, 1],
                                                                  [1.0, 1, 1, 1]))
    return Case({"x": tensor_arg(x), "c": tensor_arg(c), "y": tensor_arg(y), "w": tensor_arg(w)})


@pytest.mark.triton_matrix
def test_a_modelled_run_contracts_multiply_adds_and_flushes_the_math_functions_subnormals():
    chk = check(G.decay, "cpu")
    case = decay_case()
    ieee = InterpreterBackend().run(chk, case)
    gpu = InterpreterBackend(GPU).run(chk, case)
    assert view(ieee, case).targets["returned"].values[0] == 1.0  # fl(3 * fl(1/3)) - 1 = 0: exp(0)
    assert view(gpu, case).targets["returned"].values[0] < 1.0  # fma: the exact residual 2.98e-8
    assert "fma contraction" in gpu.trace.modelled and not ieee.trace.modelled


@pytest.mark.triton_matrix
@pytest.mark.parametrize("variable", ["TRITON_DEFAULT_FP_FUSION=0", "TRITON_FORCE_DISABLE_FP_FUSION=1"])
def test_a_modelled_run_contracts_nothing_where_triton_is_told_not_to(monkeypatch, variable):
    # the knob compiled Triton reads (Triton 3.9 warns that 3.10 turns fusion off by default)
    monkeypatch.setenv(*variable.split("="))
    if "FORCE" in variable and not hasattr(__import__("triton").knobs.language, "force_disable_fp_fusion"):
        pytest.skip("this Triton has no TRITON_FORCE_DISABLE_FP_FUSION (3.9 added it)")
    chk = check(G.decay, "cpu")
    case = decay_case()
    gpu = InterpreterBackend(GPU).run(chk, case)
    assert view(gpu, case).targets["returned"].values[0] == 1.0  # fl(3 * fl(1/3)) - 1 = 0, as without contraction
    assert "fma contraction" not in gpu.trace.modelled


# ---------------------------------------------------------------- the judge

@pytest.mark.triton_matrix
def test_a_tf32_dot_of_minus_inf_and_a_tiny_subnormal_passes_with_the_tf32_caveat():
    v, ev = verdict(check(G.dot16, "tf32"), **dict(zip("ab", neg_inf_times(1e-45))))
    assert not v.failed, v
    said = " ".join(notes(v))
    assert "interpreter:gpu (tf32 dot) gives nan" in said and "interpreter gives -inf" in said
    assert modelled_runs(ev) == list(range(7))


@pytest.mark.triton_matrix
def test_the_same_nan_fails_where_the_kernel_asks_for_ieee():
    # a faulty compiler that runs the IEEE dot in tf32: no modelled run of an IEEE dot gives NaN there
    v, ev = verdict(check(G.dot16, "ieee"), **dict(zip("ab", neg_inf_times(1e-45))))
    assert v.label == V.COMPILED_WRONG, v
    assert modelled_runs(ev) == list(range(7)) and not notes(v)


def centred_row(base, bumped, at):
    x = np.full(127, base, np.float32)
    x[bumped] = np.nextafter(x[bumped], np.float32(np.inf))
    w = np.ones(127, np.float32)
    w[at] = -np.inf
    return torch.from_numpy(x), torch.from_numpy(w)


# rows where the fake GPU (its own rounding) gives NaN and the interpreter an infinity: x - mean is 0 in one
# summation and a rounding-level value in the other
ROWS = {"a modelled run gives the NaN": (2, 34.55199, 61),
        "the runs give infinities of both signs": (302, 263.02603, 23)}


def _row(trial):
    rng = np.random.default_rng(0)
    for _ in range(trial + 1):
        base = np.float32(rng.uniform(1, 1000))
        bumped = rng.integers(0, 127, 10)
        at = int(rng.integers(0, 127))
    return centred_row(base, bumped, at), float(base), at


@pytest.mark.triton_matrix
@pytest.mark.parametrize("why", list(ROWS))
def test_a_nan_from_zero_times_inf_where_the_zero_is_rounding_passes(why):
    trial, base, at = ROWS[why]
    (x, w), got_base, got_at = _row(trial)
    assert (np.float32(got_base), got_at) == (np.float32(base), at)
    v, ev = verdict(check(G.centred_times, "compiled"), x=x, w=w)
    assert not v.failed, v
    said = " ".join(notes(v))
    assert "interpreter vs compiled" in said and "compiled vs reference" in said
    if "both signs" in why:
        assert "takes either sign under rounding, and 0 too" in said


@pytest.mark.triton_matrix
@pytest.mark.parametrize("name", ["cpu", "compiled"])
def test_a_nan_from_zero_times_inf_where_the_zero_is_real_fails(name):
    # the kernel's off-by-one mask reads the last x as 0: 0 * c - 0 is 0 in every run, times w = inf: NaN, where the
    # reference's (3 - 0) * inf gives exp(-inf) = 0
    x, c, y, w = (torch.tensor(v, dtype=torch.float32) for v in ([1.0, 1, 1, 3], [1.0, 1, 1, 1], [1.0, 1, 1, 0],
                                                                  [1.0, 1, 1, float("inf")]))
    v, ev = verdict(check(G.decay_last_lane_lost, name), x=x, c=c, y=y, w=w)
    assert v.failed and v.label in (V.VS_REFERENCE, V.KERNEL_BUG), v
    assert modelled_runs(ev) == list(range(7))  # asked, and nothing they gave explains it
    assert not notes(v)


def div_full_row():
    x = torch.tensor(G.DIV_FULL_ROW)
    w = torch.ones(5)
    w[0] = float("inf")
    return x, w


def test_the_div_full_row_sums_alike_in_every_order_and_only_its_mean_differs():
    x = np.array(G.DIV_FULL_ROW, np.float32)
    sums = set()
    for p in itertools.permutations(range(5)):  # left to right, and as trees of a block of 8 (zeros padding it)
        sums.add(np.float32(np.float32(np.float32(np.float32(x[p[0]] + x[p[1]]) + x[p[2]]) + x[p[3]]) + x[p[4]]))
        block = np.concatenate([x[list(p)], np.zeros(3, np.float32)])
        sums |= {np.float32(pairwise_sum(block, 0, False, lambda v: v, halves=h)) for h in (False, True)}
    (s,) = sums
    assert np.float32(s * (np.float32(1) / np.float32(5))) == x[0] != np.float32(s / np.float32(5))


@pytest.mark.triton_matrix
def test_a_modelled_run_divides_as_div_full_does():
    # measured on an H200 (bench/gpu/div_full.py): float32 `/` is a * (1 / b) for every pair with b = 5
    chk = check(G.centred_times, "gpu")
    x, w = div_full_row()
    case = Case({"x": tensor_arg(x), "w": tensor_arg(w)})
    gpu = InterpreterBackend(GPU).run(chk, case)
    plain = InterpreterBackend().run(chk, case)
    assert np.isnan(view(gpu, case).targets["returned"].values[0])  # x - mean = 0, times inf
    assert view(plain, case).targets["returned"].values[0] == np.inf  # IEEE: one ulp, times inf
    assert "div.full" in gpu.trace.modelled and not plain.trace.modelled


@pytest.mark.triton_matrix
def test_a_nan_from_a_mean_div_full_rounds_onto_an_element_passes():
    # the compiled side computes as the GPU does (FakeCompiledGpu): NaN where the interpreter gives inf
    v, ev = verdict(check(G.centred_times, "gpu"), **dict(zip("xw", div_full_row())))
    assert view(ev.outcomes["compiled"], ev.case).targets["returned"].values[0] != np.inf
    assert not v.failed, v
    said = " ".join(notes(v))
    assert "interpreter:gpu (div.full" in said and "gives nan" in said and "interpreter gives inf" in said


# ---------------------------------------------------------------- the GPU's summation order

BIG = 3e38


@pytest.mark.triton_matrix
def test_a_modelled_run_sums_a_block_in_halves_as_the_warp_shuffles_do():
    x = torch.tensor([BIG, -BIG, BIG, 0.0])
    case = Case({"x": tensor_arg(x)})
    chk = check(G.row_sum, "compiled")
    plain = InterpreterBackend().run(chk, case)
    gpu = InterpreterBackend(GPU).run(chk, case)
    assert view(plain, case).targets["returned"].values[0] == np.float32(np.float32(BIG) * np.float32(1e-30))
    assert view(gpu, case).targets["returned"].values[0] == np.inf  # (BIG + BIG) + (-BIG + 0): inf, * 1e-30
    assert "reduction order" in gpu.trace.modelled and not plain.trace.modelled
