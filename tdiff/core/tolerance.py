"""Tolerances by dtype and by the kinds of operation a kernel performs, per element.

An element pair (a, b) agrees when

    |a - b| <= atol + rtol * min(|a|, |b|) + scale * M

where M is the element's dataflow magnitude: the largest finite magnitude among the values that
were computed into this element (its inputs and intermediates), grown by the square root of the
number of terms where terms are summed (reductions, `tl.dot`, atomic adds). The interpreter
follows M for every value it computes (`tdiff.execute.interpreter.dataflow`), so an element fed by values
near 1 is judged near 1 whatever other elements of the tensor hold, and an elementwise result is
judged against its own operands (cancellation in `a * b - c` is allowed `scale * |a * b|`).

Without an interpreter run to follow the dataflow (the compiled backend against the reference
when the interpreter cannot run a case), M is the case's largest finite input magnitude times the
square root of the terms summed into each output: coarser, and the summary says so.

NaN agrees with NaN at the same position (payloads are ignored); infinities must match in sign;
-0.0 equals 0.0 unless `signed_zero=True`. `exact` compares bits (NaN payloads aside, and -0.0 equal
to 0.0 unless `signed_zero=True`): integers, bool, and kernels that only move data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

import numpy as np

from .dtypes import DType, dtype
from .op_classes import tolerance_class

TF32_EPS = 2.0**-10
#: float32 roundings (float64 for a float64 value) of its dataflow magnitude that a value a kernel computed may carry
#: and still be the kernel's rounding: an intermediate of the inputs' magnitude rounds that much in any float32
#: computation (a cross entropy's lse - x_y of 6e-6 from lse = 12). The judge lets elements within the dataflow
#: scale differ by it from the reference (judge.sensitivity), and carries it through what `launch` computes from
#: the kernel's stores (execute.interpreter.carry, judge.carried)
LOADED_ROUNDINGS = 2.0

# (rtol, scale) as multiples of the output dtype's eps, by dtype width
_MULT = {
    "arith": {64: (8, 16), 32: (8, 16), 16: (2, 4), 8: (1, 2)},
    "transcendental": {64: (16, 16), 32: (16, 16), 16: (2, 4), 8: (1, 2)},
    "reduce": {64: (16, 16), 32: (16, 16), 16: (2, 4), 8: (1, 2)},
    "dot": {64: (16, 16), 32: (16, 16), 16: (2, 4), 8: (1, 2)},
    "tf32": {64: (16, 16), 32: (16, 16), 16: (2, 4), 8: (1, 2)},
}
_FLOOR = {  # (rtol, scale) floors for float32 and narrower: fast approximations, tf32
    "transcendental": (1e-4, 1e-4),
    "tf32": (2e-3, 2 * TF32_EPS),
}


def allowed(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, scale: float,
            magnitude: np.ndarray | float = 0.0) -> np.ndarray:
    """The difference each element pair (float64 arrays) may show: atol + rtol * min(|a|, |b|) + scale * M,
    M (`magnitude`) the element's dataflow magnitude. Standalone (numpy only): reproducers embed its source."""
    with np.errstate(invalid="ignore", over="ignore"):
        out: np.ndarray = atol + rtol * np.minimum(np.abs(a), np.abs(b)) + scale * magnitude
        return out


def within(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, scale: float, magnitude: np.ndarray | float = 0.0,
           signed_zero: bool = False, exact: bool = False) -> np.ndarray:
    """True where a and b (float64 arrays) agree: |a - b| <= `allowed(...)`; NaN agrees only with NaN (payloads
    ignored), an infinity only with the same infinity, -0.0 with 0.0 unless `signed_zero`; `exact`: the values
    must match (and the signs of zeros, with `signed_zero`). The one formula tdiff's comparison and reproducers
    use (standalone: numpy only)."""
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if exact:
        same: np.ndarray = ((a == b) & ((np.signbit(a) == np.signbit(b)) | (not signed_zero))) | (nan_a & nan_b)
        return same
    with np.errstate(invalid="ignore", over="ignore"):
        ok: np.ndarray = np.abs(a - b) <= allowed(a, b, rtol, atol, scale, magnitude)
    ok = np.where(np.isinf(a) | np.isinf(b), a == b, ok)
    ok = np.where(nan_a | nan_b, nan_a & nan_b, ok)
    if signed_zero:
        ok = np.where((a == 0) & (b == 0), np.signbit(a) == np.signbit(b), ok)
    return ok


@dataclass(frozen=True)
class Tolerance:
    """How far two values may differ. Build with `Tolerance(...)` or `Tolerance.preset(name, dtype)`.

    rtol: relative to the smaller side; atol: absolute; scale: relative to the element's dataflow
    magnitude (see the module's docstring); exact: bits must match; signed_zero: -0.0 != 0.0.
    """

    rtol: float = 0.0
    atol: float = 0.0
    scale: float = 0.0
    exact: bool = False
    signed_zero: bool = False
    name: str = "custom"

    @classmethod
    def preset(cls, name: str, dt: str | DType = "float32") -> Tolerance:
        """`exact`, `arith`, `transcendental`, `reduce`, `dot` or `tf32`, for a dtype."""
        dt = dtype(dt)
        if name == "exact" or not dt.is_float:
            return cls(exact=True, name="exact")
        if name not in _MULT:
            raise ValueError(f"unknown tolerance preset {name!r}: exact, {', '.join(_MULT)}")
        width = min(64, max(8, dt.bits))
        rm, sm = _MULT[name][width]
        rtol, scale = rm * dt.eps, sm * dt.eps
        if name in _FLOOR and dt.bits <= 32:
            fr, fs = _FLOOR[name]
            rtol, scale = max(rtol, fr), max(scale, fs)
        return cls(rtol=rtol, atol=dt.tiny, scale=scale, name=f"{name}/{dt.name}")

    def loosened(self, factor: float) -> Tolerance:
        if self.exact:
            return self
        return replace(self, rtol=self.rtol * factor, scale=self.scale * factor, name=f"{self.name}x{factor:g}")

    def describe(self) -> str:
        if self.exact:
            return "exact"
        return f"{self.name} (rtol={self.rtol:.3g}, scale={self.scale:.3g}, atol={self.atol:.3g})"


_FIELDS = {f.name for f in fields(Tolerance)}


def combine(tols: Iterable[Tolerance]) -> Tolerance:
    """The loosest of several tolerances."""
    tols = list(tols)
    if not tols:
        return Tolerance(exact=True, name="exact")
    if all(t.exact for t in tols):
        return tols[0]
    loose = [t for t in tols if not t.exact]
    return Tolerance(rtol=max(t.rtol for t in loose), atol=max(t.atol for t in loose),
                     scale=max(t.scale for t in loose), signed_zero=any(t.signed_zero for t in loose),
                     name="+".join(sorted({t.name.split("/")[0] for t in loose})) + f"/{loose[0].name.split('/')[-1]}")


def from_ops(ops: Iterable[str] | None, dt: str | DType, reference: bool = False) -> Tolerance:
    """The default tolerance for an output of dtype `dt` of a kernel that performed `ops` (op tags,
    classed in `tdiff.core.op_classes`), compared between two backends of the kernel or, with `reference`,
    against a reference.

    `ops=None` means unknown (no interpreter ran): all floating classes but tf32 are assumed.
    """
    return _from_ops(None if ops is None else frozenset(ops), dtype(dt).name, reference)


@lru_cache(maxsize=1024)
def _from_ops(ops: frozenset[str] | None, name: str, reference: bool) -> Tolerance:
    dt = dtype(name)
    if not dt.is_float:
        return Tolerance(exact=True, name="exact")
    if ops is None:
        classes = {"arith", "transcendental", "reduce", "dot"}
    else:
        classes = {c for c in (tolerance_class(o, reference) for o in ops) if c is not None}
    if not classes:
        return Tolerance(exact=True, name="exact")
    return combine(Tolerance.preset(c, dt) for c in sorted(classes))


def resolve(override: Any, default: Tolerance, dt: str | DType) -> Tolerance:
    """Apply a user override: a Tolerance, a preset name, or a dict of Tolerance fields."""
    if override is None:
        return default
    if isinstance(override, Tolerance):
        return override
    if isinstance(override, str):
        return Tolerance.preset(override, dt)
    if isinstance(override, Mapping):
        unknown = set(override) - _FIELDS
        if unknown:
            raise TypeError(f"unknown tolerance field(s) {sorted(unknown)}: use {sorted(_FIELDS - {'name'})}")
        base = default if not default.exact else Tolerance(name="custom")
        return replace(base, **dict(override), name="custom")
    raise TypeError(f"a tolerance must be a Tolerance, a preset name or a dict, not {type(override).__name__}")


def validate(override: Any) -> None:
    """Raise (ValueError or TypeError, with a message a user can act on) if `override` is not a tolerance
    `resolve` accepts: checked once, where a check is declared, rather than on its first case."""
    if override is None or isinstance(override, Tolerance):
        return
    if isinstance(override, str):
        if override != "exact" and override not in _MULT:
            raise ValueError(f"unknown tolerance preset {override!r}: exact, {', '.join(_MULT)}")
        return
    if isinstance(override, Mapping):
        unknown = set(override) - _FIELDS
        if unknown:
            raise TypeError(f"unknown tolerance field(s) {sorted(unknown)}: use {sorted(_FIELDS - {'name'})}")
        bad = [k for k in ("rtol", "atol", "scale") if k in override
               and (not isinstance(override[k], (int, float)) or override[k] < 0)]
        if bad:
            raise ValueError(f"tolerance field(s) {bad} must be non-negative numbers")
        return
    raise TypeError(f"a tolerance must be a Tolerance, a preset name or a dict, not {type(override).__name__}")
