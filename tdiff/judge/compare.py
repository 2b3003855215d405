"""Comparing two outcomes of one case, target by target: structure, then values within per-element
tolerances (see `tdiff.tolerance`), with readable mismatch descriptions.

The per-element scale of the tolerance, and where a difference at the edge of the range may pass,
come from an interpreter run of the same case (its `Trace`): the `guide`. Without one, a coarse
scale from the case's inputs is used and the comparison says so (`Comparison.coarse`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import dtypes
from ..core.backend_spec import in_other_environment, is_reference, label_kind, label_lane
from ..core.case import Case
from ..core.op_classes import as_run_by
from ..core.outcome import Outcome, narrowing_casts
from ..core.static_ops import ORDER_TAG
from ..core.tolerance import Tolerance, from_ops, resolve
from .classify import kind_of
from .targets import Target, View, describe_structure, view


@dataclass
class Mismatch:
    """One way two outcomes disagree on a target."""

    target: str  # input name, or a returned path such as "returned[0]"
    kind: str  # "values" or "structure"
    message: str
    side: str | None = None
    count: int = 0
    total: int = 0
    special: int = 0  # mismatches where a side is NaN or infinite
    max_abs: float = 0.0
    max_abs_index: tuple = ()
    max_rel: float = 0.0
    max_rel_index: tuple = ()
    examples: list[tuple[tuple, Any, Any]] = field(default_factory=list)
    programs: list[tuple[int, int]] = field(default_factory=list)  # (linear program id, elements)
    tolerance: str = ""
    mask: np.ndarray | None = None  # mismatch positions, shaped like the target
    tol: Tolerance | None = None
    scale: np.ndarray | None = None  # each element's dataflow magnitude (the tolerance's `scale` term)
    edge_pending: int = 0  # elements at the range edge that the float64 run may show to be legitimate
    within_tf32: bool = False  # every element would pass with the tf32 allowance this pair was not given
    narrowing: tuple[tuple[str, str], ...] = ()  # undeclared narrowing casts (line, dtype) that fed the target

    @property
    def share(self) -> float:
        return self.count / self.total if self.total else 0.0


@dataclass
class Forgiven:
    """Elements of a target that differed only at the edge of the range, let pass."""

    target: str
    count: int
    example: tuple[tuple, float, float]
    coarse: bool = False  # decided without the interpreter's dataflow (inputs at the limits somewhere)
    why: str = "range-edge"  # or "fragile": decided by a comparison of computed values within tolerance


@dataclass
class Comparison:
    a: Outcome
    b: Outcome
    mismatches: list[Mismatch] = field(default_factory=list)
    forgiven: list[Forgiven] = field(default_factory=list)
    coarse: list[str] = field(default_factory=list)  # targets judged with the coarse scale
    closeness: float = 0.0  # the largest |a - b| / allowed over finite float elements (>= 1: beyond tolerance)
    tf32_from_source: bool = False  # no interpreter trace: tf32 allowed because the source has a tf32 tl.dot
    ieee_dots: bool = False  # the kernel's tf32 tl.dot judged as IEEE float32: neither side ran tf32
    tf32_ops: set[str] | None = None  # with ieee_dots: the ops as the kernel asked for them (tf32 included)

    @property
    def within_tf32(self) -> bool:
        """Disagreeing only by what tf32's allowance (not given to this pair) would forgive."""
        return self.ieee_dots and bool(self.mismatches) and all(m.within_tf32 for m in self.mismatches)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def kinds(self) -> set[str]:
        return {m.kind for m in self.mismatches}

    def summary(self) -> str:
        if self.ok:
            return f"{self.a.backend} and {self.b.backend} agree"
        return "; ".join(m.message for m in self.mismatches[:4]) + (
            f"; and {len(self.mismatches) - 4} more" if len(self.mismatches) > 4 else "")


# ------------------------------------------------------------------ the case's inputs

def input_scale(case: Case) -> float:
    """The largest finite magnitude among the case's floating inputs (views and float scalars)."""
    cached = case.__dict__.get("_input_scale")
    if cached is not None:
        return cached
    best = 0.0
    for arg in case.tensors().values():
        if arg.dt.is_float and arg.numel:
            v = np.abs(dtypes.as_float64(arg.values(), arg.dt))
            v = v[np.isfinite(v)]
            if v.size:
                best = max(best, float(v.max()))
    for v in case.inputs.values():
        if isinstance(v, float) and math.isfinite(v):
            best = max(best, abs(v))
    case.__dict__["_input_scale"] = best
    return best


def input_edge(case: Case) -> float:
    """How close the case's floating inputs come to their dtypes' limits (see dataflow.edge_ratio)."""
    cached = case.__dict__.get("_input_edge")
    if cached is not None:
        return cached
    best = 0.0
    for arg in case.tensors().values():
        if arg.dt.is_float and arg.numel:
            v = np.abs(dtypes.as_float64(arg.values(), arg.dt))
            v = v[~np.isnan(v)]
            if v.size:
                best = max(best, float(v.max()) / math.sqrt(float(arg.dt.max)))
    case.__dict__["_input_edge"] = best
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


# ------------------------------------------------------------------ elements

def close(a: np.ndarray, b: np.ndarray, tol: Tolerance, scale: np.ndarray | float = 0.0,
          raw_a: np.ndarray | None = None, raw_b: np.ndarray | None = None) -> np.ndarray:
    """Boolean array: True where a and b (float64) agree under `tol`, `scale` being each element's
    dataflow magnitude (raw_* the carrier bits, for exact comparison)."""
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if tol.exact:
        if raw_a is not None and raw_b is not None:
            ra, rb = np.ascontiguousarray(raw_a).reshape(-1), np.ascontiguousarray(raw_b).reshape(-1)
            same = (ra.view(np.uint8).reshape(ra.size, -1) == rb.view(np.uint8).reshape(rb.size, -1)).all(axis=-1)
            same = same.reshape(raw_a.shape)
        else:
            same = (a == b) & (np.signbit(a) == np.signbit(b))
        return same | (nan_a & nan_b)
    diff, allowed = _diff_allowed(a, b, tol, scale)
    with np.errstate(invalid="ignore"):
        ok = diff <= allowed
    inf = np.isinf(a) | np.isinf(b)
    ok = np.where(inf, a == b, ok)
    ok = np.where(nan_a | nan_b, nan_a & nan_b, ok)
    if tol.signed_zero:
        zeros = (a == 0) & (b == 0)
        ok = np.where(zeros, np.signbit(a) == np.signbit(b), ok)
    return ok


def _diff_allowed(a: np.ndarray, b: np.ndarray, tol: Tolerance,
                  scale: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """|a - b| and the difference `tol` allows each element (float64 values, same shape)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.abs(a - b), tol.atol + tol.rtol * np.minimum(np.abs(a), np.abs(b)) + tol.scale * scale


def closeness(a: np.ndarray, b: np.ndarray, tol: Tolerance, scale: np.ndarray | float = 0.0) -> float:
    """How near the finite elements of a and b come to their tolerance: the largest |a - b| / allowed
    (0 where they are equal; 1 at the tolerance). The search climbs it (`hypothesis.target`)."""
    diff, allowed = _diff_allowed(a, b, tol, scale)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        r = np.where(diff > 0, diff / np.maximum(allowed, np.finfo(np.float64).tiny), 0.0)
    r = r[np.isfinite(r)]
    return float(r.max()) if r.size else 0.0


def _fmt(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def describe_values(target: str, a: np.ndarray, b: np.ndarray, bad: np.ndarray, tol: Tolerance,
                    writers: np.ndarray | None, names: tuple[str, str],
                    scale: np.ndarray | float | None = None) -> Mismatch:
    """A `Mismatch` for the elements `bad` of two value arrays (float64, same shape)."""
    count = int(bad.sum())
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        special = bad & ~(np.isfinite(a) & np.isfinite(b))
        finite = bad & ~special
        absd = np.where(finite, np.abs(a - b), 0.0)
        rel = np.where(finite & (np.abs(b) > 0), absd / np.where(np.abs(b) > 0, np.abs(b), 1.0), 0.0)
        rel = np.where(finite & (b == 0) & (absd > 0), np.inf, rel)

    def at(i: Any) -> tuple:
        return tuple(int(v) for v in i)

    i_abs = at(np.unravel_index(int(np.argmax(absd)), a.shape)) if a.ndim else ()
    i_rel = at(np.unravel_index(int(np.argmax(rel)), a.shape)) if a.ndim else ()
    examples = []
    for idx in (list(zip(*np.nonzero(bad))) if a.ndim else [()])[:5]:
        idx = at(idx)
        examples.append((idx, float(a[idx]), float(b[idx])))
    programs: list[tuple[int, int]] = []
    if writers is not None and writers.shape == a.shape:
        programs = sorted(Counter(int(p) for p in writers[bad].reshape(-1)).items())
    parts = [f"`{target}`: {count} of {a.size} elements differ ({100 * count / max(a.size, 1):.3g}%)"]
    zeros = finite & (absd == 0)  # equal values, different bits: the sign of zero (an exact comparison)
    if (finite & ~zeros).any():
        parts.append(f"largest difference {_fmt(float(absd[i_abs]))} at {i_abs}: "
                     f"{names[0]}={_fmt(float(a[i_abs]))}, {names[1]}={_fmt(float(b[i_abs]))}")
    if zeros.any():
        j = at(np.argwhere(zeros)[0]) if a.ndim else ()
        parts.append(f"{int(zeros.sum())} differ only in the sign of zero, first at {j}: "
                     f"{names[0]}={_fmt(float(a[j]))}, {names[1]}={_fmt(float(b[j]))}")
    if special.any():
        j = at(np.argwhere(special)[0]) if a.ndim else ()
        parts.append(f"{int(special.sum())} NaN/inf mismatch(es), first at {j}: "
                     f"{names[0]}={_fmt(float(a[j]))}, {names[1]}={_fmt(float(b[j]))}")
    scale_arr = None if scale is None else np.broadcast_to(np.asarray(scale, np.float64), a.shape).copy()
    return Mismatch(
        target, "values", "; ".join(parts), count=count, total=int(a.size), special=int(special.sum()),
        max_abs=float(absd.max()) if absd.size else 0.0, max_abs_index=i_abs,
        max_rel=float(rel.max()) if rel.size else 0.0, max_rel_index=i_rel,
        examples=examples, programs=programs, tolerance=tol.describe(), mask=bad, tol=tol, scale=scale_arr,
    )


def value_mismatch(target: str, a: np.ndarray, b: np.ndarray, tol: Tolerance, scale: np.ndarray | float = 0.0,
                   writers: np.ndarray | None = None, raw_a: np.ndarray | None = None,
                   raw_b: np.ndarray | None = None, names: tuple[str, str] = ("a", "b")) -> Mismatch | None:
    """A `Mismatch` if the values a and b (float64, same shape) disagree under `tol`, else None."""
    ok = close(a, b, tol, scale, raw_a, raw_b)
    if ok.all():
        return None
    return describe_values(target, a, b, ~ok, tol, writers, names, None if tol.exact else scale)


# ------------------------------------------------------------------ the range edge

def range_edge(a: np.ndarray, b: np.ndarray, dt: dtypes.DType) -> np.ndarray:
    """Elements whose difference involves the edge of the range: NaN or inf on a side, or a finite
    value in the top half of the dtype's range."""
    top = float(dt.max) / 2 if dt.is_float else math.inf
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(a) | ~np.isfinite(b) | (np.abs(a) >= top) | (np.abs(b) >= top)


# ------------------------------------------------------------------ outcomes

@dataclass
class Rules:
    """How to judge one case: the check's tolerances, and the interpreter run that guides them."""

    tolerance: Any = None
    tolerances: Mapping[str, Any] = field(default_factory=dict)
    guide: View | None = None  # an interpreter outcome of the case: ops, per-element scales, edges
    fp64: View | None = None  # the interpreter in float64 on upcast inputs: is a range-edge difference inherent?

    def ops(self, *views: View) -> set[str] | None:
        """The operations the kernel ran, from the interpreter's trace; None when no interpreter ran
        (then every floating class is assumed, and tf32 where the source has a tf32 `tl.dot`)."""
        found: set[str] | None = None
        for v in ([self.guide] if self.guide is not None else []) + list(views):
            t = v.outcome.trace
            if t is not None:
                found = (found or set()) | t.ops
        if found is None:
            static = set().union(*(getattr(v.outcome, "static_ops", frozenset()) for v in views))
            if views and _same_code(views) and ORDER_TAG not in static:
                return set()  # compiled variants of an order-free kernel run the same operations: bit for bit
            dots = {k for k in static if k.startswith("dot")}
            if dots:
                found = {"farith", "transcendental", "reduce", *dots}
        return found

    def tolerance_for(self, path: str, dt: str, ops: set[str] | None, reference: bool = False) -> Tolerance:
        """The tolerance of a target, from the ops the kernel ran and the target's dtype (arithmetic
        in a narrower type than the output's is not forgiven: accumulating in fp16 is a classic bug;
        a check whose kernel does it on purpose declares the tolerance it accepts); the check's own
        tolerances override it."""
        base = resolve(self.tolerance, from_ops(ops, dt, reference), dt)
        return resolve(self.tolerances.get(path), base, dt)


def _same_code(views: tuple[View, ...]) -> bool:
    """Whether the views are compiled runs of one kernel that compute with the same instructions: plain
    compiled or variants that change warps, stages, CTAs, registers or the config, not fp fusion (which
    decides whether `a * b + c` rounds once or twice), and that ran the kernel (its source is known)."""
    for v in views:
        label = v.outcome.backend
        if label_kind(label) != "compiled" or "fp_fusion" in label_lane(label) or in_other_environment(label):
            return False
        if not v.outcome.launches:
            return False
    return True


def _has_reference(cmp: Comparison) -> bool:
    """Whether one side of the comparison is the check's reference (not a backend of the kernel)."""
    return any(is_reference(o.backend) for o in (cmp.a, cmp.b))


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


def compare_targets(path: str, ta: Target, tb: Target, case: Case, rules: Rules, cmp: Comparison,
                    ops: set[str] | None, guide: Target | None, sampled: View | None) -> None:
    names = (cmp.a.backend, cmp.b.backend)
    if ta.shape != tb.shape or ta.dtype.name != tb.dtype.name:
        cmp.mismatches.append(Mismatch(path, "structure", f"`{path}`: {names[0]} holds {ta.dtype.name}"
                                       f"{list(ta.shape)}, {names[1]} holds {tb.dtype.name}{list(tb.shape)}"))
        return
    if ta.raw.tobytes() == tb.raw.tobytes():
        return
    tol = rules.tolerance_for(path, ta.dtype.name, ops, _has_reference(cmp))
    va, vb, ra, rb = ta.values, tb.values, ta.raw, tb.raw
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
            if not known.all():
                cmp.coarse.append(path)
        else:
            scale = coarse
            cmp.coarse.append(path)
    ok = close(va, vb, tol, scale, ra, rb)
    if ta.dtype.is_float and not tol.exact:
        cmp.closeness = max(cmp.closeness, closeness(va, vb, tol, scale))
    narrow = narrowing(path, ta, guide, case, rules, cmp) if _has_reference(cmp) and not tol.exact else ()
    if narrow:  # a narrowing cast fed these values: any difference from the reference is the cast's
        with np.errstate(invalid="ignore"):
            ok &= (va == vb) | (np.isnan(va) & np.isnan(vb))
    if ok.all():
        return
    bad = ~ok
    pending = 0
    infinite = None
    if ta.dtype.is_float and not tol.exact:
        bad, pending, infinite = _range_edge(path, va, vb, bad, ta.dtype, case, rules, guide, cmp, tol, scale)
        if not bad.any():
            return
    if guide is not None and guide.fragile is not None and guide.fragile.shape == bad.shape:
        # decided by comparing computed values within tolerance of each other (an argmax among near-ties):
        # either decision is right, on any backend; (a decision between computed values does not make a NaN
        # on one side only: a NaN the reference gives where the kernel passed over a NaN input is no near-tie)
        with np.errstate(invalid="ignore"):
            decided = bad & guide.fragile & (np.isnan(va) == np.isnan(vb))
        if decided.any():
            j = tuple(int(v) for v in np.argwhere(decided)[0]) if decided.ndim else ()
            cmp.forgiven.append(Forgiven(path, int(decided.sum()), (j, float(va[j]), float(vb[j])), why="fragile"))
            bad = bad & ~decided
            if not bad.any():
                return
    m = describe_values(path, va, vb, bad, tol, writers, names, None if tol.exact else scale)
    m.edge_pending = pending
    if infinite is not None and infinite.any():
        exact = rules.fp64.targets.get(path) if rules.fp64 is not None else None
        m.message += "; " + describe_infinite_nan(va, vb, infinite, names, exact)
    if narrow:
        m.narrowing = narrow
        m.message += " (" + describe_narrowing(path, narrow, ta, case) + ")"
    elif guide is not None and guide.precision > ta.dtype.eps and ta.dtype.is_float and not tol.exact:
        narrow = next((n for n in ("float32", "float16", "bfloat16") if dtypes.dtype(n).eps >= guide.precision),
                      "bfloat16")
        m.message += (f" (the kernel's arithmetic behind `{path}` ran in {narrow}, narrower than its {ta.dtype.name}: "
                      f"if that is intended, declare tolerances={{{path!r}: tdiff.Tolerance.preset(\"arith\", "
                      f"{narrow!r})}})")
    if cmp.ieee_dots and ta.dtype.is_float:
        loose = rules.tolerance_for(path, ta.dtype.name, cmp.tf32_ops, _has_reference(cmp))
        m.within_tf32 = bool(close(va, vb, loose, scale, ra, rb)[bad].all())
        m.message += (" (the kernel's float32 tl.dot at default precision was judged as IEEE float32: neither side ran "
                      "it in tf32; a reference that rounds like tf32 declares tolerance=\"tf32\")")
    cmp.mismatches.append(m)


# ------------------------------------------------------------------ narrowing casts

def _float_inputs(case: Case) -> set[str]:
    return {a.dtype for a in case.tensors().values() if a.dt.is_float}


def _eps(name: str) -> float:
    try:
        return dtypes.dtype(name).eps
    except (KeyError, ValueError, TypeError):
        return math.inf  # a float type tdiff does not know (fp8e4b15): narrower than any it does


def narrowing(path: str, ta: Target, guide: Target | None, case: Case, rules: Rules,
              cmp: Comparison) -> tuple[tuple[str, str], ...]:
    """The casts behind `path` (line, dtype) to a float type with fewer significand bits than every
    floating input the case gives the kernel and than the target's own dtype, which the check does
    not declare (a tolerance for `path`, or for every output, at least that type's epsilon): such a
    cast rounds the result more coarsely than any value the kernel was given or returns (bfloat16 in
    a float16 kernel), and the element tolerance does not forgive it. Casts to an input's or the
    output's dtype, and widening casts, are free (the dataflow records only narrowing ones)."""
    if guide is None or not ta.dtype.is_float:
        return ()
    casts = narrowing_casts(guide.precision)
    if not casts:
        return ()
    coarsest = max([_eps(d) for d in _float_inputs(case)] + [ta.dtype.eps])
    declared = rules.tolerances.get(path, rules.tolerance)
    out = []
    for line, name in casts:
        eps = _eps(name)
        if eps <= coarsest:
            continue
        if declared is not None:
            tol = resolve(declared, Tolerance(exact=True), ta.dtype)
            if tol.exact or max(tol.rtol, tol.scale) >= min(eps, 1.0):
                continue
        out.append((line, name))
    return tuple(out)


def describe_narrowing(path: str, casts: tuple[tuple[str, str], ...], ta: Target, case: Case) -> str:
    """What the mismatch says about `narrowing`'s casts, and how to declare one that is meant."""
    line, name = casts[0]
    inputs = sorted(_float_inputs(case))
    given = f"its {' and '.join(inputs)} inputs and " if inputs else ""
    more = f" (and {len(casts) - 1} more cast(s))" if len(casts) > 1 else ""
    return (f"`{path}` went through a cast to {name} at {line}{more}: fewer significand bits than {given}its "
            f"{ta.dtype.name} output, so the kernel rounds more coarsely than anything it was given or returns; a "
            f"narrowing cast is not forgiven as rounding, and any difference from the reference counts. If the "
            f"precision is intended, declare tolerances={{{path!r}: tdiff.Tolerance.preset(\"arith\", {name!r})}}")


def _range_edge(path: str, va: np.ndarray, vb: np.ndarray, bad: np.ndarray, dt: dtypes.DType, case: Case,
                rules: Rules, guide: Target | None, cmp: Comparison, tol: Tolerance,
                scale: np.ndarray | float) -> tuple[np.ndarray, int, np.ndarray]:
    """Let pass the elements that differ only at the edge of the range where that is inherent to the
    computation at this precision: values at the dtype's limits fed them (inputs with edge ratio >= 1,
    or an intermediate at the limit), and an overflow happened on the way (seen by the interpreter),
    or the float64 run shows an intermediate or the exact result at the edge, or the reference
    overflowed where the kernel's result matches the float64 run. Also where the exact result lies
    beyond the dtype's range (the float64 run's, or the reference's inf) and both sides are at the edge
    (inf, NaN or the top half of the range).
    Not where a side is NaN and the exact result an infinity that infinite inputs, not an overflow,
    explain (`_infinite_nan`).
    Returns the mismatches left, how many of them are edge differences the float64 run (not there
    yet) might let pass, and the NaNs `_infinite_nan` kept failed."""
    edge = range_edge(va, vb, dt)
    if guide is not None and guide.overflow is not None and guide.overflow.shape == bad.shape:
        edge = edge | guide.overflow  # an overflow upstream can end in a finite value (rsqrt(inf) = 0)
    edge &= bad
    if not edge.any():
        return bad, 0, np.zeros(bad.shape, bool)
    coarse = guide is None or guide.scale is None
    if coarse:
        fed = np.full(bad.shape, input_edge(case) >= 1)
    elif guide.edge is not None:
        fed = guide.edge >= 1
    else:
        fed = np.zeros(bad.shape, bool)
    candidates = edge & fed
    both = edge & range_edge(va, va, dt) & range_edge(vb, vb, dt)  # each side inf, NaN or in the top half
    inherent = np.zeros(bad.shape, bool) if coarse or guide.overflow is None else guide.overflow.copy()
    beyond = np.zeros(bad.shape, bool)
    exact = rules.fp64.targets.get(path) if rules.fp64 is not None else None
    if exact is not None and exact.shape == bad.shape:
        top = float(dt.max)
        t = exact.values
        with np.errstate(invalid="ignore"):
            inherent |= ~np.isfinite(t) | (np.abs(t) >= top / 2)
            beyond = both & (np.isinf(t) | (np.abs(t) > top))  # no finite answer in this dtype
        if exact.overflow is not None:  # an intermediate beyond the dtype's range, in exact arithmetic
            inherent |= exact.overflow
        loose = tol.loosened(4)
        for ref, other, name in ((va, vb, cmp.a.backend), (vb, va, cmp.b.backend)):
            if is_reference(name):  # a reference in the case's precision may overflow
                at_edge = range_edge(ref, ref, dt)
                inherent |= at_edge & close(other, t, loose, scale)
    elif coarse and rules.fp64 is None:
        inherent = candidates  # no interpreter ran here: the inputs at the limits are all there is to go on
    for ref, other, name in ((va, vb, cmp.a.backend), (vb, va, cmp.b.backend)):
        if is_reference(name):  # the reference says the result does not fit the dtype: a NaN (inf -
            # inf on the way) or a value saturating towards the same infinity is all this dtype can give
            with np.errstate(invalid="ignore"):
                beyond |= both & np.isinf(ref) & (np.isnan(other) | (np.sign(other) == np.sign(ref)))
    infinite = _infinite_nan(va, vb, bad, guide, cmp, exact)
    legit = ((candidates & inherent) | beyond) & ~infinite
    if legit.any():
        j = tuple(int(v) for v in np.argwhere(legit)[0]) if legit.ndim else ()
        cmp.forgiven.append(Forgiven(path, int(legit.sum()), (j, float(va[j]), float(vb[j])), coarse))
    bad = bad & ~legit
    pending = int(((candidates | both) & ~legit & ~infinite).sum()) if rules.fp64 is None else 0
    return bad, pending, infinite


def _infinite_nan(va: np.ndarray, vb: np.ndarray, bad: np.ndarray, guide: Target | None, cmp: Comparison,
                  exact: Target | None) -> np.ndarray:
    """Elements where a side is NaN and the reference (or the float64 run) gives an infinity, the
    program that computed them loaded infinite inputs, and no finite value overflowed on their way
    (the interpreter's dataflow: see `dataflow.ovf`): the NaN is the kernel's arithmetic on infinite
    inputs (a max-subtracting logsumexp on a fully masked row: -inf - -inf), the same in every
    precision, not the range's. Needs the interpreter's dataflow (else nothing is flagged)."""
    none = np.zeros(bad.shape, bool)
    if guide is None or guide.scale is None or guide.edge is None or guide.edge.shape != bad.shape:
        return none
    fed = np.isposinf(guide.edge)  # the storing program loaded an infinity (dataflow.edge_ratio)
    if guide.overflow is not None and guide.overflow.shape == bad.shape:
        fed &= ~guide.overflow
    fed &= bad
    if not fed.any():
        return none
    found = none.copy()
    for ref, other, name in ((va, vb, cmp.a.backend), (vb, va, cmp.b.backend)):
        if is_reference(name):
            found |= np.isinf(ref) & np.isnan(other)
    if exact is not None and exact.shape == bad.shape:
        for side, name in ((va, cmp.a.backend), (vb, cmp.b.backend)):
            if not is_reference(name):  # (a reference's own NaN is not the kernel's)
                found |= np.isinf(exact.values) & np.isnan(side)
    return found & fed


def describe_infinite_nan(va: np.ndarray, vb: np.ndarray, infinite: np.ndarray, names: tuple[str, str],
                          exact: Target | None) -> str:
    """The mismatch text for `_infinite_nan`'s elements."""
    j = tuple(int(v) for v in np.argwhere(infinite)[0]) if infinite.ndim else ()
    a, b = float(va[j]), float(vb[j])
    if np.isinf(a) and np.isnan(b) and is_reference(names[0]):
        who, value = "the reference", a
    elif np.isinf(b) and np.isnan(a) and is_reference(names[1]):
        who, value = "the reference", b
    else:
        who, value = "the float64 run", float(exact.values[j]) if exact is not None else math.inf
    return (f"{int(infinite.sum())} NaN where {who} gives {_fmt(value)}, first at {j}: infinite inputs fed it "
            "(e.g. a fully masked row of -inf, or a row's +inf maximum subtracted from itself) and no finite value "
            "overflowed on the way: the kernel's own NaN, not a range-edge difference")


def _compare_leaf(path: str, x: Any, y: Any, case: Case, rules: Rules, cmp: Comparison,
                  ops: set[str] | None) -> None:
    names = (cmp.a.backend, cmp.b.backend)
    if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)):
        if x != y and not (x is None and y is None):
            cmp.mismatches.append(Mismatch(path, "values", f"`{path}`: {names[0]} returned {x!r}, "
                                                           f"{names[1]} returned {y!r}"))
        return
    tol = rules.tolerance_for(path, "float32" if isinstance(x, float) or isinstance(y, float) else "int64", ops,
                              _has_reference(cmp))
    a, b = np.array([float(x)]), np.array([float(y)])
    m = value_mismatch(path, a, b, tol, coarse_scale(case, 1, ops), names=names)
    if m is not None:
        m.message = f"`{path}`: {names[0]} returned {x!r}, {names[1]} returned {y!r}"
        cmp.mismatches.append(m)


def returned_by(side: str, structure: Any) -> str:
    """What one side returned, naming the side that produced it: the check's reference is not a run
    of `launch`."""
    if kind_of(side) == "reference":
        return f"the reference returned {describe_structure(structure)}"
    return f"`launch` returned {describe_structure(structure)} under {side}"


def compare(a: Outcome, b: Outcome, case: Case, rules: Rules | None = None) -> Comparison:
    """Compare what two successful outcomes of one case hold (errors are classified elsewhere)."""
    rules = rules or Rules()
    cmp = Comparison(a, b)
    va, vb = view(a, case), view(b, case)
    asked = rules.ops(va, vb)
    ops = as_run_by(asked, (kind_of(a.backend), kind_of(b.backend)))
    cmp.ieee_dots = ops != asked
    cmp.tf32_ops = asked if cmp.ieee_dots else None
    traced = any(v is not None and v.outcome.trace is not None for v in (rules.guide, va, vb))
    cmp.tf32_from_source = not traced and ops is not None and "dot:tf32" in ops
    sampled = _sampled(va, vb)
    if rules.guide is not None and rules.guide.outcome.trace is not None and rules.guide.outcome.trace.sampled:
        sampled = sampled or rules.guide
    names = (a.backend, b.backend)
    for name in case.tensors():
        ta, tb = va.targets.get(name), vb.targets.get(name)
        if ta is None or tb is None:
            continue
        compare_targets(name, ta, tb, case, rules, cmp, ops, _guide_target(rules, va, vb, name), sampled)
    if va.structure != vb.structure:
        cmp.mismatches.append(Mismatch("returned", "structure", f"{returned_by(names[0], va.structure)}, "
                                                                f"{returned_by(names[1], vb.structure)}"))
        return cmp
    for path, ta in va.targets.items():
        tb = vb.targets.get(path)
        if path in case.tensors() or tb is None:  # (a returned input view on one side only: compared above)
            continue
        compare_targets(path, ta, tb, case, rules, cmp, ops, _guide_target(rules, va, vb, path), sampled)
    for path, x in va.leaves.items():
        _compare_leaf(path, x, vb.leaves.get(path), case, rules, cmp, ops)
    return cmp

