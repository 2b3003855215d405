"""Comparing two outcomes of one case, target by target: structure, then values within per-element
tolerances (see `tdiff.core.tolerance`; element by element: `closeness`), with readable mismatch descriptions.

The per-element scale of the tolerance, and where a difference at the edge of the range may pass
(`edges`), come from an interpreter run of the same case (its `Trace`): the `guide`. Without one, a
coarse scale from the case's inputs is used and the comparison says so (`Comparison.coarse`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import dtypes
from ..core.case import Case
from ..core.op_classes import as_run_by
from ..core.outcome import Outcome
from ..core.rerun import CARRIED, MODELLED
from ..core.tolerance import Tolerance
from . import carried
from .closeness import close, closeness, describe_values, value_mismatch
from .comparison import Comparison, Forgiven, Mismatch
from .edges import (
    _range_edge,
    bottom_edge,
    describe_infinite_nan,
    describe_narrowing,
    float_input_magnitudes,
    narrowing,
)
from .rules import Rules, TargetRule
from .sensitivity import FRAGILE, SCALE, weigh
from .targets import Target, View, describe_structure, view

# ------------------------------------------------------------------ the case's inputs

def input_scale(case: Case) -> float:
    """The largest finite magnitude among the case's floating inputs (views and float scalars)."""
    cached: float | None = case.__dict__.get("_input_scale")
    if cached is not None:
        return cached
    best = max((float(v.max()) for _, v in float_input_magnitudes(case, True)), default=0.0)
    for v in case.inputs.values():
        if isinstance(v, float) and math.isfinite(v):
            best = max(best, abs(v))
    case.__dict__["_input_scale"] = best
    return best


def input_numel(case: Case) -> int:
    return max((a.numel for a in case.tensors().values() if a.dt.is_float), default=0)


def reduction_factor(case: Case, target_numel: int) -> float:
    """sqrt(terms per output): an output smaller than the inputs sums over them (row sums, atomics)."""
    return float(np.sqrt(max(1.0, input_numel(case) / max(1, target_numel))))


def coarse_scale(case: Case, numel: int, ops: set[str] | None) -> float:
    """The element scale used without the interpreter's dataflow: the largest input magnitude (its
    square for dots), grown by the terms summed into each output."""
    i = input_scale(case)
    dots = ops is None or any(o.startswith("dot") for o in ops)
    return (max(i, i * i) if dots else i) * reduction_factor(case, numel)


# ------------------------------------------------------------------ outcomes

def _has_reference(cmp: Comparison) -> bool:
    """Whether one side of the comparison is the check's reference (not a backend of the kernel)."""
    return any(o.role.is_reference for o in (cmp.a, cmp.b))


def _guide_target(rules: Rules, va: View, vb: View, path: str) -> Target | None:
    if rules.guide is not None and path in rules.guide.targets:
        return rules.guide.targets[path]
    for v in (va, vb):
        t = v.targets.get(path)
        if t is not None and t.scale is not None:
            return t
    return None


def _sampled(va: View, vb: View) -> View | None:
    for v in (va, vb):
        if v.outcome.trace is not None and v.outcome.trace.sampled:
            return v
    return None


@dataclass(frozen=True)
class TargetPair:
    """One target as two outcomes hold it, with what judges it: the guide's target (its dataflow), the sampled
    outcome (only what its programs wrote is comparable) and the target's `TargetRule`."""

    path: str
    a: Target
    b: Target
    rule: TargetRule
    guide: Target | None = None
    sampled: View | None = None


def compare_targets(pair: TargetPair, case: Case, rules: Rules, cmp: Comparison, ops: set[str] | None) -> None:
    """Compare one target of two outcomes into `cmp` (a mismatch, or what was forgiven and why)."""
    path, ta, tb, guide, sampled = pair.path, pair.a, pair.b, pair.guide, pair.sampled
    names = (cmp.a.backend, cmp.b.backend)
    if ta.shape != tb.shape or ta.dtype.name != tb.dtype.name:
        cmp.mismatches.append(Mismatch(path, "structure", f"`{path}`: {names[0]} holds {ta.dtype.name}"
                                       f"{list(ta.shape)}, {names[1]} holds {tb.dtype.name}{list(tb.shape)}"))
        return
    if ta.raw.tobytes() == tb.raw.tobytes():
        return
    tol = pair.rule.tolerance
    va, vb = ta.values, tb.values
    ra: np.ndarray | None = ta.raw
    rb: np.ndarray | None = tb.raw
    keep = None
    if sampled is not None:  # only what the interpreted programs wrote is comparable
        st = sampled.targets.get(path)
        keep = st.writers >= 0 if st is not None and st.writers is not None else np.zeros(ta.shape, bool)
        va, vb = np.where(keep, va, 0), np.where(keep, vb, 0)
        if ra is not None and rb is not None and ra.shape == keep.shape == rb.shape:  # exact stays bitwise
            ra, rb = np.where(keep, ra, np.zeros_like(ra)), np.where(keep, rb, np.zeros_like(rb))
        else:
            ra = rb = None
    writers = next((t.writers for t in (guide, ta, tb) if t is not None and t.writers is not None), None)
    scale: np.ndarray | float = 0.0
    coarse = None
    if not tol.exact:
        coarse = coarse_scale(case, ta.values.size, ops)
        if guide is not None and guide.scale is not None:
            known = np.ones(ta.shape, bool)
            if guide.writers is not None and sampled is not None:
                known = guide.writers >= 0
            scale = np.where(known, guide.scale, coarse)
            if guide.overflow is not None and guide.loaded is not None:
                # an overflow or underflow upstream: the error scale no longer bounds the error;
                # judge such an element against the inputs its program loaded
                scale = np.where(guide.overflow, np.maximum(scale, guide.loaded), scale)
            if not known.all() and not pair.rule.measured:
                cmp.coarse.append(path)
        else:
            scale = coarse
            if not pair.rule.measured:  # (measured: the problem's scale decides what the coarse one would pass)
                cmp.coarse.append(path)
    ok = close(va, vb, tol, scale, ra, rb)
    if ta.dtype.is_float and not tol.exact:
        cmp.closeness = max(cmp.closeness, closeness(va, vb, tol, scale))
    narrow = narrowing(path, ta, guide, case, rules, cmp) if _has_reference(cmp) and not tol.exact else ()
    if narrow:  # a narrowing cast fed these values: any difference from the reference is the cast's
        with np.errstate(invalid="ignore"):
            ok &= (va == vb) | (np.isnan(va) & np.isnan(vb))
    # elements within the tolerance only by its dataflow scale (which follows the kernel's own operations, so
    # it would forgive any unstable algorithm): against a reference, the problem's measured scale decides them
    by_scale = ok & ~close(va, vb, tol, 0.0, ra, rb) if pair.rule.measured and not narrow else None
    if ok.all() and (by_scale is None or not by_scale.any()):
        return
    bad = ~ok
    if by_scale is not None:  # (within the dataflow scale only: the range edge may still explain them)
        bad = bad | by_scale
    pending = 0
    infinite = None
    flags: dict[str, np.ndarray] = {}
    waiting_model = 0
    if ta.dtype.is_float and not tol.exact:
        bad, pending, infinite, flags = _range_edge(path, va, vb, bad, ta.dtype, case, rules, guide, cmp, tol, scale)
        bad, waiting_model = _nonfinite(path, va, vb, bad, rules, cmp, tol, scale, guide)
        bad = bottom_edge(path, va, vb, bad, ta.dtype, guide, cmp)
        if not bad.any():
            return
        infinite &= bad
    if guide is not None and guide.fragile is not None and guide.fragile.shape == bad.shape:
        # decided by comparing computed values within tolerance of each other (an argmax among near-ties), or
        # computed near a pole: either result may be right, by as much as the problem's measured scale allows
        # (`sensitivity.weigh`); (a decision between computed values does not make a NaN on one side only: a NaN
        # the reference gives where the kernel passed over a NaN input is no near-tie)
        with np.errstate(invalid="ignore"):
            decided = bad & guide.fragile & (np.isnan(va) == np.isnan(vb))
        if decided.any():
            flags[FRAGILE] = decided
    if by_scale is not None and (by_scale & bad).any():
        flags[SCALE] = by_scale & bad
    loaded: np.ndarray | float = input_scale(case)
    if guide is not None and guide.loaded is not None and guide.loaded.shape == bad.shape:
        loaded = np.where(np.isfinite(guide.loaded), guide.loaded, loaded)
    bad, waiting, unexplained = weigh(path, ta.dtype, va, vb, bad, flags, tol, rules.sensitivity, rules.measurable,
                                      cmp, loaded)
    waiting_carry = 0
    if bad.any() and not waiting and ta.dtype.is_float and not tol.exact and carried.wrapped(guide):
        bad, waiting_carry = _carried(path, va, vb, bad, rules, cmp, tol)
        if path in cmp.beyond_problem:
            cmp.beyond_problem[path] &= bad
    if not bad.any():
        return
    m = describe_values(path, va, vb, bad, tol, writers, names, None if tol.exact else scale)
    m.edge_pending = pending
    m.measure_pending = waiting
    m.model_pending = waiting_model
    m.carry_pending = waiting_carry
    if unexplained:
        m.message += "; " + unexplained
    if infinite is not None and infinite.any():
        exact = rules.fp64.targets.get(path) if rules.fp64 is not None else None
        m.message += "; " + describe_infinite_nan(va, vb, infinite, cmp, exact)
    if narrow:
        m.narrowing = narrow
        m.message += " (" + describe_narrowing(path, narrow, ta, case) + ")"
    elif guide is not None and guide.precision > ta.dtype.eps and ta.dtype.is_float and not tol.exact:
        arith = next((n for n in ("float32", "float16", "bfloat16") if dtypes.dtype(n).eps >= guide.precision),
                     "bfloat16")
        m.message += (f" (the kernel's arithmetic behind `{path}` ran in {arith}, narrower than its {ta.dtype.name}: "
                      f"if that is intended, declare tolerances={{{path!r}: tdiff.Tolerance.preset(\"arith\", "
                      f"{arith!r})}})")
    if pair.rule.tf32 is not None and ta.dtype.is_float:
        loose = pair.rule.tf32
        m.within_tf32 = bool(close(va, vb, loose, scale, ra, rb)[bad].all())
        m.message += (" (the kernel's float32 tl.dot at default precision was judged as IEEE float32: neither side ran "
                      "it in tf32; a reference that rounds like tf32 declares tolerance=\"tf32\")")
    cmp.mismatches.append(m)


def _carried(path: str, va: np.ndarray, vb: np.ndarray, bad: np.ndarray, rules: Rules, cmp: Comparison,
             tol: Tolerance) -> tuple[np.ndarray, int]:
    """Let pass the mismatches of an output `launch` computed from the kernel's stores that lie within what the
    kernel's admissible rounding, carried through `launch`, moves them (`judge.carried`), counted as their own caveat.
    Returns the mismatches left and, before the carried runs are there, how many wait for them."""
    if rules.carried is None:
        return bad, int(bad.sum())
    explained, spread = rules.carried.explain(path, va, vb, bad, tol)
    if explained.any():
        j = tuple(int(v) for v in np.argwhere(explained)[0]) if explained.ndim else ()
        cmp.forgiven.append(Forgiven(path, int(explained.sum()), (j, float(va[j]), float(vb[j])), why=CARRIED,
                                     spread=spread, measured=rules.carried.count))
    return bad & ~explained, 0


def _nonfinite(path: str, va: np.ndarray, vb: np.ndarray, bad: np.ndarray, rules: Rules, cmp: Comparison,
               tol: Tolerance, scale: np.ndarray | float, guide: Target | None) -> tuple[np.ndarray, int]:
    """Let pass the mismatches with a NaN or an infinity on a side whose two values are each what a modelled run
    of the kernel gives on the case (the GPU's arithmetic, rounded to nearest or at random: `judge.modelled`),
    counted as their own caveat. Returns the mismatches left and, before the modelled runs are there, how many wait
    for them. Only where the interpreter's dataflow shows no finite value overflowed on the way, unless an infinite
    input fed the element (0 * inf): a value that left its dtype's range while the result fits is the range edge's
    to judge (an intermediate overflow, a finding), whichever way rounding tips it."""
    if guide is None or guide.scale is None:
        return bad, 0
    with np.errstate(invalid="ignore"):
        special = bad & (~np.isfinite(va) | ~np.isfinite(vb))
    if guide.overflow is not None and guide.overflow.shape == bad.shape:
        fed = np.isposinf(guide.edge) if guide.edge is not None and guide.edge.shape == bad.shape else False
        special &= ~(guide.overflow & ~fed)
    if not special.any():
        return bad, 0
    if rules.modelled is None:
        return bad, int(special.sum())
    explained, detail = rules.modelled.explain(path, va, vb, special, tol, scale)
    if explained.any():
        j = tuple(int(v) for v in np.argwhere(explained)[0]) if explained.ndim else ()
        cmp.forgiven.append(Forgiven(path, int(explained.sum()), (j, float(va[j]), float(vb[j])), why=MODELLED,
                                     detail=detail or (rules.modelled.error or "")))
    return bad & ~explained, 0


def _compare_leaf(path: str, x: Any, y: Any, case: Case, rules: Rules, cmp: Comparison,
                  ops: set[str] | None) -> None:
    names = (cmp.a.backend, cmp.b.backend)
    if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)):
        if x != y and not (x is None and y is None):
            cmp.mismatches.append(Mismatch(path, "values", f"`{path}`: {names[0]} returned {x!r}, "
                                                           f"{names[1]} returned {y!r}"))
        return
    dt = "float32" if isinstance(x, float) or isinstance(y, float) else "int64"
    tol = rules.declared.tolerance_for(path, dt, ops, _has_reference(cmp))
    a, b = np.array([float(x)]), np.array([float(y)])
    m = value_mismatch(path, a, b, tol, coarse_scale(case, 1, ops), names=names)
    if m is not None:
        m.message = f"`{path}`: {names[0]} returned {x!r}, {names[1]} returned {y!r}"
        cmp.mismatches.append(m)


def returned_by(side: Outcome, structure: Any) -> str:
    """What one side returned, naming the side that produced it: the check's reference is not a run
    of `launch`."""
    if side.role.kind == "reference":
        return f"the reference returned {describe_structure(structure)}"
    return f"`launch` returned {describe_structure(structure)} under {side.backend}"


def compare(a: Outcome, b: Outcome, case: Case, rules: Rules | None = None) -> Comparison:
    """Compare what two successful outcomes of one case hold (errors are classified elsewhere)."""
    rules = rules or Rules()
    cmp = Comparison(a, b)
    reference = _has_reference(cmp)
    va, vb = view(a, case), view(b, case)
    asked = rules.ops(va, vb)
    ops = as_run_by(asked, (a.role.kind, b.role.kind))
    cmp.ieee_dots = ops != asked
    tf32_ops = asked if cmp.ieee_dots else None  # what a tf32 dot would have been allowed
    traced = any(v is not None and v.outcome.trace is not None for v in (rules.guide, va, vb))
    cmp.tf32_from_source = not traced and ops is not None and "dot:tf32" in ops
    sampled = _sampled(va, vb)
    if rules.guide is not None and rules.guide.outcome.trace is not None and rules.guide.outcome.trace.sampled:
        sampled = sampled or rules.guide
    for name in case.tensors():
        ta, tb = va.targets.get(name), vb.targets.get(name)
        if ta is None or tb is None or not rules.looks_at(name):
            continue
        rule = rules.target(name, ta.dtype, ops, reference, tf32_ops)
        compare_targets(TargetPair(name, ta, tb, rule, _guide_target(rules, va, vb, name), sampled), case, rules,
                        cmp, ops)
    if va.structure != vb.structure:
        cmp.mismatches.append(Mismatch("returned", "structure", f"{returned_by(a, va.structure)}, "
                                                                f"{returned_by(b, vb.structure)}"))
        return cmp
    for path, ta in va.targets.items():
        tb = vb.targets.get(path)
        # (a returned input view on one side only: compared above)
        if path in case.tensors() or tb is None or not rules.looks_at(path):
            continue
        rule = rules.target(path, ta.dtype, ops, reference, tf32_ops)
        compare_targets(TargetPair(path, ta, tb, rule, _guide_target(rules, va, vb, path), sampled), case, rules,
                        cmp, ops)
    for path, x in va.leaves.items():
        if rules.looks_at(path):
            _compare_leaf(path, x, vb.leaves.get(path), case, rules, cmp, ops)
    return cmp

