"""The fragile shadow (per element, any dtype): where a value was decided by a comparison of computed
floats within the arithmetic's tolerance of each other (`x == tl.max(x)` after an approximate `tanh`,
`block_max > m`), or computed from an operand within its own rounding error of a pole (`near_pole`).

Another backend, rounding within its tolerance, may decide the other way, so an argmax index or a
branch taken may legitimately differ there. Comparisons of values no arithmetic produced (loads,
constants) are exact and never fragile. The shadow follows every value computed from a fragile one,
through memory too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from .dataflow import eps_of, fit, float_mag, is_float, mag_of, values

FRAGILE = "_tdiff_fragile"


def fragile_of(h: Any) -> np.ndarray | None:
    """Where a handle's value was decided by a comparison within tolerance (None: nowhere)."""
    f = getattr(h, FRAGILE, None) if isinstance(h, TensorHandle) else None
    return f if f is not None and np.shape(f) == np.shape(h.data) else None


def set_fragile(h: Any, f: np.ndarray | None) -> None:
    if isinstance(h, TensorHandle) and f is not None and np.any(f):
        object.__setattr__(h, FRAGILE, np.broadcast_to(np.asarray(f, bool), np.shape(h.data)).copy())


def carry_fragile(out: Any, args: Sequence[Any]) -> None:
    """An elementwise result is fragile where any operand is."""
    found = [fragile_of(a) for a in args if isinstance(a, TensorHandle)]
    found = [f for f in found if f is not None]
    if not found:
        return
    for o in out if isinstance(out, tuple) else (out,):
        if isinstance(o, TensorHandle):
            shape = np.shape(o.data)
            acc = np.zeros(shape, bool)
            for f in found:
                acc |= fit(f, shape)
            set_fragile(o, acc)


def compare(out: TensorHandle, a: Any, b: Any,
            allowed: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None) -> None:
    """A comparison of two floats: its result is fragile where either operand was computed (carries
    rounding) and the two differ by no more than `allowed(|a|, |b|, M)`, M the larger error scale
    (twice the tolerance: each side may be off by it); and where an operand already was fragile.
    Equal operands are not fragile here: `x == tl.max(x)` at the maximum is the same value on every
    backend; a tie between two lanes is the reduction's to flag (`extreme_fragile`)."""
    carry_fragile(out, [a, b])
    if not (isinstance(a, TensorHandle) and isinstance(b, TensorHandle) and is_float(a) and is_float(b)):
        return
    if allowed is None or not (eps_of(a) or eps_of(b)):
        return  # loads and constants, or exact operations: the comparison is the same on every backend
    shape = np.shape(out.data)
    va, vb = fit(values(a), shape), fit(values(b), shape)
    ma, mb = fit(mag_of(a), shape), fit(mag_of(b), shape)
    with np.errstate(all="ignore"):
        close = np.isfinite(va) & np.isfinite(vb) & (va != vb) & (np.abs(va - vb) <= 2 * allowed(
            np.abs(va), np.abs(vb), np.maximum(ma, mb)))  # type: ignore[arg-type]  # (float operands: scales)
    if close.any():
        prev = fragile_of(out)
        set_fragile(out, close if prev is None else prev | close)


#: operations whose result is unbounded (or steep without bound) as their operand nears 0, by the operand's index:
#: where that operand is within its own rounding error of 0, any backend may give any result (`near_pole`)
NEAR_POLE = {"create_rsqrt": 0, "create_sqrt": 0, "create_precise_sqrt": 0, "create_log": 0, "create_log2": 0,
             "create_fdiv": 1, "create_precise_divf": 1}


def near_pole(out: TensorHandle, operand: Any,
              allowed: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None) -> None:
    """A result computed from an operand that is within its own rounding error of a pole at 0 (the rsqrt of a
    variance that is rounding noise: `E[(x - mean)^2]` of a constant row of large values, whose float32 mean is
    off by an ulp) is fragile: another order of the same float32 operations gives a result anywhere between this
    one and the pole's. "Within": |operand| at most twice `allowed(|v|, |v|, M)` (each side may be off by it)."""
    if allowed is None or not isinstance(operand, TensorHandle) or not is_float(operand) or not eps_of(operand):
        return
    shape = np.shape(out.data)
    v, m = fit(values(operand), shape), fit(float_mag(operand), shape)
    with np.errstate(all="ignore"):
        av = np.abs(v)
        near = np.isfinite(v) & (m > av) & (av <= 2 * allowed(av, av, m))
    if near.any():
        prev = fragile_of(out)
        set_fragile(out, near if prev is None else prev | near)


def extreme_fragile(inp: Any, out: Any, axis: int | None, keep_dims: bool, largest: bool,
                    allowed: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None) -> None:
    """A max (or min) of computed floats is fragile where its two largest (smallest) values along the
    axis are within `allowed` of each other, ties included: which lane holds the extreme (an argmax,
    `x == tl.max(x)`) may differ on another backend."""
    hi, ho = getattr(inp, "handle", None), getattr(out, "handle", None)
    if allowed is None or not (isinstance(hi, TensorHandle) and isinstance(ho, TensorHandle) and is_float(hi)) \
            or not eps_of(hi):
        return
    vals, mag = values(hi), float_mag(hi)
    if vals.ndim == 0:
        return
    ax = -1 if axis is None else axis % vals.ndim
    if axis is None:
        vals, mag = vals.reshape(-1), mag.reshape(-1)
    if vals.shape[ax] < 2:
        return
    with np.errstate(all="ignore"):
        s = np.sort(vals if largest else -vals, axis=ax)
        top, second = np.take(s, -1, axis=ax), np.take(s, -2, axis=ax)
        m = np.max(mag, axis=ax)
        near = np.isfinite(top) & np.isfinite(second) & (top - second <= 2 * allowed(np.abs(top), np.abs(second), m))
    if not near.any():
        return
    shape = np.shape(ho.data)
    if keep_dims and axis is not None:
        near = np.expand_dims(near, ax)
    near = near.reshape(shape) if near.size == int(np.prod(shape, dtype=int)) else np.full(shape, bool(near.any()))
    prev = fragile_of(ho)
    set_fragile(ho, near if prev is None else prev | near)


def _fragile_handle(h: Any) -> Any:
    """A handle holding `h`'s fragile shadow (False where it has none), for a layout op to move."""
    if not isinstance(h, TensorHandle):
        return h
    f = fragile_of(h)
    return TensorHandle(f if f is not None else np.zeros(np.shape(h.data), bool), tl.int1)


def layout_fragile(fn: Callable, args: tuple, kw: dict, out: Any) -> None:
    """Move the operands' fragile shadows as a layout op moves their values (any dtype)."""
    srcs = [a for a in args if isinstance(a, TensorHandle) and fragile_of(a) is not None]
    if not srcs:
        return
    ids = {id(a) for a in srcs}
    got = fn(*[_fragile_handle(a) if id(a) in ids else a for a in args], **kw)
    outs = out if isinstance(out, tuple) else (out,)
    for o, g in zip(outs, got if isinstance(got, tuple) else (got,)):
        if isinstance(o, TensorHandle) and isinstance(g, TensorHandle) and np.shape(g.data) == np.shape(o.data):
            set_fragile(o, np.asarray(g.data, bool))


def reduce_fragile(inp: Any, out: Any, axis: int | None, keep_dims: bool, scan: bool = False) -> None:
    """A reduction (or scan) is fragile where any element it combined is."""
    hi, ho = getattr(inp, "handle", None), getattr(out, "handle", None)
    f = fragile_of(hi)
    if f is None or not isinstance(ho, TensorHandle):
        return
    shape = np.shape(ho.data)
    ax = None if axis is None or f.ndim == 0 else axis % f.ndim
    if scan:
        acc: Any = np.logical_or.accumulate(f, axis=ax) if ax is not None else np.logical_or.accumulate(f.reshape(-1))
    else:  # (acc: an array, or numpy's bool where no axis is given)
        acc = f.any(axis=ax, keepdims=keep_dims) if ax is not None else f.any()
    r = np.asarray(acc)
    set_fragile(ho, r.reshape(shape) if r.size == int(np.prod(shape, dtype=int)) else np.full(shape, bool(r.any())))
