"""What the GPU's arithmetic makes of a case: the NaNs and infinities a modelled run produces.

A NaN or an infinity on one side of a comparison, where the other side holds another value, is a rounding dispute
only where the kernel's own arithmetic gives both values on this very case. The modelled runs measure that: the
interpreter computing as compiled Triton documents it computes on NVIDIA GPUs (`interpreter:gpu`: tf32 `tl.dot`
operands, contracted multiply-adds, float32 division as `div.full`, math functions that flush subnormals; see
execute.interpreter.gpu_arith), rounded to nearest (k=0) and rounded up or down at random (k=1..`ENSEMBLE`), beside
the interpreter's own run (the comparison's guide). An element whose two values are each produced by one of those
runs passes, as its own caveat naming the runs; a finite value must be within the element's tolerance of a run's
finite value there. Elsewhere (a NaN every run gives where the reference's value is finite or infinite: a masked
lane's real zero times an infinity, a wrong index) nothing explains the difference and it fails as before.

Measured on an H200: a 16x16 tf32 `tl.dot` of -inf and 1e-45 gives NaN (the subnormal is truncated to 0), which
`interpreter:gpu` reproduces (NaN, NaN, -inf for 1e-45, 3e-42, 1e-40); under `input_precision="ieee"` it gives -inf.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..core.case import Case
from ..core.outcome import Outcome
from ..core.rerun import MODELLED, Rerun  # (also a Forgiven's `why` for what the modelled runs give)
from ..core.tolerance import Tolerance
from .closeness import close
from .targets import Target, View, is_fill, view

#: modelled runs rounded at random (besides the one rounded to nearest): a value within rounding of zero times an
#: infinity comes out NaN in some of them (each rounding moves a result one ulp with probability one half)
ENSEMBLE = 6


def reruns() -> tuple[Rerun, ...]:
    """The modelled runs: the GPU's arithmetic rounded to nearest (k=0), then at random (k=1..ENSEMBLE)."""
    return tuple(Rerun(MODELLED, k=k) for k in range(ENSEMBLE + 1))


def measured(extra: Mapping[Rerun, Outcome]) -> bool:
    """Whether every modelled run is there."""
    return all(r in extra for r in reruns())


@dataclass
class Run:
    """One run's values of a target where they are known (its programs wrote them: not tdiff's fill pattern)."""

    label: str
    values: np.ndarray
    known: np.ndarray
    changed: tuple[str, ...] = ()  # what the GPU's arithmetic changed in it (`tf32 dot`, ...) and `random rounding`


@dataclass
class Modelled:
    """The modelled runs' values by target path (the guide's run first), or why there are none."""

    runs: dict[str, list[Run]] = field(default_factory=dict)
    error: str | None = None

    def explain(self, path: str, va: np.ndarray, vb: np.ndarray, where: np.ndarray, tol: Tolerance,
                scale: np.ndarray | float) -> tuple[np.ndarray, str]:
        """The elements of `where` (a NaN or an infinity on a side) whose two values are each what a modelled run
        gives there (a finite one within `tol` of a run's finite value), and for the first such element the text
        that names the runs."""
        none = np.zeros(where.shape, bool)
        # (a 0-d result is compared as one element)
        runs = [Run(r.label, r.values.reshape(where.shape), r.known.reshape(where.shape), r.changed)
                for r in self.runs.get(path, ()) if r.values.size == where.size]
        if not runs or not where.any():
            return none, ""
        ok_a, ok_b = none.copy(), none.copy()
        up, down = none.copy(), none.copy()
        for r in runs:
            ok_a |= _gives(r, va, tol, scale)
            ok_b |= _gives(r, vb, tol, scale)
            up |= r.known & np.isposinf(r.values)
            down |= r.known & np.isneginf(r.values)
        # an infinity of each sign among the runs: the value that multiplies an infinity there is a rounding-level
        # value whose sign rounding decides, so rounding can make it 0 too (0 * inf: NaN)
        with np.errstate(invalid="ignore"):
            ok_a |= np.isnan(va) & up & down
            ok_b |= np.isnan(vb) & up & down
        explained = where & ok_a & ok_b
        if not explained.any():
            return explained, ""
        j = tuple(int(v) for v in np.argwhere(explained)[0]) if explained.ndim else ()
        return explained, _name(runs, float(va[j]), float(vb[j]), j, tol, scale)


def _gives(r: Run, v: np.ndarray, tol: Tolerance, scale: np.ndarray | float) -> np.ndarray:
    """Where run `r` gives the value `v` holds: the same NaN or infinity, or a finite value within `tol`."""
    with np.errstate(invalid="ignore"):
        same = np.where(np.isfinite(v), np.isfinite(r.values) & close(v, r.values, tol, scale),
                        (v == r.values) | (np.isnan(v) & np.isnan(r.values)))
    out: np.ndarray = same & r.known
    return out


def _name(runs: list[Run], a: float, b: float, j: tuple[int, ...], tol: Tolerance, scale: np.ndarray | float) -> str:
    """Which run gives each of the two values at `j` (a NaN where the runs give infinities of both signs: which)."""
    said = []
    for value in dict.fromkeys((_shown(a), _shown(b))):
        target = a if _shown(a) == value else b
        found = [r for r in runs if r.values.shape == np.shape(r.known) and r.known[j]
                 and bool(_gives(r, np.full(r.values.shape, target), tol, scale)[j])]
        if found:
            how = f" ({', '.join(found[0].changed)})" if found[0].changed else ""
            said.append(f"{found[0].label}{how} gives {value}")
        elif value == "nan":
            up, down = (next((r for r in runs if r.known[j] and r.values[j] == s), None) for s in (np.inf, -np.inf))
            if up is not None and down is not None:
                said.append(f"nan: {up.label} gives inf and {down.label} -inf, so the value an infinity "
                            "multiplies there takes either sign under rounding, and 0 too")
    return "; ".join(said)


def _shown(v: float) -> str:
    return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf") if np.isinf(v) else "a finite value"


def measure(case: Case, extra: Mapping[Rerun, Outcome], guide: View | None) -> Modelled:
    """The modelled runs' targets (`reruns()`, all in `extra`), the interpreter opinion's own run (`guide`: IEEE
    arithmetic rounded to nearest) first."""
    runs = [extra[r] for r in reruns()]
    failed = next((o.error for o in runs if o.error is not None), None)
    if failed is not None:
        return Modelled(error=f"a modelled run failed: {failed.summary()}")
    out = Modelled()
    views = ([(guide, ())] if guide is not None else []) + [
        (view(o, case), (*sorted(o.trace.modelled if o.trace is not None else ()),
                         *(("random rounding",) if r.k else ()))) for r, o in zip(reruns(), runs)]
    for v, changed in views:
        sampled = v.outcome.trace is not None and v.outcome.trace.sampled
        for path, t in v.targets.items():
            out.runs.setdefault(path, []).append(Run(v.label, t.values, _known(t, sampled), changed))
    return out


def _known(t: Target, sampled: bool) -> np.ndarray:
    """Elements a run gives: not tdiff's fill pattern (nothing wrote them), and in a sampled run only what its
    programs wrote."""
    known = ~is_fill(t)
    if sampled and t.writers is not None and t.writers.shape == known.shape:
        known &= t.writers >= 0
    return known
