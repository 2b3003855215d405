"""What the problem allows: the measured scale that lets a flagged element pass.

A flag (`fragile`: decided among near-ties or computed near a pole; `range-edge`: values at the dtype's limits
overflowed on the way) says *where* a difference may be legitimate, not *how large* it may be: it follows every value
computed from a flagged one, so on its own it would forgive whatever lies downstream (an RMS norm written
`x / (sqrt(mean(x*x)) + eps)` whose mean underflows to 0: sqrt(0) is near a pole, and the flag would forgive
`x / (0 + eps)`, a factor 300 from the right answer). A flagged element passes only by a magnitude:

    |a - b| <= allowed(a, b) + 2 * spread

`allowed` the element's strict tolerance (rtol and atol, never the dataflow scale: that follows the kernel's own
operations, so it would forgive any unstable algorithm), `spread` what the problem allows at the declared precision,
measured on the case: the largest change of the check's reference, run in float64, when every floating input element
x becomes x * (1 +- u) (u the unit roundoff of that input's dtype, signs at random, `PERTURBATIONS` draws); and
`ACCUMULATION` times the distance from the float64 result of the reference computed at float32 on the case's own
inputs and on inputs moved by one ulp (`NATIVE` runs, the first unmoved; its own float64 arithmetic in float32:
`reference:fp32`; a moved run's distance from the case's float64 result and from its own inputs' one, `MOVED64`),
the rounding any float32
computation of the problem carries where the problem itself is insensitive (the rounding of a LayerNorm's mean
moves a row [a, a + d] by about u * |a| / d, although the exact result is +-1 whatever d). `MARGIN` times: each side
may be off by it. For outputs compared exactly (indices, integers) the factor is 1: the kernel may give any value
the reference gives under those perturbations, not more. And, once, the distance of the float32 runs rounded
faithfully (`FAITHFUL`: every rounding one ulp either way, a backward computing from those results): a float32
computation rounded to nearest can be right by luck where the kernel's equally accurate one is not (1 - t^2 of a
saturated tanh: one ulp of t is 1.5e-4 of the result). An element as close as that to the float64 reference's own
value passes too. The same measurement decides elements that pass against the reference only by the dataflow scale
(`SCALE`, see judge.compare).

Beyond it, a final verdict asks for the kernel's random-rounding ensemble (`ensemble_reruns`, `ensemble_spread`):
where it moves as far, the verdict is `numerically unstable` (judge.verdict).

The measurement runs only where a flagged element differs beyond the strict tolerance (`pending`); the verdict asks
for the reruns (`reruns()`) and the runner runs them (`perturbed_case`). Without a reference to perturb, or when the
reference fails on the perturbed inputs, the flag forgives as before, counted as an unmeasured caveat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core import dtypes
from ..core.case import Case, TensorArg
from ..core.outcome import Outcome
from ..core.rerun import PERTURBED, ROUNDED, Rerun
from ..core.tolerance import LOADED_ROUNDINGS, Tolerance
from .comparison import Comparison, Forgiven
from .targets import view

#: random perturbations of the inputs (besides the unperturbed float64 run)
PERTURBATIONS = 6
#: ... and runs of the reference at the case's own precision (k = PERTURBATIONS + 1 ...), the first on the case's
#: own inputs, the others on inputs each moved by one ulp in their own dtype, its float64 arithmetic in float32
#: (`reference:fp32`): the rounding any computation of the problem at this precision carries, where the problem
#: itself is insensitive (a divergence of two equal
#: distributions is 0 whatever the inputs; a float32 computation of it still rounds its terms; a LayerNorm of a row
#: [a, a + d] is +-1 whatever d, and float32's rounding of its mean moves it by about u * |a| / d)
NATIVE = 4
#: ... and runs at the case's precision rounded faithfully at random (`reference:fp32:faithful<k>`, every rounding
#: operation's result one ulp either way, as a GPU's approximate transcendentals or fused multiply-adds may give):
#: once for every output (not `ACCUMULATION` times), and for outputs compared exactly the values an index decided
#: among values within such a rounding may take; two antithetic pairs, which meet or swap two values one ulp apart
#: with probability 1 - (1/3)^2 = 0.89
FAITHFUL = 4
#: ... and one run at the case's precision with the math functions' subnormal operands and results flushed to zero,
#: as Triton's compiled libdevice calls give them (`reference:fp32:ftz`): for every output, once (a flushed subnormal
#: is no rounding error to multiply)
FLUSH = 1
#: ... and, for each float32 run on moved inputs (every `NATIVE` run but the first), the float64 reference on those
#: same inputs (`moved64`): a float32 computation's own error is its distance from the exact result of the inputs it
#: computed, and measured only against the case's exact result the inputs' move may cancel it (a LayerNorm of a
#: constant row, whose float32 mean is exact: inputs moved by one ulp each move the result by ulp/sqrt(eps), and the
#: float32 run's mean rounding to a moved value puts the element back at the case's exact 0)
MOVED64 = NATIVE - 1
#: the last run at the case's own precision (`NATIVE`, `FAITHFUL`, `FLUSH`); the `MOVED64` runs follow it
_AT_PRECISION = PERTURBATIONS + NATIVE + FAITHFUL + FLUSH
#: how many times PyTorch's float32 error a correct kernel's float32 arithmetic may show: another summation order
#: (sequential, a tree over the block) errs a few times more or less than PyTorch's pairwise and vectorised sums
ACCUMULATION = 16.0


def reruns() -> tuple[Rerun, ...]:
    """The reruns a measurement needs: the float64 reference unperturbed (k=0) and perturbed (k=1..), then the
    reference at the case's precision on perturbed inputs (`native(k)`)."""
    return tuple(Rerun(PERTURBED, k=k) for k in range(_AT_PRECISION + MOVED64 + 1))


def native(k: int) -> bool:
    """Whether the k-th perturbed run is the reference at the case's own precision (else in float64)."""
    return PERTURBATIONS < k <= _AT_PRECISION


def moved64(k: int) -> int:
    """The float32 run whose moved inputs the k-th perturbed run computes in float64 (`MOVED64`), else 0."""
    return PERTURBATIONS + 1 + k - _AT_PRECISION if k > _AT_PRECISION else 0


def faithful(k: int) -> int:
    """The seed of the k-th perturbed run's faithful rounding (`FAITHFUL` runs at the case's precision), else 0:
    seeds 2j-1 and 2j are an antithetic pair (float32_arithmetic)."""
    return k - PERTURBATIONS - NATIVE if PERTURBATIONS + NATIVE < k <= PERTURBATIONS + NATIVE + FAITHFUL else 0


def flushed(k: int) -> bool:
    """Whether the k-th perturbed run flushes the math functions' subnormals (`FLUSH` runs at the case's
    precision, rounded to nearest)."""
    return PERTURBATIONS + NATIVE + FAITHFUL < k <= _AT_PRECISION


def measured(extra: Mapping[Rerun, Outcome]) -> bool:
    """Whether every rerun of a measurement is there."""
    return all(r in extra for r in reruns())


def signs(k: int, index: int, shape: tuple[int, ...]) -> np.ndarray:
    """The signs of the k-th perturbation of input `index`'s storage: k=1 moves every element of alternate inputs
    the other way (two inputs that meet, P and Q of a divergence, move apart), k=2 alternate elements (neighbours in
    a row move apart), later ones at random (seeded by k and the input's position: the same on every run)."""
    if k == 1:
        return np.full(shape, 1.0 if index % 2 == 0 else -1.0)
    if k == 2:
        return np.where(np.arange(int(np.prod(shape))).reshape(shape) % 2 == 0, 1.0, -1.0)
    return np.random.default_rng([k, index]).choice(np.array([-1.0, 1.0]), size=shape)


def _perturb(arg: TensorArg, k: int, index: int) -> TensorArg:
    """`arg` as float64, each element of its storage x * (1 + s * u), s = +-1 (`signs`), u the unit roundoff of its
    dtype; k=0 unperturbed."""
    dt = arg.dt
    values = dtypes.as_float64(arg.storage, dt).copy()
    if k:
        signs_ = signs(k, index, values.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            values = values * (1.0 + signs_ * (dt.eps / 2))
    return TensorArg("float64", arg.shape, arg.strides, arg.offset, values, arg.layout, arg.tags)


#: runs of the kernel's random-rounding ensemble (besides the one rounded to nearest)
ENSEMBLE = 4


def ensemble_reruns() -> tuple[Rerun, ...]:
    """The interpreter rounded to nearest (k=0) and `ENSEMBLE` runs rounded at random."""
    return tuple(Rerun(ROUNDED, k=k) for k in range(ENSEMBLE + 1))


def ensemble_spread(case: Case, extra: Mapping[Rerun, Outcome]) -> tuple[dict[str, np.ndarray], str | None]:
    """What the kernel's own float program produces: per target, the largest distance of a randomly rounded run
    from the run rounded to nearest (`ensemble_reruns()`, all in `extra`); or why there is none (a run failed)."""
    runs = [extra[r] for r in ensemble_reruns()]
    failed = next((o.error for o in runs if o.error is not None), None)
    if failed is not None:
        return {}, f"the interpreter failed with random rounding: {failed.summary()}"
    return {path: spread for path, (_, spread, _) in _spreads(case, runs).items()}, None


#: a line "grows" the spread when the ensemble's runs differ there by at least this many of the value's ulps, and
#: by at least GROWTH_JUMP times more than at any line computed before it
GROWTH_ULPS = 16.0
GROWTH_JUMP = 8.0


def growth(extra: Mapping[Rerun, Outcome]) -> tuple[str, float, float] | None:
    """Where the kernel's rounding is amplified: the source line at which the random-rounding runs' spread (in ulps
    of the values that line computed, over the samples each run kept: `rounding.Rounder.keep`) jumps most above the
    largest spread of the lines computed before it, as (line, ulps before it, ulps at it); None when no line's
    spread reaches `GROWTH_ULPS` with a jump of `GROWTH_JUMP`."""
    runs = [o.trace.rounded for r, o in extra.items()
            if r.how == ROUNDED and o.trace is not None and o.trace.rounded]
    if len(runs) < 2:
        return None
    best: tuple[str, float, float, float] | None = None
    before = 1.0
    for line in [ln for ln in runs[0] if all(ln in r for r in runs)]:
        worst = 0.0
        for occ in range(min(len(r[line]) for r in runs)):
            n = min(r[line][occ][0].size for r in runs)
            values = np.stack([r[line][occ][0][:n] for r in runs])
            ulps = runs[0][line][occ][1][:n]
            ok = np.isfinite(values).all(axis=0) & (ulps > 0) & np.isfinite(ulps)
            if ok.any():
                worst = max(worst, float(((values.max(axis=0) - values.min(axis=0))[ok] / ulps[ok]).max()))
        jump = worst / before
        if worst >= GROWTH_ULPS and jump >= GROWTH_JUMP and (best is None or jump > best[3]):
            best = (line, before, worst, jump)
        before = max(before, worst)
    return best[:3] if best is not None else None


def _spreads(case: Case, runs: Sequence[Outcome], finite_only: Sequence[bool] = ()) -> dict[
        str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per target the first run holds: (its values, the largest distance of another run's from them, the largest
    magnitude among the runs); a NaN on one side only, an infinite distance. Targets a run lacks are left out.
    `finite_only[i]`: the (i+1)-th run counts only where it is finite or the first run is not (a run at the case's
    precision whose own arithmetic overflowed says nothing of what the problem allows where the exact result fits)."""
    base, *others = [view(o, case) for o in runs]
    out = {}
    for path, t0 in base.targets.items():
        got = [v.targets.get(path) for v in others]
        found = [t for t in got if t is not None and t.shape == t0.shape]
        if len(found) < len(got):
            continue
        r0 = t0.values
        spread, reach = np.zeros(r0.shape), np.abs(r0)
        for i, t in enumerate(found):
            with np.errstate(invalid="ignore", over="ignore"):
                same = (t.values == r0) | (np.isnan(t.values) & np.isnan(r0))
                if i < len(finite_only) and finite_only[i]:
                    same |= ~np.isfinite(t.values) & np.isfinite(r0)
                d = np.where(same, 0.0, np.abs(t.values - r0))
                reach = np.fmax(reach, np.where(same, 0.0, np.abs(t.values)))
            spread = np.maximum(spread, np.where(np.isnan(d), np.inf, d))
        out[path] = (r0, spread, reach)
    return out


def _nudge(arg: TensorArg, k: int, index: int) -> TensorArg:
    """`arg` in its own dtype, each finite element of its storage moved one ulp up or down at random (seeded by k
    and the input's position); bfloat16 (carried as bits) and values that would leave the finite range stay."""
    data = np.asarray(arg.storage)
    if data.dtype.kind != "f":
        return arg
    signs = np.random.default_rng([k, index]).choice(np.array([-1.0, 1.0]), size=data.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        moved = np.nextafter(data, (signs * np.inf).astype(data.dtype))
    moved = np.where(np.isfinite(data) & np.isfinite(moved), moved, data).astype(data.dtype)
    return TensorArg(arg.dtype, arg.shape, arg.strides, arg.offset, moved, arg.layout, arg.tags)


def unmoved(k: int) -> bool:
    """Whether the k-th perturbed run computes the case's own inputs at their precision: the first float32 run (a
    rounding that one ulp of the inputs changes, a tie to even in `s - 1`, is in no run on moved inputs)."""
    return k == PERTURBATIONS + 1


def perturbed_case(case: Case, k: int) -> Case:
    """The case with every floating tensor input perturbed by one rounding at its own precision (k>0): in float64
    for the reference's float64 run `Rerun(PERTURBED, k=k)`, or, for `native(k)`, by one ulp in its own dtype for
    the reference's run at the case's precision (the first such run unmoved: the case itself computed in float32),
    and, for `moved64(k)`, that run's moved inputs, for the reference's float64 run on them. Other inputs (integers,
    scalars) are unchanged."""
    inputs = {}
    for i, (name, value) in enumerate(case.inputs.items()):
        if isinstance(value, TensorArg) and value.dt.is_float:
            # (a faithful pair's two runs share their inputs, the first's: they round the same values opposite ways)
            first = k - 1 if faithful(k) and faithful(k) % 2 == 0 else moved64(k) or k
            if not native(k) and not moved64(k):
                value = _perturb(value, k, i)
            elif not unmoved(k):
                value = _nudge(value, first, i)
        inputs[name] = value
    return Case(inputs, case.config, case.dims)


@dataclass
class Sensitivity:
    """The measured spread of the reference's float64 results over perturbed inputs, by target path."""

    spreads: dict[str, np.ndarray] = field(default_factory=dict)
    exact: dict[str, np.ndarray] = field(default_factory=dict)  # the unperturbed float64 reference's values
    reach: dict[str, np.ndarray] = field(default_factory=dict)  # the largest magnitude among the runs
    # the float32 computations' (`reference:fp32`, the native runs) distance from the float64 result
    arithmetic: dict[str, np.ndarray] = field(default_factory=dict)
    # the faithfully rounded float32 computations' distance from it (for outputs compared exactly)
    faithful: dict[str, np.ndarray] = field(default_factory=dict)
    # the float32 computation's with the math functions' subnormals flushed (`reference:fp32:ftz`)
    flushed: dict[str, np.ndarray] = field(default_factory=dict)
    count: int = 0  # perturbations measured
    error: str | None = None  # why nothing was measured (the reference failed on the perturbed inputs)


def measure(case: Case, extra: Mapping[Rerun, Outcome]) -> Sensitivity:
    """The spread of each target of the reference's float64 runs (`reruns()`, all in `extra`) around the
    unperturbed one, per element: 0 where every run agrees, inf where one gives NaN or an infinity the unperturbed
    run does not (the problem is singular there at this precision)."""
    runs: Sequence[Outcome] = [extra[r] for r in reruns()]
    failed = next((o.error for o in runs if o.error is not None), None)
    if failed is not None:
        return Sensitivity(error=f"the float64 reference failed on the perturbed inputs: {failed.summary()}")
    out = Sensitivity(count=len(runs) - 1)

    def around_exact(kind: Callable[[int], object], own_precision: bool = True) -> dict[
            str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """`_spreads` of the perturbed runs of one kind (a predicate of k) around the unperturbed float64 run; at
        the case's own precision, each run counts only where it is finite."""
        chosen = [o for r, o in zip(reruns()[1:], runs[1:]) if kind(r.k)]
        return _spreads(case, [runs[0], *chosen], [own_precision] * len(chosen))

    at_precision = around_exact(lambda k: native(k) and not faithful(k) and not flushed(k))
    own = _own_errors(case, runs)
    rounded = around_exact(faithful)
    flushes = around_exact(flushed)
    for path, (r0, spread, reach) in around_exact(lambda k: not native(k) and not moved64(k),
                                                  own_precision=False).items():
        if path in at_precision:
            _, computed, reach32 = at_precision[path]
            reach = np.fmax(reach, reach32)
            out.arithmetic[path] = np.maximum(computed, own[path]) if path in own else computed
        if path in rounded:
            out.faithful[path] = rounded[path][1]
        if path in flushes:
            out.flushed[path] = flushes[path][1]
        out.spreads[path], out.exact[path], out.reach[path] = spread, r0, reach
    return out


def spread_in(sensitivity: Sensitivity | None, path: str, dt: dtypes.DType, shape: tuple[int, ...],
              exact: bool = False, float32: bool = True) -> np.ndarray | None:
    """The measured spread of a target, for an output of dtype `dt`: unbounded where one rounding of the inputs
    takes the exact result beyond `dt`'s range (any value up to the infinity is then what this precision allows).
    With `float32`, at least the float32 computations' error, `ACCUMULATION` times unless compared `exact`ly
    (indices, integers: any value a float32 computation gives, faithfully rounded ones included, not more), at
    least the faithfully rounded runs' error, once, and at least the error of the float32 computation whose math
    functions flush subnormals as a GPU's do, once."""
    if sensitivity is None:
        return None
    spread = fit(sensitivity.spreads.get(path), shape)
    if spread is None:
        return None
    computed = fit(sensitivity.arithmetic.get(path), shape)
    if float32 and computed is not None:
        spread = np.maximum(spread, (1.0 if exact else ACCUMULATION) * computed)
    rounded = fit(sensitivity.faithful.get(path), shape)
    if float32 and rounded is not None:  # (once: a GPU's rounding within one ulp, not an accumulation)
        spread = np.maximum(spread, rounded)
    flat = fit(sensitivity.flushed.get(path), shape)
    if float32 and flat is not None:  # (once: a GPU's flushed subnormal is no rounding error to multiply)
        spread = np.maximum(spread, flat)
    reach = fit(sensitivity.reach[path], shape)
    if dt.is_float and reach is not None:  # (measured with the spread, of its size: never None here)
        spread = np.where(reach >= dtypes.overflow_threshold(dt), np.inf, spread)
    return spread


def _own_errors(case: Case, runs: Sequence[Outcome]) -> dict[str, np.ndarray]:
    """Per target, the largest distance of a float32 run on moved inputs from the float64 reference on those same
    inputs (`moved64`), where the float32 run is finite: that computation's own rounding error. `runs`: the
    outcomes of `reruns()`, in its order (the k-th at index k)."""
    out: dict[str, np.ndarray] = {}
    for r, exact in zip(reruns(), runs):
        if moved64(r.k):
            for path, (_, error, _) in _spreads(case, [exact, runs[moved64(r.k)]], [True]).items():
                out[path] = np.maximum(out[path], error) if path in out else error
    return out


def fit(values: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """A measured array of a target as the comparison shapes it (a 0-d result is compared as one element), or None
    where it is missing or holds another number of elements."""
    if values is None or values.size != int(np.prod(shape)):
        return None
    return values.reshape(shape)


def weigh(path: str, dt: dtypes.DType, va: np.ndarray, vb: np.ndarray, bad: np.ndarray,
          flags: Mapping[str, np.ndarray], tol: Tolerance, sensitivity: Sensitivity | None, measurable: bool,
          cmp: Comparison, loaded: np.ndarray | float = 0.0) -> tuple[np.ndarray, int, str]:
    """Judge the mismatching elements (`bad`) that a flag marks (`flags`: name -> mask) by the measured scale: the
    strict tolerance (no dataflow scale: a flag gives no magnitude) plus `MARGIN` times the spread.

    Measured: those within it pass (counted in `cmp.forgiven`, the flags named); the others stay failed whatever
    their flags. Not measured yet, with a reference to perturb: they stay failed and are counted as pending (the
    verdict asks for the measurement). Nothing to measure with (no reference, or it failed on the perturbed inputs):
    the flags forgive them as before, counted as unmeasured. Returns the mismatches left, the pending count and,
    for flagged elements left failed, what the mismatch says about them."""
    flagged = np.zeros(bad.shape, bool)
    for mask in flags.values():
        flagged |= mask
    flagged &= bad
    if not flagged.any():
        return bad, 0, ""
    spread = spread_in(sensitivity, path, dt, bad.shape, tol.exact)
    if spread is not None and sensitivity is not None:  # (a spread is one measured: `sensitivity` is there)
        # an element within tolerance only by the dataflow scale may also differ by `LOADED_ROUNDINGS` roundings, in
        # float32 (the arithmetic kernels use; float64 for a float64 output), of the largest input its program
        # loaded: an intermediate of the inputs' magnitude rounds that much in any float32 computation (a cross
        # entropy's lse - x_y of 6e-6 from lse = 12); not the output dtype's rounding (a float16 sum that overflows)
        unit = (dtypes.dtype("float64") if dt.name == "float64" else dtypes.dtype("float32")).eps
        rounding = np.where(_only(flags, SCALE, flagged), LOADED_ROUNDINGS * unit * loaded, 0.0) \
            if not tol.exact else 0.0
        within = flagged & _within(va, vb, tol, spread, sensitivity, path, cmp, rounding, dt)
        # the elements only the float32 allowances pass (`ACCUMULATION`, the loaded inputs' rounding): a counted
        # caveat of their own
        wide = spread_in(sensitivity, path, dt, bad.shape, tol.exact, float32=False)
        assert wide is not None  # (measured wherever `spread` is)
        by_float32 = within & ~_within(va, vb, tol, wide, sensitivity, path, cmp, dt=dt)
        named = within & ~_only(flags, SCALE, within) & ~by_float32  # (within the problem's scale: no caveat)
        if named.any():
            j = _first(named)
            names = tuple(n for n, m in flags.items() if (m & named).any() and n != SCALE)
            cmp.forgiven.append(Forgiven(path, int(named.sum()), (j, float(va[j]), float(vb[j])), why="measured",
                                         flags=names, spread=float(spread[j]),
                                         measured=sensitivity.count))
        if by_float32.any():
            j = _first(by_float32)
            names = tuple(n for n, m in flags.items() if (m & by_float32).any() and n != SCALE)
            off = fit(sensitivity.arithmetic.get(path), bad.shape)
            rounded = fit(sensitivity.faithful.get(path), bad.shape)
            if tol.exact and rounded is not None and off is not None:
                off = np.fmax(off, rounded)  # (an index: what a faithfully rounded float32 computation gives too)
            flat = fit(sensitivity.flushed.get(path), bad.shape)
            if flat is not None and off is not None:
                off = np.fmax(off, flat)  # (what one whose math functions flush subnormals gives)
            cmp.forgiven.append(Forgiven(path, int(by_float32.sum()), (j, float(va[j]), float(vb[j])),
                                         why=FLOAT32_COMPUTATION, flags=names,
                                         spread=float(off[j]) if off is not None else 0.0,
                                         measured=sensitivity.count))
        left = flagged & ~within
        text = ""
        if left.any():
            j = _first(left)
            names = tuple(n for n, m in flags.items() if (m & left).any())
            what = f"flagged {'/'.join(names)}" if names != (SCALE,) else \
                "within the kernel's dataflow tolerance (which follows its own operations)"
            text = (f"{int(left.sum())} element(s) {what} differ beyond what the problem allows, "
                    f"first at {j}: {cmp.a.backend}={float(va[j]):.6g}, {cmp.b.backend}={float(vb[j]):.6g}, while the "
                    f"problem moves by at most {float(spread[j]):.3g} there (the float64 reference under input "
                    "perturbations of one rounding, and computed in float32): "
                    + ("a flag does not forgive a difference the precision does not explain"
                       if names != (SCALE,) else "the kernel loses accuracy the problem does not"))
            cmp.beyond_problem.setdefault(path, np.zeros(bad.shape, bool))
            cmp.beyond_problem[path] |= left
        return bad & ~within, 0, text
    if measurable and sensitivity is None:
        return bad, int(flagged.sum()), ""
    why = sensitivity.error if sensitivity is not None and sensitivity.error else \
        "the check has no reference to perturb" if not measurable else "the reference gave no such output"
    scaled = _only(flags, SCALE, flagged)  # nothing measured them: the dataflow tolerance they are within decides,
    if scaled.any():  # as a caveat that says so
        j = _first(scaled)
        cmp.forgiven.append(Forgiven(path, int(scaled.sum()), (j, float(va[j]), float(vb[j])), why=SCALE,
                                     flags=(SCALE,), unmeasured=why))
    flagged &= ~scaled
    bad = bad & ~scaled
    flags = {n: m for n, m in flags.items() if n != SCALE}
    for name, mask in flags.items():
        mine = mask & flagged
        if mine.any():
            j = _first(mine)
            cmp.forgiven.append(Forgiven(path, int(mine.sum()), (j, float(va[j]), float(vb[j])),
                                         why="fragile" if name == FRAGILE else "range-edge",
                                         coarse=name == COARSE, flags=(name,), unmeasured=why))
            flagged &= ~mine
    return bad & ~_any(flags, bad), 0, ""


def saturated_distance(a: np.ndarray, b: np.ndarray, dt: dtypes.DType | None) -> np.ndarray:
    """|a - b|; where one side is an infinity and the other a finite value of its sign, the least distance before
    the rounding to `dt`: an infinity stands for a magnitude of at least `dt`'s overflow threshold, so a float16
    -inf against -65504 is 16 apart, not infinitely (a value near the top of the range rounded over it on one side)."""
    with np.errstate(invalid="ignore", over="ignore"):
        d: np.ndarray = np.abs(a - b)
        if dt is None or not dt.is_float:
            return d
        one = np.isinf(a) ^ np.isinf(b)
        if not one.any():
            return d
        finite = np.where(np.isinf(a), b, a)
        infinite = np.where(np.isinf(a), a, b)
        same = one & np.isfinite(finite) & (np.sign(finite) == np.sign(infinite))
        out: np.ndarray = np.where(same, np.maximum(dtypes.overflow_threshold(dt) - np.abs(finite), 0.0), d)
        return out


def _within(va: np.ndarray, vb: np.ndarray, tol: Tolerance, spread: np.ndarray, sensitivity: Sensitivity, path: str,
            cmp: Comparison, rounding: np.ndarray | float = 0.0, dt: dtypes.DType | None = None) -> np.ndarray:
    """The elements within the strict tolerance (plus `rounding`) plus `MARGIN` times `spread` of each other, or of
    the problem's own value (the float64 reference, unperturbed: a reference run in the case's precision rounds,
    underflows and overflows on its own); an infinity of `dt` counted from its overflow threshold
    (`saturated_distance`)."""
    with np.errstate(invalid="ignore", over="ignore"):
        strict = 0.0 if tol.exact else tol.atol + tol.rtol * np.minimum(np.abs(va), np.abs(vb)) + rounding
        # a flag marks where a difference may be legitimate, not by how much: the strict part, plus the spread
        margin = (1.0 if tol.exact else MARGIN) * spread
        within = np.isinf(spread) | (saturated_distance(va, vb, dt) <= strict + margin)
        exact = fit(sensitivity.exact.get(path), within.shape)
        if exact is not None and not tol.exact:
            kernel = [v for v, side in ((va, cmp.a), (vb, cmp.b)) if not side.role.is_reference]
            near = np.ones(within.shape, bool)
            for v in kernel:
                d = saturated_distance(v, exact, dt)
                near &= (d <= tol.atol + tol.rtol * np.minimum(np.abs(v), np.abs(exact)) + rounding + margin) | \
                    ((v == exact) | (np.isnan(v) & np.isnan(exact)))
            within |= near
    out: np.ndarray = within
    return out


#: how many times the measured spread a difference may add to the strict tolerance (either side may be off by it)
MARGIN = 2.0
#: a Forgiven's `why` for elements only the float32 computation of the reference explains (`ACCUMULATION`)
FLOAT32_COMPUTATION = "float32 computation"
#: the flag of elements within tolerance only by its dataflow scale (judge.compare: measured against a reference)
SCALE = "dataflow scale"


def _only(flags: Mapping[str, np.ndarray], name: str, where: np.ndarray) -> np.ndarray:
    """The elements of `where` that only flag `name` marks."""
    mine = flags.get(name)
    if mine is None:
        return np.zeros(where.shape, bool)
    others = np.zeros(where.shape, bool)
    for n, m in flags.items():
        if n != name:
            others |= m
    out: np.ndarray = where & mine & ~others
    return out


#: a Forgiven's `why` for an overflow in float32 arithmetic on the way to a result that fits (judge.edges)
FLOAT32_OVERFLOW = "float32-overflow"
#: the flags' names, as the caveats say them
FRAGILE, RANGE_EDGE, COARSE = "fragile (near-tie or near-pole)", "range-edge (overflow on the way)", \
    "range-edge (inputs at the limits, no dataflow)"


def _any(flags: Mapping[str, np.ndarray], bad: np.ndarray) -> np.ndarray:
    out = np.zeros(bad.shape, bool)
    for m in flags.values():
        out |= m
    return out


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(v) for v in np.argwhere(mask)[0]) if mask.ndim else ()
