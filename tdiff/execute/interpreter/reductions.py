"""Dataflow through the operations that combine many terms: `tl.dot` (K products per output),
`tl.reduce` and `tl.associative_scan` (the shadows are `dataflow`'s). A sum's error scale grows with
the square root of its number of terms, and it is damaged where its finite terms could overflow in
some order of the additions, which Triton does not fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from triton.runtime.interpreter import TensorHandle

from .dataflow import (
    dtype_max,
    elementwise,
    eps_of,
    finite_abs,
    fit,
    float_mag,
    is_float,
    mag_of,
    near_limit,
    ovf_of,
    own_mag,
    scalar_type,
    set_shadows,
    type_eps,
    values,
)
from .fragile import fragile_of, set_fragile


def dot(a: TensorHandle, b: TensorHandle, d: TensorHandle, out: TensorHandle,
        above: float | None = None, left: Callable[[np.ndarray, str], None] | None = None) -> np.ndarray | None:
    """`tl.dot`: each output sums K products a_ik * b_kj, each with error scale M_a |b| + M_b |a|; the
    largest, grown by sqrt(K), is added in quadrature to the accumulator's (so a K loop of dots grows
    as one long dot)."""
    ma, mb, md = mag_of(a), mag_of(b), mag_of(d)
    shape = np.shape(out.data)
    fa, fb = fragile_of(a), fragile_of(b)
    if fa is not None or fb is not None or fragile_of(d) is not None:  # each output on a row of a, a column of b
        f = np.zeros(shape, bool) | fit(fragile_of(d) if fragile_of(d) is not None else np.zeros(shape, bool), shape)
        if fa is not None and fa.ndim >= 2:
            f |= fa.any(axis=-1)[..., :, None]  # type: ignore[index]  # (numpy: an axis given gives an array)
        if fb is not None and fb.ndim >= 2:
            f |= fb.any(axis=-2)[..., None, :]  # type: ignore[index]  # (as above)
        set_fragile(out, f)
    if ma is None or mb is None or ma.ndim < 2:
        return elementwise(out, [a, b, d], "create_dot", above, left)
    va, vb = finite_abs(values(a)), finite_abs(values(b))
    k = ma.shape[-1]
    with np.errstate(all="ignore"):
        prod = (ma.max(axis=-1)[..., :, None] * vb.max(axis=-2)[..., None, :]
                + va.max(axis=-1)[..., :, None] * mb.max(axis=-2)[..., None, :]) * math.sqrt(k)
        mag = np.sqrt(fit(md, shape) ** 2 + prod**2) if md is not None else prod
    mag = np.maximum(np.where(np.isfinite(mag), mag, np.finfo(np.float64).max), own_mag(out))
    ovf = None
    oa, ob, od = ovf_of(a), ovf_of(b), ovf_of(d)
    if oa is not None or ob is not None or od is not None:
        ovf = np.zeros(shape, bool)
        if oa is not None:
            ovf |= oa.any(axis=-1)[..., :, None]  # type: ignore[index]  # (as above)
        if ob is not None:
            ovf |= ob.any(axis=-2)[..., None, :]  # type: ignore[index]  # (as above)
        if od is not None:
            ovf |= fit(od, shape)
    out_vals = values(out)
    fa, fb, fd = values(a), values(b), values(d)
    finite = np.isfinite(fa).all(axis=-1)[..., :, None] & np.isfinite(fb).all(axis=-2)[..., None, :] \
        & fit(np.isfinite(fd), shape)
    new = ~np.isfinite(out_vals) & finite
    if not finite.all():  # infinite terms: damaged where the finite products could overflow on the way, or an
        # infinity met a 0 (see `_zero_times_inf`)
        limit = above if above is not None else dtype_max(scalar_type(out))
        with np.errstate(all="ignore"):
            big = finite_abs(fa).max(axis=-1)[..., :, None] * finite_abs(fb).max(axis=-2)[..., None, :] * k
        new |= ~np.isfinite(out_vals) & ~finite & (big + fit(finite_abs(fd), shape) > limit)
        inf_a, inf_b = np.isinf(fa).any(axis=-1)[..., :, None], np.isinf(fb).any(axis=-2)[..., None, :]
        zero_a, zero_b = (fa == 0).any(axis=-1)[..., :, None], (fb == 0).any(axis=-2)[..., None, :]
        new |= np.isnan(out_vals) & ((inf_a & zero_b) | (zero_a & inf_b))
    if above is not None:
        with np.errstate(invalid="ignore"):
            new |= np.isfinite(out_vals) & (np.abs(out_vals) > above)
    if left is not None and new.any():
        left(new, "overflow")
    eps = max(eps_of(a), eps_of(b), eps_of(d), type_eps(scalar_type(out)))
    near = near_limit(out_vals, scalar_type(out), mag, eps, above)
    if near is not None:
        new |= near
    if new.any():
        ovf = new if ovf is None else ovf | new
    set_shadows(out, mag, ovf, eps)
    return near


def reduction(inp: Any, out: Any, axis: int | None, keep_dims: bool, terms_grow: bool, scan: bool = False,
              above: float | None = None, left: Callable[[np.ndarray, str], None] | None = None) -> np.ndarray | None:
    """`tl.reduce` / `tl.associative_scan` of one tensor: the largest input error scale along the
    axis (grown by sqrt(n) for sums), and any overflow along it."""
    hi, ho = getattr(inp, "handle", None), getattr(out, "handle", None)
    if not (isinstance(hi, TensorHandle) and isinstance(ho, TensorHandle) and is_float(hi) and is_float(ho)):
        return None
    m, o = float_mag(hi), ovf_of(hi)
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
    new = None
    if not np.isfinite(out_vals).all():
        finite = along(np.isfinite(vals), np.all)
        new = ~np.isfinite(out_vals) & finite
        if terms_grow and not finite.all():  # infinite terms: damaged only where the finite ones could overflow
            could = _finite_overflow(vals, along, scalar_type(ho), above)
            if could is not None:
                new |= ~np.isfinite(out_vals) & could
    if above is not None:
        with np.errstate(invalid="ignore"):
            beyond = np.isfinite(out_vals) & (np.abs(out_vals) > above)
        new = beyond if new is None else new | beyond
    if left is not None and new is not None and new.any():
        left(new, "overflow")
    eps = max(eps_of(hi), type_eps(scalar_type(ho)) if terms_grow else 0.0)
    near = near_limit(out_vals, scalar_type(ho), mag, eps, above) if terms_grow else None
    if terms_grow and not scan:
        order = _order_overflow(vals, along, scalar_type(ho), above, out_vals)
        if order is not None:
            near = order if near is None else near | order
    if near is not None:
        new = near if new is None else new | near
    if new is not None and new.any():
        ovf = new if ovf is None else ovf | new
    set_shadows(ho, mag, ovf, eps)
    return near


def _finite_overflow(vals: np.ndarray, along: Callable, out_t: Any, above: float | None) -> np.ndarray | None:
    """Sums whose finite positive (or negative) terms add up past the dtype's largest value: in some
    order they overflow before or after meeting the infinite terms (`-inf + max + max`)."""
    sums = _signed_sums(vals, along, out_t, above)
    if sums is None:
        return None
    pos, neg, limit = sums
    hit = (pos > limit) | (neg > limit)
    return hit if hit.any() else None


def _signed_sums(vals: np.ndarray, along: Callable, out_t: Any,
                 above: float | None) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The sums of the finite positive terms and of the finite negative terms' magnitudes along the reduced
    axis, and the limit they are held against (the dtype's largest value, or `above`); None without one."""
    limit = above if above is not None else dtype_max(out_t)
    if not limit or vals.size == 0:
        return None
    with np.errstate(all="ignore"):
        fin = np.where(np.isfinite(vals), vals, 0.0)
        pos = np.asarray(along(np.where(fin > 0, fin, 0.0), np.sum))
        neg = np.asarray(along(np.where(fin < 0, -fin, 0.0), np.sum))
    return pos, neg, limit


def _order_overflow(vals: np.ndarray, along: Callable, out_t: Any, above: float | None,
                    total: np.ndarray) -> np.ndarray | None:
    """Finite sums whose positive (or negative) terms add up past the dtype's largest value: some order
    of the additions overflows and another does not (Triton does not fix the order of a reduction).
    A total past the limit overflows in every order: that is the kernel's, not the order's."""
    sums = _signed_sums(vals, along, out_t, above)
    if sums is None:
        return None
    pos, neg, limit = sums
    with np.errstate(all="ignore"):
        hit = ((pos > limit) | (neg > limit)) & (np.abs(pos - neg) <= limit) & np.isfinite(total)
    return hit if hit.any() else None
