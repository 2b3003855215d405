"""Results Triton leaves unspecified, seen while interpreting: integer division or remainder by zero,
signed division overflow (INT_MIN / -1), shifts by the bit width or more (or by a negative amount),
and `tl.maximum` / `tl.minimum` with one NaN operand under `propagate_nan=NONE` (LLVM's `sdiv`/`udiv`,
`srem`/`urem`, `shl`/`lshr`/`ashr` give poison or undefined values there; `maxnum`/`minnum` may
return either operand for a signalling NaN, and Triton documents only `PropagateNan.ALL`).

Each event is recorded in `Trace.unspecified` ("what at file:line: code" -> lanes). A run with
`alternate=True` gives those lanes another value (the bitwise complement of the interpreter's
integer result; NaN for min/max), so a verdict rerun shows whether a divergence depends on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from triton.runtime.interpreter import TensorHandle

from ..backends.base import user_line_now

DIVISIONS = {"create_sdiv": "integer division by zero", "create_udiv": "integer division by zero",
             "create_srem": "integer remainder by zero", "create_urem": "integer remainder by zero"}
SHIFTS = ("create_shl", "create_lshr", "create_ashr")
MINMAX = ("create_maxnumf", "create_minnumf")
NAMES = (*DIVISIONS, *SHIFTS, *MINMAX)


def _data(h: Any, shape: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(np.asarray(h.data), shape)


def _is_nan(h: Any, shape: tuple[int, ...]) -> np.ndarray:
    d = _data(h, shape)
    if d.dtype == np.uint16:  # bf16 bits
        return ((d & 0x7F80) == 0x7F80) & ((d & 0x7F) != 0)
    return np.isnan(d) if d.dtype.kind == "f" else np.zeros(shape, bool)


def lanes(name: str, lhs: Any, rhs: Any, out: np.ndarray) -> tuple[str, np.ndarray] | None:
    """What is unspecified about this operation's result, and in which lanes (None: nothing)."""
    shape = out.shape
    if name in DIVISIONS:
        b = _data(rhs, shape)
        bad = b == 0
        what = DIVISIONS[name]
        if name in ("create_sdiv", "create_srem") and b.dtype.kind == "i":
            a = _data(lhs, shape)
            overflow = (a == np.iinfo(a.dtype).min) & (b == -1)
            if overflow.any() and not bad.any():
                what = "signed division overflow (INT_MIN / -1)"
            bad = bad | overflow
        return (what, bad) if bad.any() else None
    if name in SHIFTS:
        b = _data(rhs, shape)
        bits = np.asarray(lhs.data).dtype.itemsize * 8
        bad = (b >= bits) | ((b < 0) if b.dtype.kind == "i" else np.zeros(shape, bool))
        return (f"shift by {bits} bits or more (or by a negative amount)", bad) if bad.any() else None
    if name in MINMAX:
        bad = _is_nan(lhs, shape) ^ _is_nan(rhs, shape)
        return ("tl.maximum / tl.minimum of a NaN and a number under propagate_nan=NONE", bad) if bad.any() else None
    return None


def alternate(out: np.ndarray, bad: np.ndarray, name: str) -> np.ndarray:
    """Another value for the unspecified lanes: the complement of an integer, NaN for min/max."""
    if name in MINMAX:
        nan = np.uint16(0x7FC0) if out.dtype == np.uint16 else np.array(np.nan, out.dtype)
        return np.where(bad, nan, out).astype(out.dtype)
    return np.where(bad, ~out, out).astype(out.dtype)


def hooks(current: Callable[[str], Callable], record: Callable[[str, np.ndarray], None],
          alternative: bool) -> dict[str, Callable]:
    """Builder methods that record unspecified lanes (and, with `alternative`, change them)."""
    out: dict[str, Callable] = {}
    for name in NAMES:
        out[name] = _hook(name, current(name), record, alternative)
    return out


def _hook(name: str, fn: Callable, record: Callable[[str, np.ndarray], None], alternative: bool) -> Callable:
    def hook(lhs: Any, rhs: Any, *rest: Any, **kw: Any) -> Any:
        res = fn(lhs, rhs, *rest, **kw)
        data = np.asarray(res.data)
        found = lanes(name, lhs, rhs, data)
        if found is None:
            return res
        what, bad = found
        record(f"{what} at {user_line_now()}", bad)
        if alternative:
            return TensorHandle(alternate(data, bad, name), res.dtype)
        return res

    return hook
