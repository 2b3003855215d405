"""The kernel's rounding carried through `launch`: how far the outputs `launch` computes with torch from what the
kernel wrote move when the kernel's stores move within their admissible rounding.

An output the kernel did not write (a gradient `launch` multiplies out of the one the kernel wrote over the logits:
`grad_weight = grad_logits.T @ x`) has no dataflow scale: nothing follows the kernel's rounding past its stores. The
carried runs (`interpreter:nudge<k>`, execute.interpreter.carry) store every value the kernel computed moved by
`LOADED_ROUNDINGS` float32 roundings of the largest input its program loaded (not more than of its dataflow
magnitude), up or down at random, and let `launch` compute on;
the spread of such an output over the runs, around the interpreter's own run, is what the kernel's admissible
rounding does to it. An element of it passes within the strict tolerance plus `MARGIN` times that spread, counted as
its own caveat; a wrapper's bug (a wrong transpose, a missing term) moves it far beyond.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..core.case import Case
from ..core.outcome import Outcome
from ..core.rerun import CARRIED, Rerun  # (also a Forgiven's `why` for what the carried runs explain)
from ..core.tolerance import Tolerance
from .targets import Target, View, view

#: carried runs (each moves every stored value up or down at random)
RUNS = 4
#: how many times the measured spread a difference may add to the strict tolerance (either side may be off by it)
MARGIN = 2.0


def reruns() -> tuple[Rerun, ...]:
    return tuple(Rerun(CARRIED, k=k) for k in range(1, RUNS + 1))


def measured(extra: Mapping[Rerun, Outcome]) -> bool:
    return all(r in extra for r in reruns())


def wrapped(guide: Target | None) -> bool:
    """Whether a target is `launch`'s own (the guide's run saw no kernel program write any element of it)."""
    return guide is not None and (guide.writers is None or not bool((guide.writers >= 0).any()))


@dataclass
class Carried:
    """Per target path, the largest distance of a carried run from the interpreter's own run (inf where one holds a
    NaN or an infinity the other does not); or why there is none."""

    spreads: dict[str, np.ndarray] = field(default_factory=dict)
    count: int = 0
    error: str | None = None

    def explain(self, path: str, va: np.ndarray, vb: np.ndarray, where: np.ndarray,
                tol: Tolerance) -> tuple[np.ndarray, float]:
        """The elements of `where` within the strict tolerance plus `MARGIN` times the spread, and the spread at
        the first of them."""
        spread = self.spreads.get(path)
        none = np.zeros(where.shape, bool)
        if spread is None or spread.size != where.size:
            return none, 0.0
        spread = spread.reshape(where.shape)  # (a 0-d result is compared as one element)
        with np.errstate(invalid="ignore", over="ignore"):
            strict = tol.atol + tol.rtol * np.minimum(np.abs(va), np.abs(vb))
            ok = where & np.isfinite(spread) & (np.abs(va - vb) <= strict + MARGIN * spread)
        if not ok.any():
            return ok, 0.0
        j = tuple(int(v) for v in np.argwhere(ok)[0]) if ok.ndim else ()
        return ok, float(spread[j])


def measure(case: Case, extra: Mapping[Rerun, Outcome], guide: View | None) -> Carried:
    """The carried runs' spread (`reruns()`, all in `extra`) around `guide`, the interpreter's own run."""
    if guide is None:
        return Carried(error="no interpreter run to carry the kernel's rounding from")
    runs = [extra[r] for r in reruns()]
    failed = next((o.error for o in runs if o.error is not None), None)
    if failed is not None:
        return Carried(error=f"a carried run failed: {failed.summary()}")
    out = Carried(count=len(runs))
    for path, t0 in guide.targets.items():
        spread, complete = np.zeros(t0.values.shape), True
        for o in runs:
            t = view(o, case).targets.get(path)
            if t is None or t.values.shape != t0.values.shape:
                complete = False
                break
            with np.errstate(invalid="ignore", over="ignore"):
                same = (t.values == t0.values) | (np.isnan(t.values) & np.isnan(t0.values))
                d = np.where(same, 0.0, np.abs(t.values - t0.values))
            spread = np.maximum(spread, np.where(np.isnan(d), np.inf, d))
        if complete:
            out.spreads[path] = spread
    return out
