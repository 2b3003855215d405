"""The dtype's edges: which differences at the edge of the range pass because the exact result does not fit
the dtype, and which an overflow on the way flags for the measured scale (`_range_edge`), which NaNs infinite
inputs explain and fail (`_infinite_nan`), and the narrowing casts that no element tolerance forgives
(`narrowing`)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ..core import dtypes
from ..core.case import Case
from ..core.outcome import narrowing_casts
from ..core.tolerance import Tolerance, resolve
from .closeness import close, fmt
from .comparison import Comparison, Forgiven
from .rules import Rules
from .sensitivity import COARSE, FLOAT32_OVERFLOW, RANGE_EDGE, fit
from .targets import Target

# ------------------------------------------------------------------ the range edge

def float_input_magnitudes(case: Case, finite: bool) -> Iterator[tuple[dtypes.DType, np.ndarray]]:
    """Each floating tensor input's dtype and absolute values (float64), NaN left out (and infinities where
    `finite`); inputs with nothing left are skipped."""
    for arg in case.tensors().values():
        if arg.dt.is_float and arg.numel:
            v = np.abs(dtypes.as_float64(arg.values(), arg.dt))
            v = v[np.isfinite(v)] if finite else v[~np.isnan(v)]
            if v.size:
                yield arg.dt, v


def input_edge(case: Case) -> float:
    """How close the case's floating inputs come to their dtypes' limits (see dataflow.edge_ratio)."""
    cached: float | None = case.__dict__.get("_input_edge")
    if cached is not None:
        return cached
    best = max((float(v.max()) / math.sqrt(float(dt.max)) for dt, v in float_input_magnitudes(case, False)),
               default=0.0)
    case.__dict__["_input_edge"] = best
    return best


def range_edge(a: np.ndarray, b: np.ndarray, dt: dtypes.DType) -> np.ndarray:
    """Elements whose difference involves the edge of the range: NaN or inf on a side, or a finite
    value in the top half of the dtype's range."""
    top = float(dt.max) / 2 if dt.is_float else math.inf
    with np.errstate(invalid="ignore"):
        out: np.ndarray = ~np.isfinite(a) | ~np.isfinite(b) | (np.abs(a) >= top) | (np.abs(b) >= top)
        return out


def overflows(t: np.ndarray, dt: dtypes.DType) -> np.ndarray:
    """Where exact values (float64) do not fit `dt`: infinite, or of a magnitude that rounds to infinity in it
    (at least its largest finite value plus half an ulp there)."""
    with np.errstate(invalid="ignore"):
        out: np.ndarray = np.isinf(t) | (np.abs(t) >= dtypes.overflow_threshold(dt))
        return out


def _range_edge(path: str, va: np.ndarray, vb: np.ndarray, bad: np.ndarray, dt: dtypes.DType, case: Case,
                rules: Rules, guide: Target | None, cmp: Comparison, tol: Tolerance,
                scale: np.ndarray | float) -> tuple[np.ndarray, int, np.ndarray, dict[str, np.ndarray]]:
    """Let pass the elements that differ only at the edge of the range because the exact result does not fit
    the output's dtype: both sides at the edge (inf, NaN or the top half of the range) and the exact value (the
    float64 reference's, else the float64 run's) beyond the range, or the reference's own value an infinity that
    the other side's NaN or same-signed saturation matches. Also where the reference overflowed (values at the
    limits fed it) while the other side matches the float64 run.
    An intermediate that overflowed while the exact result fits (values at the limits fed it and an overflow
    happened on the way; without the dataflow, inputs at the limits anywhere: `coarse`) passes only where the
    case's inputs reach float32's limits (`_at_float32_limits`: counted as its own caveat); from float16 inputs
    (statistics of a float16 layer norm summed in float16: mean inf against 1023.5) it is returned as flagged, for
    the problem's measured scale to judge (`sensitivity.weigh`).
    Not where a side is NaN and the exact result an infinity that infinite inputs, not an overflow,
    explain (`_infinite_nan`).
    Returns the mismatches left, how many of them are edge differences the float64 run (not there
    yet) might let pass, the NaNs `_infinite_nan` kept failed, and the flagged elements by flag."""
    edge = range_edge(va, vb, dt)
    if guide is not None and guide.overflow is not None and guide.overflow.shape == bad.shape:
        edge = edge | guide.overflow  # an overflow upstream can end in a finite value (rsqrt(inf) = 0)
    edge &= bad
    none = np.zeros(bad.shape, bool)
    if not edge.any():
        return bad, 0, none, {}
    coarse = guide is None or guide.scale is None
    if coarse:
        fed = np.full(bad.shape, input_edge(case) >= 1)
    elif guide is not None and guide.edge is not None:
        fed = guide.edge >= 1
    else:
        fed = none.copy()
    candidates = edge & fed
    both = edge & range_edge(va, va, dt) & range_edge(vb, vb, dt)  # each side inf, NaN or in the top half
    inherent = none.copy() if coarse or guide is None or guide.overflow is None else guide.overflow.copy()
    beyond = none.copy()
    reference_overflowed = none.copy()
    exact = rules.fp64.targets.get(path) if rules.fp64 is not None else None
    if exact is not None and exact.shape == bad.shape:
        top = float(dt.max)
        t = exact.values
        with np.errstate(invalid="ignore"):
            inherent |= ~np.isfinite(t) | (np.abs(t) >= top / 2)
            beyond = both & overflows(t, dt)  # no finite answer in this dtype
        if exact.overflow is not None:  # an intermediate beyond the dtype's range, in exact arithmetic
            inherent |= exact.overflow
        # relative to the exact value, not to the element's dataflow scale (widened to the loaded inputs where an
        # overflow happened upstream: it would call any value "close")
        loose = Tolerance(rtol=tol.loosened(4).rtol, atol=tol.atol)
        for ref, other, side in ((va, vb, cmp.a), (vb, va, cmp.b)):
            if side.role.is_reference:  # a reference in the case's precision may overflow
                at_edge = range_edge(ref, ref, dt)
                reference_overflowed |= candidates & at_edge & close(other, t, loose)
    elif coarse and rules.fp64 is None:
        inherent = candidates  # no interpreter ran here: the inputs at the limits are all there is to go on
    kernels = none.copy()  # beyond the range by the kernel's own float64 run only: waits for the problem's value
    problem = fit(rules.sensitivity.exact.get(path), bad.shape) if rules.sensitivity is not None else None
    if problem is not None:  # the float64 reference: the problem's own value
        beyond = both & overflows(problem, dt)
    elif rules.measurable and rules.sensitivity is None:  # (a kernel computing 4x instead of 2x overflows in float64
        kernels, beyond = beyond, none.copy()  # too: its float64 run is no evidence of what the problem gives)
    for ref, other, side in ((va, vb, cmp.a), (vb, va, cmp.b)):
        if side.role.is_reference:  # the reference says the result does not fit the dtype: a NaN (inf -
            # inf on the way) or a value saturating towards the same infinity is all this dtype can give
            with np.errstate(invalid="ignore"):
                beyond |= both & np.isinf(ref) & (np.isnan(other) | (np.sign(other) == np.sign(ref)))
    infinite = _infinite_nan(va, vb, bad, guide, cmp, exact)
    legit = (beyond | reference_overflowed) & ~infinite
    if legit.any():
        j = tuple(int(v) for v in np.argwhere(legit)[0]) if legit.ndim else ()
        cmp.forgiven.append(Forgiven(path, int(legit.sum()), (j, float(va[j]), float(vb[j])), coarse))
    overflowed = candidates & inherent & ~legit & ~infinite  # an overflow on the way, the exact result fits
    wide = overflowed if _at_float32_limits(case) else none
    if wide.any():
        j = tuple(int(v) for v in np.argwhere(wide)[0]) if wide.ndim else ()
        cmp.forgiven.append(Forgiven(path, int(wide.sum()), (j, float(va[j]), float(vb[j])), coarse,
                                     why=FLOAT32_OVERFLOW, flags=(COARSE if coarse else RANGE_EDGE,)))
    flagged = (overflowed & ~wide) | (kernels & ~legit & ~infinite)  # the measured scale decides
    bad = bad & ~legit & ~wide
    pending = int(((candidates | both) & ~legit & ~infinite).sum()) if rules.fp64 is None else 0
    return bad, pending, infinite, {COARSE if coarse else RANGE_EDGE: flagged} if flagged.any() else {}


def _at_float32_limits(case: Case) -> bool:
    """Whether the case holds finite floating inputs at the limits of float32's range: a magnitude of at least
    sqrt(float32 max) (1.8e19) in an input of float32's range (float32, bfloat16, float64). From such inputs (1e20
    squared, exp(1e20)) an overflow on the way is what float32 arithmetic, the widest kernels use, gives, and stays
    forgiven as the range edge (no perturbation of the inputs measures it: the float64 reference does not overflow).
    Not from infinities: IEEE arithmetic on them is exact in float32 as in float64 (exp(-inf) = 0), so a NaN a kernel
    makes of them (-inf - -inf where a block of log-probabilities is all -inf) is its own, for the measured scale to
    judge. float16 inputs never get there: they reach "the limits" of their own type (sqrt(65504) = 256) as ordinary
    values, and an overflow from them (statistics summed in float16: mean inf against 1023.5) is the kernel's choice
    of arithmetic type, which only the measured scale may let pass."""
    cached: bool | None = case.__dict__.get("_at_float32_limits")
    if cached is not None:
        return cached
    limit, half = math.sqrt(float(dtypes.dtype("float32").max)), float(dtypes.dtype("float16").max)
    found = any(float(v.max()) >= limit and float(dt.max) > half for dt, v in float_input_magnitudes(case, True))
    case.__dict__["_at_float32_limits"] = found
    return found


#: how many of float32's smallest normal values (1.18e-38) from zero count as the bottom of the range
BOTTOM_TINIES = 4
#: a Forgiven's `why` for the bottom of the range
UNDERFLOW_EDGE = "underflow-edge"


def bottom_edge(path: str, va: np.ndarray, vb: np.ndarray, bad: np.ndarray, dt: dtypes.DType,
                guide: Target | None, cmp: Comparison) -> np.ndarray:
    """Let pass the elements whose two values both lie within `BOTTOM_TINIES` of float32's smallest normal values
    of zero (or of the dtype's, if smaller) where the interpreter's dataflow saw a value on their way leave the
    normal range (`Target.overflow`, which an underflow feeds): a product that fell to a few subnormal steps and was
    scaled back up is off by a step times the scale, about the values' own size there (a gradient of 1.7e-38
    computed as -3.1e-38). A float16 output never gets there (its values of 1e-4 are not the bottom of float32).
    Counted as the caveat `range-edge (underflow)`; the mismatches left."""
    if guide is None or guide.overflow is None or guide.overflow.shape != bad.shape or not dt.is_float:
        return bad
    bottom = BOTTOM_TINIES * min(float(dt.tiny), float(dtypes.dtype("float32").tiny))
    with np.errstate(invalid="ignore"):
        small = np.isfinite(va) & np.isfinite(vb) & (np.abs(va) <= bottom) & (np.abs(vb) <= bottom)
    hit = bad & small & guide.overflow
    if not hit.any():
        return bad
    j = tuple(int(v) for v in np.argwhere(hit)[0]) if hit.ndim else ()
    cmp.forgiven.append(Forgiven(path, int(hit.sum()), (j, float(va[j]), float(vb[j])), why=UNDERFLOW_EDGE))
    out: np.ndarray = bad & ~hit
    return out


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
    for ref, other, side in ((va, vb, cmp.a), (vb, va, cmp.b)):
        if side.role.is_reference:
            found |= np.isinf(ref) & np.isnan(other)
    if exact is not None and exact.shape == bad.shape:
        for values, side in ((va, cmp.a), (vb, cmp.b)):
            if not side.role.is_reference:  # (a reference's own NaN is not the kernel's)
                found |= np.isinf(exact.values) & np.isnan(values)
    out: np.ndarray = found & fed
    return out


def describe_infinite_nan(va: np.ndarray, vb: np.ndarray, infinite: np.ndarray, cmp: Comparison,
                          exact: Target | None) -> str:
    """The mismatch text for `_infinite_nan`'s elements."""
    j = tuple(int(v) for v in np.argwhere(infinite)[0]) if infinite.ndim else ()
    a, b = float(va[j]), float(vb[j])
    if np.isinf(a) and np.isnan(b) and cmp.a.role.is_reference:
        who, value = "the reference", a
    elif np.isinf(b) and np.isnan(a) and cmp.b.role.is_reference:
        who, value = "the reference", b
    else:
        who, value = "the float64 run", float(exact.values[j]) if exact is not None else math.inf
    return (f"{int(infinite.sum())} NaN where {who} gives {fmt(value)}, first at {j}: infinite inputs fed it "
            "(e.g. a fully masked row of -inf, or a row's +inf maximum subtracted from itself) and no finite value "
            "overflowed on the way: the kernel's own NaN, not a range-edge difference")


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
    declared = rules.declared.of(path)
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
