"""Element closeness: where two value arrays agree under a tolerance (`close`), how near they come to it
(`closeness`), and the `Mismatch` that describes the elements that do not (`value_mismatch`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..core.tolerance import Tolerance
from .comparison import Mismatch


def close(a: np.ndarray, b: np.ndarray, tol: Tolerance, scale: np.ndarray | float = 0.0,
          raw_a: np.ndarray | None = None, raw_b: np.ndarray | None = None) -> np.ndarray:
    """Boolean array: True where a and b (float64) agree under `tol`, `scale` being each element's
    dataflow magnitude (raw_* the carrier bits, for exact comparison: bit for bit, NaN payloads aside and
    -0.0 equal to 0.0 unless `tol.signed_zero`)."""
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if tol.exact:
        if raw_a is not None and raw_b is not None:
            ra, rb = np.ascontiguousarray(raw_a).reshape(-1), np.ascontiguousarray(raw_b).reshape(-1)
            same = (ra.view(np.uint8).reshape(ra.size, -1) == rb.view(np.uint8).reshape(rb.size, -1)).all(axis=-1)
            same = same.reshape(raw_a.shape)
        else:
            same = (a == b) & (np.signbit(a) == np.signbit(b))
        if not tol.signed_zero:  # -0.0 equals 0.0 unless the check declares signed zeros (bits aside)
            same = same | ((a == 0) & (b == 0))
        out: np.ndarray = same | (nan_a & nan_b)
        return out
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


def fmt(v: Any) -> str:
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

    def at(i: Any) -> tuple[int, ...]:
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
        parts.append(f"largest difference {fmt(float(absd[i_abs]))} at {i_abs}: "
                     f"{names[0]}={fmt(float(a[i_abs]))}, {names[1]}={fmt(float(b[i_abs]))}")
    if zeros.any():
        j = at(np.argwhere(zeros)[0]) if a.ndim else ()
        parts.append(f"{int(zeros.sum())} differ only in the sign of zero, first at {j}: "
                     f"{names[0]}={fmt(float(a[j]))}, {names[1]}={fmt(float(b[j]))}")
    if special.any():
        j = at(np.argwhere(special)[0]) if a.ndim else ()
        parts.append(f"{int(special.sum())} NaN/inf mismatch(es), first at {j}: "
                     f"{names[0]}={fmt(float(a[j]))}, {names[1]}={fmt(float(b[j]))}")
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
