"""Dataflow magnitudes: for every value the interpreter computes, how large the values were that
flowed into it, and whether an overflow happened on the way.

Each floating `TensorHandle` the instrumented builder returns carries two shadows of its shape:

- `mag`: the largest finite magnitude among the values it was computed from (its own included),
  grown by the square root of the number of terms where terms are summed (reductions, `tl.dot`,
  atomic adds). Rounding errors of a correct computation scale with it, so it is the per-element
  scale of tdiff's tolerance: an element fed by values near 1 is judged near 1, whatever other
  elements of the tensor hold.
- `ovf`: an operation on finite operands gave inf, or on non-NaN operands gave NaN (overflow,
  inf - inf, 0 * inf): the result then depends on an order of operations Triton does not fix.

Handles without shadows (made outside the builder) count with their own magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from .shims import bf16_to_f32

MAG = "_tdiff_mag"
OVF = "_tdiff_ovf"

#: builder methods that only move values: the shadows move the same way
LAYOUT = ("create_reshape", "create_trans", "create_expand_dims", "create_broadcast", "create_splat",
          "create_unsplat", "create_cat", "create_join", "create_split", "create_gather", "create_permute")
#: builder methods whose shadows another layer sets (memory) or that need their own rule
SPECIAL = ("create_masked_load", "create_load", "create_tensor_pointer_load", "create_dot", "create_atomic_rmw",
           "create_atomic_cas", "create_masked_store", "create_store", "create_tensor_pointer_store")


def scalar_type(h: Any) -> Any:
    dt = getattr(h, "dtype", None)
    return getattr(dt, "scalar", dt)


def is_float(h: Any) -> bool:
    t = scalar_type(h)
    return isinstance(t, tl.dtype) and t.is_floating() and t.primitive_bitwidth >= 16


def values(h: TensorHandle) -> np.ndarray:
    """A floating handle's values as a float64 array (bf16 decoded from its bits)."""
    data = np.asarray(h.data)
    if scalar_type(h) == tl.bfloat16 and data.dtype == np.uint16:
        return bf16_to_f32(data).astype(np.float64)
    return data.astype(np.float64, copy=False)


def own_mag(h: TensorHandle) -> np.ndarray:
    v = np.abs(values(h))
    return np.where(np.isfinite(v), v, 0.0)


def mag_of(h: Any) -> np.ndarray | None:
    """The magnitude shadow of a handle (None for non-floating handles)."""
    if not isinstance(h, TensorHandle) or not is_float(h):
        return None
    m = getattr(h, MAG, None)
    if m is None or np.shape(m) != np.shape(h.data):
        m = own_mag(h)
    return m


def ovf_of(h: Any) -> np.ndarray | None:
    """The overflow shadow of a handle (None: no overflow upstream)."""
    return getattr(h, OVF, None) if isinstance(h, TensorHandle) else None


def set_shadows(h: TensorHandle, mag: np.ndarray | None, ovf: np.ndarray | None) -> None:
    if mag is not None:
        object.__setattr__(h, MAG, mag)
    if ovf is not None and np.any(ovf):
        object.__setattr__(h, OVF, ovf)


def _fit(x: np.ndarray, shape: tuple) -> np.ndarray:
    """`x` broadcast to `shape`, or its maximum everywhere when it does not broadcast."""
    if x.shape == shape:
        return x
    try:
        return np.broadcast_to(x, shape)
    except ValueError:
        return np.full(shape, x.max() if x.size else 0, dtype=x.dtype)


def _new_overflow(out_vals: np.ndarray, ins: Sequence[np.ndarray]) -> np.ndarray | None:
    """Where a non-finite result came from operands that were finite (inf) or not NaN (NaN)."""
    bad = ~np.isfinite(out_vals)
    if not bad.any():
        return None
    shape = out_vals.shape
    finite = np.ones(shape, bool)
    nonnan = np.ones(shape, bool)
    for v in ins:
        fv = _fit(v, shape)
        finite &= np.isfinite(fv)
        nonnan &= ~np.isnan(fv)
    return (np.isinf(out_vals) & finite) | (np.isnan(out_vals) & nonnan)


def elementwise(out: TensorHandle, ins: Sequence[Any]) -> None:
    """An elementwise result: the largest of its operands' magnitudes and its own."""
    shape = np.shape(out.data)
    floats = [h for h in ins if isinstance(h, TensorHandle) and is_float(h)]
    mag = own_mag(out)
    for h in floats:
        mag = np.maximum(mag, _fit(mag_of(h), shape))
    ovf = None
    for h in floats:
        o = ovf_of(h)
        if o is not None:
            ovf = _fit(o, shape) if ovf is None else ovf | _fit(o, shape)
    new = _new_overflow(values(out), [values(h) for h in floats])
    if new is not None:
        ovf = new if ovf is None else ovf | new
    set_shadows(out, mag, ovf)


def _shadow_handle(h: Any, kind: str) -> Any:
    if not isinstance(h, TensorHandle):
        return h
    if kind == "mag":
        m = mag_of(h)
        return TensorHandle(m if m is not None else np.zeros(np.shape(h.data)), tl.float64)
    o = ovf_of(h)
    return TensorHandle(o if o is not None else np.zeros(np.shape(h.data), bool), tl.int1)


def layout(fn: Callable, args: tuple, kw: dict, out: Any) -> None:
    """A result that only moves values: apply the same move to the operands' shadows."""
    outs = out if isinstance(out, tuple) else (out,)
    if not any(isinstance(o, TensorHandle) and is_float(o) for o in outs):
        return
    srcs = {id(a) for a in args if isinstance(a, TensorHandle) and is_float(a)}
    mags = fn(*[_shadow_handle(a, "mag") if id(a) in srcs else a for a in args], **kw)
    mags = mags if isinstance(mags, tuple) else (mags,)
    ovfs: tuple = (None,) * len(outs)
    if any(ovf_of(a) is not None for a in args if id(a) in srcs):
        got = fn(*[_shadow_handle(a, "ovf") if id(a) in srcs else a for a in args], **kw)
        ovfs = tuple(np.asarray(g.data, bool) for g in (got if isinstance(got, tuple) else (got,)))
    for o, m, v in zip(outs, mags, ovfs):
        if isinstance(o, TensorHandle) and is_float(o):
            set_shadows(o, np.asarray(m.data, np.float64), v)


def dot(a: TensorHandle, b: TensorHandle, d: TensorHandle, out: TensorHandle) -> None:
    """`tl.dot`: each output sums K products; its scale is the largest product, grown by sqrt(K),
    added in quadrature to the accumulator's (so a K loop of dots grows as one long dot)."""
    ma, mb, md = mag_of(a), mag_of(b), mag_of(d)
    shape = np.shape(out.data)
    if ma is None or mb is None or ma.ndim < 2:
        elementwise(out, [a, b, d])
        return
    k = ma.shape[-1]
    prod = ma.max(axis=-1)[..., :, None] * mb.max(axis=-2)[..., None, :] * math.sqrt(k)
    mag = np.sqrt(_fit(md, shape) ** 2 + prod**2) if md is not None else prod
    mag = np.maximum(np.where(np.isfinite(mag), mag, np.finfo(np.float64).max), own_mag(out))
    ovf = None
    oa, ob, od = ovf_of(a), ovf_of(b), ovf_of(d)
    if oa is not None or ob is not None or od is not None:
        ovf = np.zeros(shape, bool)
        if oa is not None:
            ovf |= oa.any(axis=-1)[..., :, None]
        if ob is not None:
            ovf |= ob.any(axis=-2)[..., None, :]
        if od is not None:
            ovf |= _fit(od, shape)
    out_vals = values(out)
    if not np.isfinite(out_vals).all():
        fa, fb, fd = values(a), values(b), values(d)
        finite = np.isfinite(fa).all(axis=-1)[..., :, None] & np.isfinite(fb).all(axis=-2)[..., None, :] \
            & _fit(np.isfinite(fd), shape)
        nonnan = (~np.isnan(fa)).all(axis=-1)[..., :, None] & (~np.isnan(fb)).all(axis=-2)[..., None, :] \
            & _fit(~np.isnan(fd), shape)
        new = (np.isinf(out_vals) & finite) | (np.isnan(out_vals) & nonnan)
        ovf = new if ovf is None else ovf | new
    set_shadows(out, mag, ovf)


def reduction(inp: Any, out: Any, axis: int | None, keep_dims: bool, terms_grow: bool, scan: bool = False) -> None:
    """`tl.reduce` / `tl.associative_scan` of one tensor: the largest input magnitude along the
    axis (grown by sqrt(n) for sums), and any overflow along it."""
    hi, ho = getattr(inp, "handle", None), getattr(out, "handle", None)
    if not (isinstance(hi, TensorHandle) and isinstance(ho, TensorHandle) and is_float(hi) and is_float(ho)):
        return
    m, o = mag_of(hi), ovf_of(hi)
    vals = values(hi)
    shape = np.shape(ho.data)
    ax = None if axis is None else (axis % m.ndim if m.ndim else None)
    n = m.size if ax is None else (m.shape[ax] if m.ndim else 1)
    grow = math.sqrt(max(n, 1)) if terms_grow else 1.0

    def along(x: np.ndarray, how: Callable) -> np.ndarray:
        if scan:
            r = how(x, axis=ax, keepdims=True) if ax is not None else how(x)
            return np.broadcast_to(r, x.shape).reshape(shape) if np.size(r) != np.prod(shape) else \
                np.reshape(r, shape) if np.ndim(r) else np.full(shape, r)
        r = how(x, axis=ax, keepdims=keep_dims) if ax is not None else how(x)
        return np.reshape(r, shape) if np.size(r) == np.prod(shape, dtype=int) else np.full(shape, np.max(r))

    mag = np.maximum(along(m, np.max) * grow, own_mag(ho))
    ovf = along(o, np.any) if o is not None else None
    out_vals = values(ho)
    if not np.isfinite(out_vals).all():
        finite = along(np.isfinite(vals), np.all)
        nonnan = along(~np.isnan(vals), np.all)
        new = (np.isinf(out_vals) & finite) | (np.isnan(out_vals) & nonnan)
        ovf = new if ovf is None else ovf | new
    set_shadows(ho, mag, ovf)


def edge_ratio(vals: np.ndarray, dtype: Any) -> float:
    """How far loaded values reach towards their dtype's limits: the largest |value| over the square
    root of the dtype's max (>= 1 where squaring or summing such values can overflow); inf for
    infinities."""
    if vals.size == 0:
        return 0.0
    a = np.abs(vals[~np.isnan(vals)])
    if a.size == 0:
        return 0.0
    top = float(a.max())
    if not math.isfinite(top):
        return math.inf
    limit = _dtype_max(dtype)
    return top / math.sqrt(limit) if limit else 0.0


def _dtype_max(t: Any) -> float:
    bits = getattr(t, "primitive_bitwidth", 32)
    if t == tl.bfloat16:
        return 3.3895313892515355e38
    return {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}.get(bits, 0.0)
