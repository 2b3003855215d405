"""Findings: a kernel that loses accuracy the problem does not, told apart from a bug.

Two verdicts say so, each naming the torch behaviour the kernel differs from (the check's reference computed by
torch at float32, the precision a correct kernel accumulates in: the sensitivity measurement's `reference:fp32`
run) and where the kernel's value went astray:

- `intermediate overflow` (`underflow`): the kernel's result is an infinity or NaN (a zero or subnormal) where the
  exact result fits its dtype as a normal number and torch's float32 computation of the reference keeps it so, and
  the interpreter saw a value the kernel computed leave its dtype's range on the way (the line, from the dataflow's
  record): a statistic, partial sum or factor kept in a type narrower than the one torch keeps it in (a float16 sum
  whose partial sums stay float16: inf where `torch.mean` gives 4680; liger's SwiGLU casting silu(a) to float16
  before it meets b: 0 where the product is -1.5e-4).
- `numerically unstable`: the kernel's result differs from the reference beyond what the problem allows at its
  precision, and its own float program run as a random-rounding ensemble moves as far (cancellation, eps placed
  where it no longer guards); the line where the ensemble's spread grows, where one does.

A finding fails its check as a bug does (the kernel's answer is not torch's), and the run counts findings and bugs
apart. A check that accepts the kernel's precision declares it (a tolerance, or its inputs kept in range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.dtypes import DType
from ..core.rerun import FLOAT64_RUN, PERTURBED, Rerun
from .comparison import Comparison
from .edges import overflows
from .evidence import Evidence, same_path
from .sensitivity import ENSEMBLE, MARGIN, PERTURBATIONS, ensemble_reruns, ensemble_spread, fit, growth
from .targets import view

NUMERICALLY_UNSTABLE = "numerically unstable"
INTERMEDIATE_OVERFLOW = "intermediate overflow"
INTERMEDIATE_UNDERFLOW = "intermediate underflow"
#: the verdicts that report a finding (not a bug)
LABELS = (NUMERICALLY_UNSTABLE, INTERMEDIATE_OVERFLOW, INTERMEDIATE_UNDERFLOW)
#: the sensitivity measurement's first run of the reference computed at float32 (torch's own algorithms)
TORCH32 = Rerun(PERTURBED, k=PERTURBATIONS + 1)


@dataclass(frozen=True)
class Finding:
    label: str
    reason: str


def torch32(ev: Evidence, path: str, j: tuple[int, ...], shape: tuple[int, ...]) -> float | None:
    """What the check's reference computed by torch at float32 gives at element `j` of `path` (on the inputs moved
    by one ulp: the measurement's first float32 run), where that run is there."""
    o = ev.extra.get(TORCH32)
    if o is None or o.error is not None:
        return None
    t = view(o, ev.case).targets.get(path)
    values = fit(t.values, shape) if t is not None else None
    return float(values[j]) if values is not None else None


def _fmt(v: float | None) -> str:
    return "?" if v is None else f"{v:.6g}"


def left_range(ev: Evidence, cmp: Comparison, side: str, ref: str) -> Finding | tuple[Rerun, ...] | None:
    """`intermediate overflow` (or `underflow`), where every element `side` gets wrong is an infinity or NaN (a
    finite value) whose exact value fits the target's dtype as a normal number, torch's float32 computation of the
    reference gives a normal value there, the interpreter's dataflow saw damage upstream of that element, a value the
    kernel computed overflowed (fell below its dtype's normal range: a zero or a coarsely rounded subnormal) on the
    way (an interpreter run's record of the line), and the kernel's own program run in float64 (the interpreter on
    upcast inputs: the same operations, none out of range) agrees with the reference there: the kernel's formula is
    right and its type too narrow. The float64 run where it is missing; else None (a formula the float64 run gets
    wrong too is a bug, whatever over- or underflowed on the way)."""
    sens = ev.rules.sensitivity
    guide = ev.rules.guide
    if sens is None or guide is None or ev.outcomes[side].error is not None:
        return None
    if not _lines(ev, side, "overflow") and not _lines(ev, side, "underflow"):
        return None
    if FLOAT64_RUN not in ev.extra:
        return (FLOAT64_RUN,)
    wide = ev.extra[FLOAT64_RUN]
    if wide.error is not None or not same_path(guide.outcome, wide):
        return None
    mine, wider = view(ev.outcomes[side], ev.case), view(wide, ev.case)
    first: tuple[str, str, tuple[int, ...], float, float, float] | None = None
    for m in cmp.mismatches:
        if m.kind != "values" or m.mask is None:
            return None
        t, g, w = mine.targets.get(m.target), guide.targets.get(m.target), wider.targets.get(m.target)
        exact = fit(sens.exact.get(m.target), m.mask.shape)
        damaged = fit(g.overflow, m.mask.shape) if g is not None else None
        if t is None or w is None or exact is None or damaged is None or not t.dtype.is_float or m.tol is None:
            return None
        values, wide_values, wrong = fit(t.values, m.mask.shape), fit(w.values, m.mask.shape), m.mask
        if values is None or wide_values is None:  # (the targets compared have the mask's size)
            return None
        with np.errstate(invalid="ignore", over="ignore"):  # (the kernel's formula in float64: the reference's?)
            loose = m.tol.loosened(4)
            right = np.abs(wide_values - exact) <= loose.atol + loose.rtol * np.abs(exact)
        if not bool(right[wrong].all()):
            return None
        with np.errstate(invalid="ignore"):
            fits = ~overflows(exact, t.dtype) & (np.abs(exact) >= _normal(t.dtype))
            over = ~np.isfinite(values)
            under = np.isfinite(values)  # (a zero, or a value a subnormal intermediate rounded coarsely)
        for how, lost in (("overflow", over), ("underflow", under)):
            if bool((wrong & ~(lost & fits & damaged)).any()):
                continue
            j = tuple(int(v) for v in np.argwhere(wrong)[0]) if wrong.ndim else ()
            fp32 = torch32(ev, m.target, j, m.mask.shape)
            if fp32 is None or not math.isfinite(fp32) or abs(fp32) < _normal(t.dtype):
                return None
            if first is None:
                first = (how, m.target, j, float(values[j]), float(exact[j]), fp32)
            elif first[0] != how:
                return None
            break
        else:
            return None
    if first is None:
        return None
    how, path, j, got, exact_v, fp32 = first
    lines = _lines(ev, side, how)
    if not lines:
        return None
    line, lanes = next(iter(lines.items()))
    label = INTERMEDIATE_OVERFLOW if how == "overflow" else INTERMEDIATE_UNDERFLOW
    return Finding(label, (
        f"{side}'s `{path}` is {_fmt(got)} at {j} where the result fits its dtype: the reference gives "
        f"{_fmt(exact_v)} in float64, and computed by torch at float32 (torch keeps half types' intermediates in "
        f"float32) {_fmt(fp32)}; a value this kernel computed {how}ed at {line} ({lanes} lane(s)): it keeps an "
        "intermediate in a narrower type than torch does. A finding, not a rounding dispute: if the kernel means "
        "to (a half-precision intermediate), keep the check's inputs out of that range and record the region as an "
        "xfail"))


def _normal(dt: DType) -> float:
    """The smallest normal value of a float dtype."""
    import torch

    return float(torch.finfo(dt.torch).smallest_normal)


def _lines(ev: Evidence, side: str, how: str) -> dict[str, int]:
    """Where a run of the kernel (`side`'s own, else an interpreter opinion's) recorded a value leaving its dtype's
    range (`how`: overflow or underflow), in the order it met them."""
    for o in [ev.outcomes[side], *(o for o in ev.outcomes.values() if o.role.kind == "interpreter")]:
        found = (o.trace.overflowed if how == "overflow" else o.trace.underflowed) if o.trace is not None else {}
        if found:
            return found
    return {}


def unstable(ev: Evidence, cmp: Comparison, side: str, ref: str) -> Finding | tuple[Rerun, ...] | None:
    """`numerically unstable`, where the kernel's result differs from the reference beyond what the problem allows
    (`Comparison.beyond_problem`) and the kernel's own float program, run as a random-rounding ensemble, moves that
    far too (every such element within the strict tolerance plus `MARGIN` times the ensemble's spread); the
    ensemble's reruns where they are missing; else None (a difference rounding does not produce: a bug)."""
    if not cmp.beyond_problem or ev.outcomes[side].error is not None:
        return None
    missing = tuple(r for r in ensemble_reruns() if r not in ev.extra)
    if missing:
        return missing
    spreads, why = ensemble_spread(ev.case, ev.extra)
    if why is not None:
        return None
    mine, truth = view(ev.outcomes[side], ev.case), view(ev.outcomes[ref], ev.case)
    worst: tuple[float, float, str, tuple[int, ...], float, float] | None = None
    for path, where in cmp.beyond_problem.items():
        spread, ta, tr = spreads.get(path), mine.targets.get(path), truth.targets.get(path)
        mismatch = next((m for m in cmp.mismatches if m.target == path and m.tol is not None), None)
        if spread is None or ta is None or tr is None or mismatch is None or spread.shape != where.shape:
            return None
        tol = mismatch.tol
        assert tol is not None  # (the mismatch was chosen for its tolerance)
        if tol.exact or not ta.dtype.is_float:  # (an index or an integer: rounding does not make it unstable)
            return None
        with np.errstate(invalid="ignore", over="ignore"):
            a, b = ta.values[where], tr.values[where]
            diff = np.abs(a - b)
            allowed = tol.atol + tol.rtol * np.minimum(np.abs(a), np.abs(b)) + MARGIN * spread[where]
            if not bool((diff <= allowed).all()):
                return None
        k = int(np.argmax(diff))
        if worst is None or diff[k] > worst[0]:
            j = tuple(int(v) for v in np.argwhere(where)[k]) if where.ndim else ()
            worst = (float(diff[k]), float(spread[where][k]), path, j, float(a[k]), float(b[k]))
    if worst is None:
        return None
    far, moves, path, j, got, expected = worst
    fp32 = torch32(ev, path, j, spreads[path].shape)
    torch = f", computed by torch at float32 {_fmt(fp32)}" if fp32 is not None else ""
    grows = growth(ev.extra)
    where_ = (f"; the spread grows at {grows[0]} (the random-rounding runs differ there by {grows[2]:.3g} ulps, at "
              f"most {grows[1]:.3g} in the lines computed before it)") if grows is not None else ""
    return Finding(NUMERICALLY_UNSTABLE, (
        f"{side}'s `{path}` differs from the reference by up to {far:.3g} (at {j}: {_fmt(got)} where the reference "
        f"gives {_fmt(expected)}{torch}), beyond what the problem allows at this precision (the float64 reference "
        f"moves far less when its inputs move by one rounding, and so does torch's float32 computation of it), and "
        f"the kernel's own float program moves by up to {moves:.3g} there when each floating operation rounds up or "
        f"down at random ({ENSEMBLE} runs): the kernel's algorithm loses accuracy the problem does not (cancellation, "
        f"a sum or statistic in a narrower type than the output, eps placed where it no longer guards): a finding"
        f"{where_}; if that precision is intended, declare it: tolerances={{{path!r}: ...}}"))
