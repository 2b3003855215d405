"""Flags never pass an element: a difference a flag marks (`fragile` near-ties and near-poles, `range-edge`
overflows on the way, `coarse` range-edge without the interpreter's dataflow) passes only within the problem's
measured sensitivity (the float64 reference over inputs perturbed by one rounding: tdiff.judge.sensitivity), and the
range edge forgives only results whose exact value does not fit the output's dtype. CPU only."""

from pathlib import Path

import numpy as np
import pytest
import torch

import tdiff
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case, TensorArg
from tdiff.core.rerun import PERTURBED
from tdiff.execute.backends.reference import ReferenceBackend
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.judge import sensitivity
from tdiff.judge import verdict as V
from tdiff.judge.compare import compare
from tdiff.judge.evidence import gather
from tdiff.judge.rules import Declared, Rules
from tdiff.judge.targets import view
from tdiff.strategies import tensor_arg
from tests import hostile as H
from tests import sensitivity_kernels as S

# no kernel reduction: no test here asserts on it (tests/test_reduce.py does), and a failing check with a
# reproducer would spend up to its 30 s budget on it
OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=5,
                        reduce_budget=0)
BELOW_2_15 = 32752.0  # float16: x * 2 = 65504, its largest value, exactly; x * 4 overflows
ONE_UP = float(np.nextafter(np.float32(1.0), np.float32(2)))


def half(*values):
    return torch.tensor(values, dtype=torch.float16)


def verdict(kernel, **inputs):
    check = kernel.__tdiff_checks__[0]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    return judge.verdict(Case({k: tensor_arg(v) for k, v in inputs.items()}))


def perturbed_runs(ev):
    return sorted(r.k for r in ev.extra if r.how == PERTURBED)


def text(v):
    return " ".join(v.reasons) + " " + " ".join(t for _, t in v.notes)


# ---------------------------------------------------------------- the measurement

def test_the_perturbations_are_one_rounding_of_each_floating_input_and_reproducible():
    x = np.array([1.0, -3.0, 0.0, np.inf, 2.0**-140], np.float32)
    idx = np.array([3, 1], np.int64)
    case = Case({"x": TensorArg("float32", (5,), (1,), 0, x), "idx": TensorArg("int64", (2,), (1,), 0, idx), "s": 0.5})
    base = sensitivity.perturbed_case(case, 0)
    assert base.inputs["x"].dtype == "float64" and np.array_equal(base.inputs["x"].storage, x.astype(np.float64))
    runs = [sensitivity.perturbed_case(case, k) for k in range(1, sensitivity.PERTURBATIONS + 1)]
    u = np.finfo(np.float32).eps / 2
    for p in runs:
        got = p.inputs["x"].storage
        with np.errstate(invalid="ignore"):
            rel = (got[:2] - x[:2]) / x[:2]
        assert np.allclose(np.abs(rel), u, rtol=1e-9), rel  # one rounding each, either way
        assert got[2] == 0.0 and got[3] == np.inf  # zeros and infinities stay
        assert p.inputs["idx"] is case.inputs["idx"] and p.inputs["s"] == 0.5  # integers and scalars untouched
    signs = {tuple(np.sign(p.inputs["x"].storage[:2] - x[:2])) for p in runs}
    assert len(signs) > 1  # not one direction for every run
    again = sensitivity.perturbed_case(case, 1)
    assert np.array_equal(again.inputs["x"].storage, runs[0].inputs["x"].storage)  # the same on every run


def test_a_case_that_passes_runs_no_measurement():
    v, ev = verdict(S.twice_via_four, x=half(1.0, -2.0, 3.5, 0.25))
    assert v.label == V.PASSED and perturbed_runs(ev) == [], (v, list(ev.extra))


# ---------------------------------------------------------------- the range edge, narrowed

def test_an_overflow_on_the_way_to_a_result_that_fits_fails():
    # float16 (x * 4) / 2 overflows for x = 20000 where the exact result, 40000, fits float16: the range-edge flag
    # (inputs above sqrt(65504) = 256 fed it, an overflow on the way) used to forgive inf against 40000
    v, ev = verdict(S.twice_via_four, x=half(20000.0, 1.0, 2.0, 3.0))
    assert v.label == V.INTERMEDIATE_OVERFLOW and v.finding, v  # (a finding: torch's float32 gives 40000)
    assert "flagged range-edge (overflow on the way) differ beyond what the problem allows" in text(v), text(v)
    assert perturbed_runs(ev) == [r.k for r in sensitivity.reruns()] == list(range(len(sensitivity.reruns())))


def test_an_overflow_the_problem_allows_at_this_precision_passes_naming_the_flag():
    # x = 32752: x * 2 is float16's largest value exactly, and one rounding of x up takes the exact result past
    # float16's range: inf is what this precision allows, and the caveat names the flag
    v, _ = verdict(S.twice_via_four, x=half(BELOW_2_15, 1.0, 2.0, 3.0))
    assert not v.failed, v
    (note,) = [t for k, t in v.notes if k == "measured"]
    assert "flagged range-edge (overflow on the way)" in note and "moves by inf" in note, note


def test_an_overflow_of_float32_arithmetic_from_inputs_at_its_limits_stays_a_counted_caveat():
    # float32 (x * 4) / 2 at x = 1e38: float32 is the widest arithmetic kernels use, no perturbation of the inputs
    # measures the overflow (the float64 reference does not overflow), and library kernels do it at float32's
    # limits (liger's layer norm squares 1e20): forgiven as before, as its own caveat
    v, _ = verdict(S.twice_via_four, x=torch.tensor([1e38, 1.0, 2.0, 3.0]))
    assert not v.failed and [k for k, _ in v.notes] == ["range-edge (float32 overflow)"], v


def test_the_float32_overflow_exemption_asks_for_inputs_at_float32s_limits():
    from tdiff.judge.edges import _at_float32_limits

    def case(**tensors):
        return Case({k: tensor_arg(v) for k, v in tensors.items()})

    # FlagGems' layer norm: float32 x at the limits beside a float16 bias; bfloat16 has float32's range
    assert _at_float32_limits(case(x=torch.tensor([1e38, 0.0]), b=half(1.0)))
    assert _at_float32_limits(case(x=torch.tensor([3e38], dtype=torch.bfloat16)))
    # infinities are not float32's limit: arithmetic on them is exact (exp(-inf) = 0), so a NaN a kernel makes of
    # them (-inf - -inf: liger 22) is measured, not forgiven
    assert not _at_float32_limits(case(x=torch.tensor([float("inf")], dtype=torch.bfloat16)))
    assert not _at_float32_limits(case(x=torch.tensor([float("-inf"), 1.0])))
    # float16 never gets there: 60000 and its infinities are ordinary float16 values
    assert not _at_float32_limits(case(x=half(60000.0, float("inf"))))
    assert not _at_float32_limits(case(x=torch.tensor([1e19, 1.0])))  # (below sqrt(max float32) = 1.8e19)


def test_float16_statistics_of_a_float16_row_fail_where_the_mean_fits():
    # 65 x 1023.5 (inputs above sqrt(65504) = 256): the float16 sum overflows, the mean 1023.5 fits float16
    x = torch.full((1, 65), 1023.5, dtype=torch.float16)
    v, _ = verdict(S.row_mean_fp16_sum, x=x)
    assert v.label == V.INTERMEDIATE_OVERFLOW and "interpreter=inf, reference=1023.5" in text(v), v
    v, _ = verdict(S.row_mean_fp32_sum, x=x)  # the correct twin: statistics in float32
    assert v.label == V.PASSED and not v.notes, v


def test_the_kernels_own_float64_run_is_no_evidence_that_the_exact_result_does_not_fit():
    # x * 4 instead of x * 2 at x = 20000: inf against 40000, both at the range edge, and the kernel's float64 run
    # (80000) beyond float16: the problem's own value (the float64 reference: 40000) fits, so the bug fails
    v, ev = verdict(S.twice_as_four, x=half(20000.0))
    assert v.label == V.VS_REFERENCE, v  # (a bug, not a finding: the kernel's float64 run, 80000, is wrong too)
    assert perturbed_runs(ev), list(ev.extra)


def test_a_result_whose_exact_value_does_not_fit_still_passes_at_the_range_edge():
    # exp(183) overflows float32 and inf - inf is NaN; the exact result, -4e84, does not fit float32 either
    v, ev = verdict(H.kl_log_target, t=torch.tensor([183.375, 102.3125]), y=torch.tensor([272352.0, 0.0]))
    assert not v.failed and any(k == "range-edge" for k, _ in v.notes), v


# ---------------------------------------------------------------- fragile: near-poles and near-ties

def test_a_pole_flag_does_not_forgive_eps_outside_the_sqrt():
    # a tiny row: mean(x * x) underflows to 0, sqrt(0) is near its pole (fragile), and the flag used to forgive
    # x / (0 + eps) = 1e-28 against the reference's x / sqrt(0 + eps) = 1e-29, a factor 10, not rounding
    v, _ = verdict(H.rms_eps_outside, x=torch.full((1, 4), 1e-30))
    assert v.label == V.VS_REFERENCE, v
    assert "flagged fragile (near-tie or near-pole) differ beyond what the problem allows" in text(v), text(v)


def test_a_near_tie_the_problem_does_not_have_fails_and_one_it_has_passes():
    # 0 and 1e-5 both round to 1000 + 0 in the kernel (x + 1000 - 1000): the kernel's own rounding ties them, the
    # problem does not (one rounding of the inputs never moves the reference's argmax): a flag does not forgive
    v, _ = verdict(H.argmax_rounded, x=torch.tensor([[0.0, 1e-5, -3.0]]))
    assert v.label == V.VS_REFERENCE and "flagged fragile (near-tie or near-pole)" in text(v), v
    # 1 and the next float32: one rounding of the inputs moves the reference's argmax: either index is right
    v, _ = verdict(H.argmax_rounded, x=torch.tensor([[1.0, ONE_UP, -3.0]]))
    assert not v.failed, v
    (note,) = [t for k, t in v.notes if k == "measured"]
    assert "0 vs 1" in note and "flagged fragile (near-tie or near-pole)" in note, note


# ---------------------------------------------------------------- coarse: no interpreter dataflow

def _compiled_without_dataflow(check, case):
    o = InterpreterBackend().run(check, case)
    o.backend, o.trace = "compiled", None
    return o


def _measure(check, case):
    wide = ReferenceBackend(BackendSpec("reference", upcast=True))

    def own(k):
        return ReferenceBackend(BackendSpec("reference", demote=True, faithful=sensitivity.faithful(k),
                                            flushed=sensitivity.flushed(k)))

    return sensitivity.measure(case, {r: (own(r.k) if sensitivity.native(r.k) else wide).run(
        check, sensitivity.perturbed_case(case, r.k)) for r in sensitivity.reruns()})


def test_the_coarse_range_edge_flag_waits_for_the_measurement_and_does_not_forgive_beyond_it():
    check = S.twice_via_four.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(half(20000.0, 1.0, 2.0, 3.0))})
    compiled, ref = _compiled_without_dataflow(check, case), ReferenceBackend().run(check, case)
    # nothing to measure with: the flag forgives as before, counted as unmeasured
    cmp = compare(compiled, ref, case, Rules())
    assert cmp.ok and [(f.flags, f.unmeasured) for f in cmp.forgiven] == [
        (("range-edge (inputs at the limits, no dataflow)",), "the check has no reference to perturb")], cmp.forgiven
    # a reference to perturb: the element waits for the measurement ...
    cmp = compare(compiled, ref, case, Rules(Declared(measurable=True)))
    (m,) = cmp.mismatches
    assert m.measure_pending == 1 and not cmp.forgiven, m
    # ... which does not explain inf against 40000
    cmp = compare(compiled, ref, case, Rules(Declared(measurable=True), sensitivity=_measure(check, case)))
    (m,) = cmp.mismatches
    assert m.measure_pending == 0 and "flagged range-edge (inputs at the limits, no dataflow)" in m.message, m.message
    # where one rounding of the input takes the exact result past float16's range, it does
    case = Case({"x": tensor_arg(half(BELOW_2_15, 1.0, 2.0, 3.0))})
    compiled, ref = _compiled_without_dataflow(check, case), ReferenceBackend().run(check, case)
    cmp = compare(compiled, ref, case, Rules(Declared(measurable=True), sensitivity=_measure(check, case)))
    assert cmp.ok and [(f.why, f.flags) for f in cmp.forgiven] == [
        ("measured", ("range-edge (inputs at the limits, no dataflow)",))], cmp.forgiven


def test_without_a_reference_a_flag_forgives_as_an_unmeasured_caveat():
    # the near-tie, judged where nothing can be perturbed: today's rule, named as unmeasured in the caveat
    check = H.argmax_rounded.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.tensor([[0.0, 1e-5, -3.0]]))})
    interp, ref = InterpreterBackend().run(check, case), ReferenceBackend().run(check, case)
    ev = gather(case, check.kernel_name, {"interpreter": interp, "reference": ref}, Rules())
    v = V.decide(ev)
    assert not v.failed and [k for k, _ in v.notes] == ["near-tie, unmeasured"], v
    assert "not measured: the check has no reference to perturb" in v.notes[0][1], v.notes
    # with a reference to perturb, the same evidence asks for the measurement instead of passing
    ev = gather(case, check.kernel_name, {"interpreter": interp, "reference": ref},
                Rules(Declared(measurable=True)))
    v = V.decide(ev)
    assert v.label == V.UNDECIDED and v.needs == sensitivity.reruns(), v
    assert view(interp, case).targets["returned"].fragile.any()  # (the element is flagged)


# ---------------------------------------------------------------- the dataflow scale, measured; the ensemble

def _final(kernel, **inputs):
    check = kernel.__tdiff_checks__[0]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    return judge.verdict(Case({k: tensor_arg(v) for k, v in inputs.items()}), final=True)


QUARTERS = torch.tensor([0.1, 0.3, 0.7, 0.9], dtype=torch.float32)


def test_an_unstable_algorithm_within_the_dataflow_scale_fails_as_numerically_unstable():
    # (x + 1024) - 1024: the dataflow scale follows the kernel's own 1024 and used to pass it; one rounding of x moves
    # the answer by 1e-8, the kernel's random-rounding ensemble by 1e-4
    v, ev = _final(S.offset_roundtrip, x=QUARTERS)
    assert v.label == V.NUMERICALLY_UNSTABLE, v
    assert "within the kernel's dataflow tolerance" in text(v) and "random" in text(v), text(v)
    assert sorted(r.k for r in ev.extra if r.how == "rounded") == list(range(sensitivity.ENSEMBLE + 1))


def test_the_unstable_verdict_names_the_line_where_the_spread_grows():
    v, _ = _final(S.offset_split, x=QUARTERS)
    assert v.label == V.NUMERICALLY_UNSTABLE, v
    assert "the spread grows at tests/sensitivity_kernels.py" in text(v) and "z = y - 1024.0" in text(v), text(v)


def test_an_unstable_algorithm_passes_when_its_precision_is_declared():
    v, _ = _final(S.offset_roundtrip_declared, x=QUARTERS)
    assert not v.failed, v


def test_the_dataflow_scale_unmeasured_passes_with_a_caveat_that_says_so():
    v, _ = _final(S.offset_roundtrip_unmeasured, x=QUARTERS)
    assert not v.failed, v
    kinds = [k for k, _ in v.notes]
    assert "dataflow scale, unmeasured" in kinds, v.notes


def test_a_numerically_unstable_case_gets_a_verified_reproducer(tmp_path):
    # the reproducer judges the elements the measured scale decided by the strict tolerance (its dataflow scale
    # would call them equal), so it shows the divergence in a fresh process and is written
    check = S.offset_split.__tdiff_checks__[0]
    r = tdiff.Runner(OPTS.with_(isolation="none", repro_dir=tmp_path)).run_check(check)
    assert r.status == "failed" and "numerically unstable" in r.report(), r.report()
    assert list(tmp_path.rglob("repro.py")), r.report()


# ---------------------------------------------------------------- what a float32 computation of the problem carries

def test_float32_arithmetic_turns_a_references_float64_into_float32():
    from tdiff.execute.backends.float32_arithmetic import float32_arithmetic

    x = torch.tensor([[875.1413, 875.1421]])
    with float32_arithmetic():
        made = [x.double(), x.to(torch.float64), x.to(dtype=torch.float64), torch.zeros(2, dtype=torch.float64),
                x.to(torch.zeros(1, dtype=torch.float64)), torch.tensor([1.0], dtype=torch.double)]
        ln = torch.nn.functional.layer_norm(x.double(), (2,), eps=1e-5)
        half_kept = x.half()
    assert [t.dtype for t in made] == [torch.float32] * len(made) and half_kept.dtype == torch.float16
    exact = torch.nn.functional.layer_norm(x.double(), (2,), eps=1e-5)
    assert ln.dtype == torch.float32 and (ln.double() - exact).abs().max() > 1e-3  # float32's rounding of the mean
    assert x.double().dtype == torch.float64  # (only inside the block)


def test_the_float32_runs_are_the_reference_computed_in_float32_and_ignore_their_own_overflow():
    # the native runs are `reference:fp32`: the reference's float64 arithmetic in float32 ...
    from tdiff.core.rerun import Rerun
    from tdiff.drive.case_judge import CaseJudge  # noqa: F401  (the spec the judge asks for)

    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    check = S.layer_norm_two_pass.__tdiff_checks__[0]
    judge = runner.judge(check)
    k = sensitivity.PERTURBATIONS + 1
    assert sensitivity.native(k) and judge.rerun_spec(Rerun(PERTURBED, k=k)).label == "reference:fp32"
    assert judge.rerun_spec(Rerun(PERTURBED, k=1)).label == "reference:fp64"
    # ... and where that arithmetic overflows while the exact result fits, it measures nothing (an intermediate's
    # overflow is not what the problem allows)
    case = Case({"x": tensor_arg(torch.tensor([1e30, 1.0, 2.0, 3.0]))})
    m = _measure(S.abs_via_square.__tdiff_checks__[0], case)
    assert m.arithmetic["returned"][0] == 0.0 and m.spreads["returned"][0] < 1e25, m.spreads


def test_a_correct_float32_layer_norm_passes_by_the_float32_computation_and_a_one_pass_variance_fails(monkeypatch):
    # [a, a + d]: the exact LayerNorm is +-1 whatever d, so no perturbation of the inputs moves it; float32's
    # rounding of the mean moves any float32 computation of it by about u * |a| / d (5e-3 here), PyTorch's too
    x = torch.tensor([[-4135.744, -4135.846]])
    v, _ = verdict(S.layer_norm_two_pass, x=x)
    assert v.label == V.PASSED, v
    (note,) = [t for k, t in v.notes if k == "float32 computation"]  # a counted caveat that says so
    assert "within what a float32 computation of the reference gives" in note, note
    v, _ = verdict(S.layer_norm_one_pass, x=x)  # u * a^2 / d^2: far beyond it
    assert v.failed, v
    # the float32 computation is what passes the correct kernel: without it (the reference's own float64), it fails
    import contextlib

    from tdiff.execute.backends import reference
    monkeypatch.setattr(reference, "float32_arithmetic", lambda *a, **k: contextlib.nullcontext())
    v, _ = verdict(S.layer_norm_two_pass, x=x)
    assert v.failed, v


def test_a_flag_does_not_widen_the_tolerance_by_the_kernels_dataflow_scale():
    # (x + 1024) - 1024 loses x's low bits: within the dataflow scale (which follows the kernel's own 1024), and
    # flagged fragile (it adds 0 * sqrt(rounding noise)); neither the flag nor the scale gives it a magnitude
    v, _ = verdict(S.offset_roundtrip_near_pole, x=torch.tensor([0.3, 0.7, 0.1, 0.9]))
    assert v.failed and "flagged fragile (near-tie or near-pole)/dataflow scale differ beyond" in text(v), text(v)


def test_an_index_among_values_a_faithful_float32_rounding_apart_may_come_out_either_way():
    # rows [0, 6.2e-5]: + 1000 in float32 is 1000 and its next float, one ulp apart (the exact sums far more than one
    # rounding of the inputs apart). A GPU's tanh, exp or fused multiply-add rounds faithfully, not to nearest: the
    # reference computed in float32 with each rounding one ulp either way at random (`reference:fp32:faithful<k>`)
    # ties or swaps some of them, so the index the reference's argmax gives may be either, for that target only
    from tdiff.core import dtypes
    from tdiff.core.rerun import Rerun

    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    check = S.argmax_offset.__tdiff_checks__[0]
    judge = runner.judge(check)
    last = sensitivity.PERTURBATIONS + sensitivity.NATIVE + sensitivity.FAITHFUL
    assert judge.rerun_spec(Rerun(PERTURBED, k=last)).label == f"reference:fp32:faithful{sensitivity.FAITHFUL}"
    assert BackendSpec.parse(f"reference:fp32:faithful{last}").faithful == last
    assert judge.rerun_spec(Rerun(PERTURBED, k=last + 1)).label == "reference:fp32:ftz"
    assert BackendSpec.parse("reference:fp32:ftz").flushed
    x = torch.tensor([[0.0, 6.2e-5]] * 8)
    m = _measure(check, Case({"x": tensor_arg(x)}))
    assert (m.spreads["returned"] == 0).all() and (m.arithmetic["returned"] == 0).all(), m  # nudges never tie
    assert (m.faithful["returned"] == 1).any(), m.faithful  # a faithful rounding does, in some rows
    i32 = dtypes.dtype("int32")
    assert (sensitivity.spread_in(m, "returned", i32, (8,), exact=True) == m.faithful["returned"]).all()


def test_a_near_tie_index_a_faithful_rounding_explains_passes_and_fails_without_it(monkeypatch):
    # [0, 3.5e-5] + 500 + 500 in float32: 500 + 3.5e-5 rounds to one ulp of 500, and 1000 + that half ulp of 1000
    # to even, 1000: the kernel ties (index 0) where the reference's 1000 + 3.5e-5 rounds up (index 1); one
    # faithful rounding of the reference's float32 sum ties it too (what the GPU's H200 softcap argmax showed)
    x = torch.tensor([[0.0, 3.5e-5]] * 4)
    v, ev = verdict(S.argmax_two_offsets, x=x)
    assert v.label == V.PASSED, v
    (note,) = [t for k, t in v.notes if k == "float32 computation"]  # a counted caveat
    assert "rounded faithfully" in note and "1 at (0,): 0 vs 1" in note and "near-tie" in note, note
    monkeypatch.setattr(sensitivity, "FAITHFUL", 0)
    v, _ = verdict(S.argmax_two_offsets, x=x)
    assert v.failed and "flagged fragile (near-tie or near-pole)" in text(v), v


def test_a_faithful_rounding_is_a_function_of_its_operands_and_its_pairs_move_opposite_ways():
    # equal operands give equal results in every faithful run (an exact tie stays a tie: only the inputs' own
    # perturbation may break it); a pair of runs (seeds 2j-1, 2j) moves each result opposite ways, so two values one
    # ulp apart meet or swap in one run of a pair wherever the pair moves them differently (2/3 of the time)
    from tdiff.execute.backends.float32_arithmetic import float32_arithmetic

    x = torch.linspace(-3, 3, 4001, dtype=torch.float64)
    steps = []
    for seed in range(1, sensitivity.FAITHFUL + 1):
        with float32_arithmetic(seed):
            tied = torch.tanh(torch.stack([x, x], -1))
            moved = torch.tanh(x)
        assert tied.dtype == torch.float32 and torch.equal(tied[:, 0], tied[:, 1]), seed
        steps.append(torch.sign(moved.double() - torch.tanh(x).float().double()))
    assert torch.equal(steps[0], -steps[1]) and torch.equal(steps[2], -steps[3])  # antithetic pairs
    assert not torch.equal(steps[0], steps[2])  # (two pairs, two hashes)
    share = (steps[0] != 0).double().mean().item()
    assert 0.6 < share < 0.73, share  # two thirds of the results move in a run


def test_a_math_functions_subnormal_operand_flushed_to_zero_as_on_a_gpu_passes_and_fails_without_the_model(
        monkeypatch):
    # Triton compiles libdevice calls with flush-to-zero (`enable_reflect_ftz`): tanh(x * 1e-30) * 1e25 is 0 on a GPU
    # where x * 1e-30 is subnormal, 1e-15 exactly (the H200's liger DyT forward: 0 vs 6.85e-30). A float32 run of
    # the reference whose math functions flush subnormals too (`reference:fp32:ftz`) gives it: a float32 computation's
    from tdiff.execute.backends import float32_arithmetic

    x = torch.tensor([1e-10, 2e-10])
    v, _ = verdict(S.scaled_tanh_flushed, x=x)
    assert v.label == V.PASSED, text(v)
    (note,) = [t for k, t in v.notes if k == "float32 computation"]
    assert "flush subnormals to zero" in note and "1e-15 at (0,): 0 vs 1e-15" in note, note
    monkeypatch.setattr(float32_arithmetic, "FLUSHED", frozenset())
    v, _ = verdict(S.scaled_tanh_flushed, x=x)
    assert v.failed and "beyond what the problem allows" in text(v), text(v)


def test_the_flushed_run_keeps_a_references_gradients_and_the_sign_of_zero():
    # a reference that takes gradients (a loss's backward) through a math function of a subnormal value still does
    # under `reference:fp32:ftz` (else its measurement fails and measures nothing)
    from tdiff.execute.backends.float32_arithmetic import float32_arithmetic

    x = torch.tensor([-1e-40, 0.5, 1e-40], dtype=torch.float64, requires_grad=True)
    with float32_arithmetic(flush=True):
        y = torch.tanh(x * 1.0)
        (g,) = torch.autograd.grad(y.sum(), x)
    assert y[0].item() == 0 and torch.signbit(y[0]) and y[2].item() == 0 and not torch.signbit(y[2])
    assert g[0].item() == 0 and abs(g[1].item() - (1 - np.tanh(0.5) ** 2)) < 1e-6


def test_a_zero_dimensional_result_is_measured_as_the_one_element_it_is_compared_as():
    # a 0-d output (a full sum) is compared as shape (1,): its measurement, taken on the reference's 0-d value,
    # applies to it (it did not: "the reference gave no such output", the dataflow scale passing it unmeasured)
    from tdiff.core import dtypes

    m = sensitivity.Sensitivity(spreads={"returned": np.array(0.5)}, exact={"returned": np.array(-4.0)},
                                reach={"returned": np.array(4.5)}, arithmetic={"returned": np.array(0.01)}, count=6)
    got = sensitivity.spread_in(m, "returned", dtypes.dtype("float16"), (1,))
    assert got is not None and got.shape == (1,) and got[0] == 0.5
    assert sensitivity.spread_in(m, "returned", dtypes.dtype("float16"), (2,)) is None  # (another target's shape)


def test_a_value_stored_after_a_branch_on_a_near_tie_is_measured_and_fails_without_the_branch_flag(monkeypatch):
    # liger's token accuracy on an H200 (a soak seed): capped logits [0, 30 * tanh(FLT_MIN / 30)], the tanh's
    # subnormal operand flushed on the GPU: a tie, index 0, accuracy 1, where the float64 reference's index is 1. The
    # kernel stores a constant chosen by `1.0 if idx == y else 0.0`: the branch on a fragile index makes the store
    # fragile (`Session.sway`), so the float32 computation whose math functions flush subnormals decides it
    from tdiff.execute.interpreter.session import Session

    x, y = torch.tensor([[0.0, 1.1754943508222875e-38]]), torch.tensor([0])
    v, _ = verdict(S.softcap_hit_flushed, x=x, y=y)
    assert v.label == V.PASSED, text(v)
    (note,) = [t for k, t in v.notes if k == "float32 computation"]
    assert "flush subnormals to zero" in note and "1 at (0,): 1 vs 0" in note, note
    monkeypatch.setattr(Session, "sway", lambda self, lanes: None)
    v, _ = verdict(S.softcap_hit_flushed, x=x, y=y)
    assert v.failed, text(v)


def test_the_first_float32_run_computes_the_case_itself_so_a_rounding_one_ulp_moves_is_measured(monkeypatch):
    # liger's sparsemax forward on an H200 (a soak seed): a row [-31.457811, -2^23] keeps one value, tau = x0 - 1
    # rounds to even in float32 (x0 - 1 crosses into [32, 64)), and y = x0 - tau is 1 - 2^-19 where the float64
    # reference gives 1 whatever x0. A float32 computation of the reference rounds the same way on the case's own
    # inputs; on inputs moved by one ulp (every other float32 run) x0 - 1 is exact. The first run, unmoved, measures it
    sparsemax = pytest.importorskip("suites.liger.sparsemax")
    x = torch.zeros(2, 5, 2)
    x[0, 3] = torch.tensor([-8388608.0, -31.45781135559082])
    case = Case({"x": tensor_arg(x), "dim": -1})
    first = sensitivity.perturbed_case(case, sensitivity.PERTURBATIONS + 1)
    assert np.array_equal(first.inputs["x"].storage, case.inputs["x"].storage)
    moved = sensitivity.perturbed_case(case, sensitivity.PERTURBATIONS + 2).inputs["x"].storage
    assert (moved != case.inputs["x"].storage)[np.asarray(case.inputs["x"].storage) != 0].all()
    (check,) = [c for c in sparsemax.lib._sparsemax_forward_kernel.__tdiff_checks__ if c.name == "forward"]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))

    def judged():
        return runner.judge(check).verdict(case)[0]  # (a new Tally counts its cases)

    v = judged()
    assert v.label == V.PASSED, text(v)
    (note,) = [t for k, t in v.notes if k == "float32 computation"]
    assert "(0, 3, 1): 0.999998 vs 1" in note, note
    monkeypatch.setattr(sensitivity, "unmoved", lambda k: False)  # every float32 run on moved inputs, as before
    assert judged().label == V.PASSED  # (a faithful run, on moved inputs, rounds one ulp as the case's own does)
    measure = sensitivity.measure

    def rounded_to_nearest_only(case, extra):
        measured = measure(case, extra)
        measured.faithful.clear()
        return measured

    monkeypatch.setattr(sensitivity, "measure", rounded_to_nearest_only)
    assert judged().failed


def test_a_float32_runs_own_error_counts_where_the_inputs_move_cancels_it(monkeypatch):
    # FlagGems' layer norm without affine on CPU (a random seed of the default profile): a constant row
    # float32[1, 128] of -0.4733431. The exact result is 0, and torch's float32 mean of equal values is exact, so the
    # case's own float32 run errs 0; the kernel's sum rounds its mean 3 ulps off, and (x - mean) * 316 is -2.8e-5.
    # The float32 runs on inputs moved by one ulp round their mean onto a moved value, putting those elements back at
    # 0: measured only against the case's exact result, the float32 computation erred 0 there. Against the float64
    # result of its own moved inputs (`moved64`) it errs 7.8e-6 to 1.1e-5, a float32 computation's rounding
    layer_norm = pytest.importorskip("suites.flaggems.layer_norm")
    case = Case({"x": tensor_arg(torch.full((1, 128), -0.4733431)), "weight": None, "bias": None})
    for j in range(sensitivity.MOVED64):
        k = sensitivity.PERTURBATIONS + sensitivity.NATIVE + sensitivity.FAITHFUL + sensitivity.FLUSH + 1 + j
        twin = sensitivity.moved64(k)
        assert sensitivity.native(twin) and not sensitivity.native(k) and not sensitivity.unmoved(twin), (k, twin)
        assert np.array_equal(sensitivity.perturbed_case(case, k).inputs["x"].storage,
                              sensitivity.perturbed_case(case, twin).inputs["x"].storage)
    (check,) = [c for c in layer_norm.L.layer_norm_persistent_kernel_multiline.__tdiff_checks__
                if c.name == "no_affine"]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))

    def judged():
        return runner.judge(check).verdict(case)[0]

    v = judged()
    assert v.label == V.PASSED, text(v)
    (note,) = [t for k, t in v.notes if k == "float32 computation"]
    assert "-2.8273e-05 vs 0" in note, note
    monkeypatch.setattr(sensitivity, "_own_errors", lambda case, runs: {})  # measured against the case's result only
    assert judged().failed


def test_a_faithful_tanh_moves_the_gradient_torch_computes_from_it(monkeypatch):
    # liger's soft-capped cross entropy on CPU (a soak seed): the target's gradient is 1 - t^2 of a saturated tanh
    # (x = 11, softcap 2.5: 6e-4), where one ulp of t is 1.5e-4 of the result. torch's float32 autograd errs 1e-7
    # there by the luck of its rounding, and inputs moved by one ulp cannot move a saturated tanh; the faithful runs
    # (tanh's result one ulp either way, its backward computing from that result, as a kernel's gradient does)
    # measure it, once, for a float output too. Without either, `numerically unstable`: a false alarm
    cross_entropy = pytest.importorskip("suites.liger.cross_entropy")
    from tdiff.execute.backends import float32_arithmetic as f32
    from tdiff.record.corpus import Entry

    entry = Entry(Path(__file__).parent.parent / "corpus" / "liger_cross_entropy_kernel"
                  / "softcap-151c51fa08a77c9b")
    case = entry.load_case()
    (check,) = [c for c in cross_entropy.lib.liger_cross_entropy_kernel.__tdiff_checks__ if c.name == "softcap"]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))

    def judged():
        return runner.judge(check).verdict(case)[0]

    v = judged()
    assert v.label == V.PASSED, text(v)
    grad_seen_by_autograd = f32._Float32Mode._faithful

    def moved_apart_from_autograd(self, func, out, operands=()):
        moved = grad_seen_by_autograd(self, func, out.detach() if isinstance(out, torch.Tensor) else out, operands)
        return out + (moved - out.detach()) if isinstance(out, torch.Tensor) and out.requires_grad else moved

    monkeypatch.setattr(f32._Float32Mode, "_faithful", moved_apart_from_autograd)
    assert judged().failed


def test_a_square_of_a_rounding_level_value_carries_the_product_of_its_errors():
    # liger's cross entropy z-loss on CPU (a new user's first run, default profile): a row [-17.35, 0] has
    # lse = log(1 + 2.9e-8), 0 in float32, and z = 1e-4 * lse^2 is 0 where the reference gives 2.8e-20. First-order
    # propagation gives lse * lse an error scale of 0 (both operands are 0); the product of the two operands'
    # errors (m0 * m1 * eps) is what the squared rounding is: without it, `disagrees with reference`
    cross_entropy = pytest.importorskip("suites.liger.cross_entropy")
    from tdiff.record.corpus import Entry

    entry = Entry(Path(__file__).parent.parent / "corpus" / "liger_cross_entropy_kernel"
                  / "forward-43fb181a6ce0db18")
    (check,) = [c for c in cross_entropy.lib.liger_cross_entropy_kernel.__tdiff_checks__ if c.name == "forward"]
    v = tdiff.Runner(OPTS.with_(isolation="none")).judge(check).verdict(entry.load_case())[0]
    assert v.label == V.PASSED, text(v)


@pytest.mark.parametrize("interpreter,spread,passes", [(-65504.0, 1080.0, True), (-65504.0, 1.0, True),
                                                      (65504.0, 1080.0, False), (-60000.0, 1080.0, False)])
def test_an_infinity_against_the_top_of_the_range_is_as_far_as_the_overflow_threshold(interpreter, spread, passes):
    """A float16 result of -inf against -65504 differs by a rounding, not infinitely: -inf stands for a value of at
    least 65520 (the largest float16 plus half an ulp), 16 from 65504 (an H200 run's group norm: compiled -inf where
    the interpreter gave -65504 and one rounding of the inputs moves the result by 1080, flagged range-edge). Of
    the opposite sign, or from farther than the problem moves, it still fails."""
    from tdiff.core import dtypes
    from tdiff.core.outcome import Outcome
    from tdiff.core.tolerance import Tolerance
    from tdiff.judge.comparison import Comparison

    assert sensitivity.saturated_distance(np.array([-np.inf]), np.array([-65504.0]), dtypes.dtype("float16"))[0] == 16
    assert np.isinf(sensitivity.saturated_distance(np.array([-np.inf]), np.array([-65504.0]), None)[0])
    m = sensitivity.Sensitivity(spreads={"returned": np.array([spread])}, exact={"returned": np.array([-65500.0])},
                                reach={"returned": np.array([65510.0])}, arithmetic={"returned": np.array([0.0])},
                                count=15)
    cmp = Comparison(Outcome("compiled", spec=BackendSpec("compiled")),
                     Outcome("interpreter", spec=BackendSpec("interpreter")))
    flagged = np.array([True])
    left, pending, text = sensitivity.weigh("returned", dtypes.dtype("float16"), np.array([-np.inf]),
                                            np.array([interpreter]), flagged, {sensitivity.RANGE_EDGE: flagged},
                                            Tolerance(rtol=0.00195, atol=6.1e-05), m, True, cmp)
    assert (not left.any()) == passes and pending == 0, text
