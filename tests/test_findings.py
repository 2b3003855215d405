"""Findings apart from bugs (tdiff.judge.findings): a kernel that loses accuracy the problem does not names the
torch behaviour it differs from and where its value went astray, and the run counts findings and bugs apart."""

import torch

import tdiff
from tdiff.core.case import Case
from tdiff.judge import verdict as V
from tdiff.record.summary import is_finding, problem_lines, total_lines
from tdiff.strategies import tensor_arg
from tests import finding_kernels as F

OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=5)


def verdict(kernel, final=True, **inputs):
    """The final verdict on one case of `kernel`'s first check (or of a check given itself)."""
    check = kernel.__tdiff_checks__[0] if hasattr(kernel, "__tdiff_checks__") else kernel
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    return judge.verdict(Case({k: tensor_arg(v) for k, v in inputs.items()}), final=final)


def test_a_float16_sum_that_overflows_where_the_mean_fits_is_an_intermediate_overflow():
    # 14 values of 4680: 65520 overflows float16 (65504) in the kernel's float16 sum; torch.mean gives 4680
    v, _ = verdict(F.mean_half, x=torch.full((14,), 4680.0, dtype=torch.float16))
    assert v.label == V.INTERMEDIATE_OVERFLOW and v.finding and v.failed, v
    said = v.reasons[0]
    assert "is inf" in said and "and computed by torch at float32" in said and "float32) 4680;" in said
    assert "overflowed at tests/finding_kernels.py:16: total = tl.sum(x, axis=0)" in said


def test_a_factor_cast_to_float16_before_it_meets_a_large_one_is_an_intermediate_underflow():
    # liger's SwiGLU: silu(-23) = -2.4e-9 cast to float16 is -0 before it meets b = 65504, where the product
    # (-1.5e-4) fits float16 (found by the CPU soak at a random seed, reported as a bug before)
    from suites.liger import swiglu as S

    a = torch.tensor([0.0, -11.5], dtype=torch.float16).reshape(1, 2, 1)
    b = torch.tensor([0.0, 65504.0], dtype=torch.float16).reshape(1, 2, 1)
    check = next(c for c in S.lib._swiglu_forward_kernel.__tdiff_checks__ if c.name == "forward")
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    v, _ = judge.verdict(Case({"a": tensor_arg(a), "b": tensor_arg(b), "gate_multiplier": 2.0}), final=True)
    assert v.label == V.INTERMEDIATE_UNDERFLOW and v.finding, v
    assert "underflowed at" in v.reasons[0] and "silu(a_row).cast(b_row.dtype) * b_row" in v.reasons[0]


def test_a_sum_that_fits_passes_and_a_bug_is_no_finding():
    v, _ = verdict(F.mean_half, x=torch.full((14,), 100.0, dtype=torch.float16))
    assert not v.failed, v
    assert not V.Verdict(V.VS_REFERENCE).finding and not V.Verdict(V.KERNEL_BUG).finding


def record(verdicts, status="failed"):
    return {"id": "m::k[c]", "status": status, "cases": 3, "wall": 1.0, "notes": [], "why": "",
            "divergences": [{"verdict": v, "failed": True, "finding": v in V.findings.LABELS, "case": "x=...",
                             "shrunk": None, "repro": None, "repro_note": "", "corpus": None, "source": "search"}
                            for v in verdicts]}


def test_the_run_counts_findings_and_bugs_apart():
    found, bug = record([V.INTERMEDIATE_OVERFLOW]), record([V.VS_REFERENCE])
    both = record([V.NUMERICALLY_UNSTABLE, V.KERNEL_BUG])
    assert is_finding(found) and not is_finding(bug) and not is_finding(both)
    assert "(a finding" in problem_lines(found, "FAILED")[0]
    assert "(a finding" not in problem_lines(bug, "FAILED")[0]
    summaries = [dict(found, id="a", seconds={}, shims={}, compiles=0, compile_seconds=0.0, judged=3),
                 dict(bug, id="b", seconds={}, shims={}, compiles=0, compile_seconds=0.0, judged=3),
                 dict(record([], "passed"), id="c", seconds={}, shims={}, compiles=0, compile_seconds=0.0, judged=3)]
    first = total_lines(summaries, ["FAILED", "FAILED", "PASSED"], shims=False)[0]
    assert "; 1 passed, 2 failed; of those failed: 1 bug(s) or error(s), 1 finding(s);" in first, first


def _check(kernel, name):
    return next(c for c in kernel.__tdiff_checks__ if c.name == name)


# x * y = 2.03e-45 rounds to one subnormal step (1.4e-45), times 2e7: 2.8e-38 where the exact product is 4.06e-38
# (a soak seed: liger's large-vocabulary cross entropy wrote gradients of -3.1e-38 where the reference gives 1.7e-38)
BOTTOM = dict(x=torch.tensor([2.9e-23, 1.0]), y=torch.tensor([7e-23, 2.0]), z=torch.tensor([2e7, 3.0]))


def test_values_at_the_bottom_of_the_range_after_an_underflow_pass_with_the_caveat():
    v, _ = verdict(_check(F.product3, "product"), **BOTTOM)
    assert not v.failed, v
    said = [t for k, t in v.notes if k == "range-edge (underflow)"]
    assert said and "within 4 of float32's smallest normal values of zero" in said[0], v.notes


def test_a_wrong_sign_at_the_bottom_fails_where_nothing_underflowed():
    # the same bottom values without an underflow on their way: x * y * z of normal factors, negated
    v, _ = verdict(_check(F.product3, "negated"), x=torch.tensor([1e-19, 1.0]), y=torch.tensor([1e-19, 2.0]),
                       z=torch.tensor([3e-1, 3.0]))
    assert v.failed, v
    v, _ = verdict(_check(F.product3, "negated"), **BOTTOM)
    assert v.failed, v  # (the second element, 6 against -6, is no bottom value)
