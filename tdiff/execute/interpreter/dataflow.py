"""Dataflow: for every value the interpreter computes, the scale of the rounding error it can carry,
the precision its arithmetic ran in, and whether an overflow happened on the way.

Each floating `TensorHandle` the instrumented builder returns carries shadows:

- `mag` (per element): an error scale M, such that a correct computation's rounding error is about
  eps * M. It follows first-order error propagation: a loaded value's M is its own magnitude; a sum's
  is the larger of its operands' (or its own magnitude); a product's is M_a * |b| + M_b * |a| + M_a * M_b * eps
  (the second-order term: the square of a rounding-level value, log(1 + 3e-8) squared, is not exact); a
  quotient's, a square root's, an exponential's follow their derivatives; a reduction's grows with
  the square root of its number of terms, and so do `tl.dot`'s (both in `reductions`) and atomic
  adds'. So a result that cancels (`a * b - c` near zero) keeps the scale of its operands, and an
  element fed by values near 1 is judged near 1 whatever other elements of the tensor hold. It is the
  per-element scale of tdiff's tolerance.
- `ovf` (per element, "damaged"): an operation on finite operands gave inf or NaN (an overflow, and
  everything computed from the infinity it made), or a product, quotient, exponential or narrowing
  cast of nonzero finite values underflowed: the error scale no longer bounds the result's error,
  which then depends on an order of operations Triton does not fix. So does a finite result within 16
  roundings of its dtype's largest value (a sum of squares at 65480 in fp16): another order of the
  same operations overflows; a sum or `tl.dot` with infinite terms whose finite terms could overflow in
  some order (`-inf + max + max`: -inf or NaN); and a NaN from 0 * inf (the 0 may be a tiny number
  rounded away). In a float64 run on upcast inputs, a finite value beyond the case's own dtype's range
  counts too. Arithmetic on infinities that no overflow made (an input's -inf, a `-inf` fill) is not
  damage: `inf - inf` is NaN on every backend, in every order, so a NaN from it is the kernel's result,
  not the range's (a max-subtracting logsumexp on a row of -inf inputs).
- `eps` (per handle): the unit roundoff of the narrowest float type the arithmetic upstream ran in
  (loads are exact; fp16 arithmetic stored into an fp32 output carries fp16 rounding). A cast to a
  float type with fewer significand bits than its operand makes it a `Precision` that names the cast
  (source line and dtype), so a comparison can tell a narrowing cast from the arithmetic's own
  rounding (see tdiff.judge.edges).
- `fragile` (per element, any dtype): decided by a close comparison of computed values (see `fragile`).

Handles without shadows (made outside the builder) count with their own magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from ...core.outcome import Precision, narrowing_casts
from ..backends.base import user_line_now
from .shims import bf16_to_f32

MAG = "_tdiff_mag"
OVF = "_tdiff_ovf"
EPS = "_tdiff_eps"

#: builder methods that only move values: the shadows move the same way
LAYOUT = ("create_reshape", "create_trans", "create_expand_dims", "create_broadcast", "create_splat",
          "create_unsplat", "create_cat", "create_join", "create_split", "create_gather", "create_permute")
#: builder methods whose shadows another layer sets (memory) or that need their own rule
SPECIAL = ("create_masked_load", "create_load", "create_tensor_pointer_load", "create_dot", "create_atomic_rmw",
           "create_atomic_cas", "create_masked_store", "create_store", "create_tensor_pointer_store")
#: casts: they round only when they narrow
CASTS = ("create_fp_to_fp", "create_fp_ext", "create_fp_trunc", "create_si_to_fp", "create_ui_to_fp",
         "create_bitcast", "create_int_cast")
#: casts from a float to a float (rounding to the target's significand)
FLOAT_CASTS = ("create_fp_to_fp", "create_fp_trunc", "create_fp_ext")
#: how many narrowing casts a precision shadow remembers
MAX_CASTS = 4

_EPS = {16: 2.0**-10, 32: 2.0**-23, 64: 2.0**-52}


def scalar_type(h: Any) -> Any:
    dt = getattr(h, "dtype", None)
    return getattr(dt, "scalar", dt)


def is_float(h: Any) -> bool:
    t = scalar_type(h)
    return isinstance(t, tl.dtype) and t.is_floating() and t.primitive_bitwidth >= 16


def type_eps(t: Any) -> float:
    if t == tl.bfloat16:
        return 2.0**-7
    return _EPS.get(getattr(t, "primitive_bitwidth", 32), 0.0)


def values(h: TensorHandle) -> np.ndarray:
    """A floating handle's values as a float64 array (bf16 decoded from its bits)."""
    data = np.asarray(h.data)
    if scalar_type(h) == tl.bfloat16 and data.dtype == np.uint16:
        return bf16_to_f32(data).astype(np.float64)
    return data.astype(np.float64, copy=False)


def finite_abs(v: np.ndarray) -> np.ndarray:
    a = np.abs(v)
    return np.where(np.isfinite(a), a, 0.0)


def own_mag(h: TensorHandle) -> np.ndarray:
    return finite_abs(values(h))


def float_mag(h: TensorHandle) -> np.ndarray:
    """`mag_of` a handle its caller knows is floating (there it is never None)."""
    m = mag_of(h)
    if m is None:
        raise TypeError(f"{h!r} is not a floating handle: it has no error scale")
    return m


def mag_of(h: Any) -> np.ndarray | None:
    """The error-scale shadow of a handle (None for non-floating handles)."""
    if not isinstance(h, TensorHandle) or not is_float(h):
        return None
    m = getattr(h, MAG, None)
    if m is None or np.shape(m) != np.shape(h.data):
        m = own_mag(h)
    return m


def ovf_of(h: Any) -> np.ndarray | None:
    """The overflow shadow of a handle (None: no overflow upstream)."""
    return getattr(h, OVF, None) if isinstance(h, TensorHandle) else None


def eps_of(h: Any) -> float:
    """The precision shadow of a handle: 0 for a value no arithmetic produced."""
    return getattr(h, EPS, 0.0) if isinstance(h, TensorHandle) else 0.0


def set_shadows(h: TensorHandle, mag: np.ndarray | None, ovf: np.ndarray | None, eps: float | None = None) -> None:
    if mag is not None:
        object.__setattr__(h, MAG, np.where(np.isfinite(mag), mag, np.finfo(np.float64).max))
    if ovf is not None and np.any(ovf):
        object.__setattr__(h, OVF, ovf)
    if eps:
        object.__setattr__(h, EPS, eps)


@overload
def fit(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray: ...
@overload
def fit(x: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None: ...
def fit(x: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """`x` broadcast to `shape`, or its maximum everywhere when it does not broadcast (None stays None)."""
    if x is None or x.shape == shape:
        return x
    try:
        return np.broadcast_to(x, shape)
    except ValueError:
        return np.full(shape, x.max() if x.size else 0, dtype=x.dtype)


#: how many roundings from the largest finite value count as "at the limit"
NEAR_ROUNDINGS = 16


def near_limit(out_vals: np.ndarray, out_t: Any, mag: np.ndarray | None, eps: float,
               above: float | None) -> np.ndarray | None:
    """Finite results within NEAR_ROUNDINGS roundings (of the arithmetic's precision, on the error
    scale) of the largest finite value: whether they overflow depends on rounding and order."""
    limit = above if above is not None else dtype_max(out_t)
    if not limit:
        return None
    a = np.abs(out_vals)
    with np.errstate(invalid="ignore", over="ignore"):
        reach = a + NEAR_ROUNDINGS * max(eps, type_eps(out_t)) * (np.maximum(fit(mag, a.shape), a)
                                                                  if mag is not None else a)
        near = np.isfinite(a) & (reach >= limit)
    return near if near.any() else None


def _new_overflow(out_vals: np.ndarray, ins: Sequence[np.ndarray], above: float | None) -> np.ndarray | None:
    """Where a non-finite result (inf, or NaN: 0 / 0) came from finite operands; in a float64 run,
    also where a finite result lies beyond the case's dtype (`above`). A NaN from infinite operands
    (inf - inf) is not new damage: an infinity an overflow made carries its own (`ovf`), and one that
    came in (an input, a `-inf` fill) gives the same NaN on every backend."""
    beyond = None
    if above is not None:
        with np.errstate(invalid="ignore"):
            beyond = np.isfinite(out_vals) & (np.abs(out_vals) > above)
        if not beyond.any():
            beyond = None
    bad = ~np.isfinite(out_vals)
    if not bad.any() or not ins:  # (a constant: `float("inf")` is no overflow)
        return beyond
    shape = out_vals.shape
    finite = np.ones(shape, bool)
    for v in ins:
        finite &= np.isfinite(fit(v, shape))
    new = bad & finite
    return new if beyond is None else new | beyond


def _zero_times_inf(out_vals: np.ndarray, floats: list[TensorHandle]) -> np.ndarray | None:
    """Where an infinity met a 0 (0 * inf): a NaN whose exact value may be an infinity of either sign,
    since the 0 may be a tiny number rounded away, in the kernel (1 + tanh(-12) in float32) or before it
    (a launch that rounded softmax probabilities to float16). Damage, as an overflow is; unlike inf - inf,
    which is NaN however exactly the infinities came."""
    nan = np.isnan(out_vals)
    if not nan.any() or len(floats) < 2:
        return None
    shape = out_vals.shape
    vals = [fit(values(h), shape) for h in floats]
    zero = np.zeros(shape, bool)
    inf = np.zeros(shape, bool)
    for v in vals:
        zero |= v == 0
        inf |= np.isinf(v)
        nan &= ~np.isnan(v)
    hit = nan & zero & inf
    return hit if hit.any() else None


def _rule(name: str) -> str:
    op = name[len("create_"):] if name.startswith("create_") else name
    if op in ("fmul",):
        return "mul"
    if op in ("fdiv", "precise_divf"):
        return "div"
    if op == "fma":
        return "fma"
    if op in ("exp", "exp2"):
        return op
    if op in ("log", "log2"):
        return "log"
    if op in ("sqrt", "precise_sqrt"):
        return "sqrt"
    if op == "rsqrt":
        return "rsqrt"
    return "max"  # sums, differences, min/max, select, clamp, abs, trigonometric, casts, constants


def _propagate(rule: str, floats: list[TensorHandle], out_vals: np.ndarray, shape: tuple) -> np.ndarray:
    own = finite_abs(out_vals)
    m = [fit(float_mag(h), shape) for h in floats]
    v = [fit(finite_abs(values(h)), shape) for h in floats]
    with np.errstate(all="ignore"):
        if rule == "mul" and len(floats) == 2:
            # (and the product of the two errors, m0 * m1 * eps: where both operands are rounding-level values,
            # a log of 1 + 3e-8 squared, the first-order terms are 0 and the product's error is not)
            second = m[0] * m[1] * max(eps_of(floats[0]), eps_of(floats[1]))
            prop = m[0] * v[1] + m[1] * v[0] + second
        elif rule == "div" and len(floats) == 2:
            den = np.where(v[1] > 0, v[1], np.inf)
            prop = m[0] / den + m[1] * v[0] / (den * den)
        elif rule == "fma" and len(floats) == 3:
            prop = np.maximum(m[0] * v[1] + m[1] * v[0], m[2])
        elif rule in ("exp", "exp2") and floats:
            prop = m[0] * own * (1.0 if rule == "exp" else math.log(2))
        elif rule == "log" and floats:
            prop = m[0] / np.where(v[0] > 0, v[0], np.inf)
        elif rule == "sqrt" and floats:
            prop = m[0] / np.where(own > 0, 2 * own, np.inf)
        elif rule == "rsqrt" and floats:
            prop = m[0] * own / np.where(v[0] > 0, 2 * v[0], np.inf)
        else:
            prop = np.maximum.reduce(m) if m else own
    prop = np.where(np.isfinite(prop), prop, 0.0)
    return np.maximum(prop, own)


_TINY = {16: 6.103515625e-05, 32: 1.1754943508222875e-38, 64: 2.2250738585072014e-308}


def _underflow(rule: str, out_vals: np.ndarray, floats: list[TensorHandle], out_t: Any,
               cast: bool = False) -> np.ndarray | None:
    """Where a product, quotient or exponential of nonzero finite operands, or a `cast` of a nonzero
    finite value to a narrower type, underflowed (below the result type's smallest normal): its error
    is no longer relative to it (and a 0 it became may meet an infinity: 0 * inf)."""
    if rule not in ("mul", "div", "fma", "exp", "exp2") and not cast:
        return None
    tiny = _TINY.get(getattr(out_t, "primitive_bitwidth", 32), 0.0) if out_t != tl.bfloat16 else _TINY[32]
    with np.errstate(invalid="ignore"):
        small = np.isfinite(out_vals) & (np.abs(out_vals) < tiny)
    if not small.any():
        return None
    operands = floats[:2] if rule in ("mul", "div", "fma") else floats[:1]
    for h in operands:  # (an infinite operand gives an exact 0: exp(-inf), x / inf)
        v = fit(values(h), out_vals.shape)
        small &= (v != 0) & np.isfinite(v)
        if cast:  # a cast that kept the value (a subnormal widened) lost nothing
            small &= v != out_vals
    return small if small.any() else None


def elementwise(out: TensorHandle, ins: Sequence[Any], name: str = "",
                above: float | None = None, left: Callable[[np.ndarray, str], None] | None = None) -> np.ndarray | None:
    """An elementwise result: its error scale by first-order propagation, its precision, and where
    an overflow (or an underflow of a product) damaged it. Returns the lanes where a result came to the
    limit of its dtype's range (see `near_limit`), None where none did; `left`, where given, receives the lanes
    where a value left its dtype's range here: "overflow" (finite operands gave a non-finite result) or
    "underflow" (a product, quotient, exponential or narrowing cast of nonzero operands fell below the smallest
    normal)."""
    shape = np.shape(out.data)
    floats = [h for h in ins if isinstance(h, TensorHandle) and is_float(h)]
    out_vals = values(out)
    mag = _propagate(_rule(name), floats, out_vals, shape)
    ovf = None
    for h in floats:
        o = ovf_of(h)
        if o is not None:
            ovf = fit(o, shape) if ovf is None else ovf | fit(o, shape)
    new = _new_overflow(out_vals, [values(h) for h in floats], above)
    if new is not None:
        ovf = new if ovf is None else ovf | new
        if left is not None:
            left(new, "overflow")
    zero_inf = _zero_times_inf(out_vals, floats)
    if zero_inf is not None:
        ovf = zero_inf if ovf is None else ovf | zero_inf
    out_t = scalar_type(out)
    under = _underflow(_rule(name), out_vals, floats, out_t, cast=name in FLOAT_CASTS)
    if under is not None:
        ovf = under if ovf is None else ovf | under
        if left is not None:
            left(under, "underflow")
    eps = max([eps_of(h) for h in floats], default=0.0)
    if name in CASTS:  # a cast rounds only when it narrows
        src = max((type_eps(scalar_type(h)) for h in floats), default=0.0)
        if type_eps(out_t) > src:
            eps = max(eps, type_eps(out_t))
        if name in FLOAT_CASTS and floats and significand_eps(out_t) > significand_eps(scalar_type(floats[0])):
            eps = narrowed(eps, out_t)
    elif floats:  # arithmetic rounds to its result's type
        eps = max(eps, type_eps(out_t))
    near = near_limit(out_vals, out_t, mag, eps, above) if floats else None
    if near is not None:
        ovf = near if ovf is None else ovf | near
    set_shadows(out, mag, ovf, eps)
    return near


def significand_eps(t: Any) -> float:
    """2 ** -(significand bits) of a float type (fp8 included); 0 for other types."""
    width = getattr(t, "fp_mantissa_width", None) if isinstance(t, tl.dtype) and t.is_floating() else None
    return 2.0**-width if width else 0.0


def narrowed(eps: float, t: Any) -> Precision:
    """The precision shadow after a cast to the float type `t` that drops significand bits: at least
    `t`'s roundoff, naming this cast (the kernel line running now) beside the casts `eps` names."""
    site = (user_line_now(), str(dtype_name(t)))
    casts = narrowing_casts(eps)
    if site not in casts:
        casts = (casts + (site,))[:MAX_CASTS]
    return Precision(max(float(eps), type_eps(t) or significand_eps(t)), casts)


def dtype_name(t: Any) -> str:
    """tdiff's name of a Triton float type ("bfloat16", "float16", "float8_e4m3fn", ...)."""
    names = {tl.float16: "float16", tl.bfloat16: "bfloat16", tl.float32: "float32", tl.float64: "float64"}
    for attr, name in (("float8e4nv", "float8_e4m3fn"), ("float8e5", "float8_e5m2"), ("float8e4b15", "float8e4b15"),
                       ("float8e4b8", "float8_e4m3fnuz"), ("float8e5b16", "float8_e5m2fnuz")):
        if hasattr(tl, attr):
            names.setdefault(getattr(tl, attr), name)
    return names.get(t, str(t))


def _shadow_handle(h: Any, kind: str) -> Any:
    if not isinstance(h, TensorHandle):
        return h
    if kind == "mag":
        m = mag_of(h)
        return TensorHandle(m if m is not None else np.zeros(np.shape(h.data)), tl.float64)
    o = ovf_of(h)
    return TensorHandle(o if o is not None else np.zeros(np.shape(h.data), bool), tl.int1)


def layout(fn: Callable, args: tuple, kw: dict, out: Any) -> None:
    """A result that only moves values: apply the same move to the operands' shadows (the fragile
    shadow: `fragile.layout_fragile`)."""
    outs = out if isinstance(out, tuple) else (out,)
    if not any(isinstance(o, TensorHandle) and is_float(o) for o in outs):
        return
    srcs = {id(a) for a in args if isinstance(a, TensorHandle) and is_float(a)}
    eps = max((eps_of(a) for a in args if id(a) in srcs), default=0.0)
    mags = fn(*[_shadow_handle(a, "mag") if id(a) in srcs else a for a in args], **kw)
    mags = mags if isinstance(mags, tuple) else (mags,)
    ovfs: tuple = (None,) * len(outs)
    if any(ovf_of(a) is not None for a in args if id(a) in srcs):
        got = fn(*[_shadow_handle(a, "ovf") if id(a) in srcs else a for a in args], **kw)
        ovfs = tuple(np.asarray(g.data, bool) for g in (got if isinstance(got, tuple) else (got,)))
    for o, m, v in zip(outs, mags, ovfs):
        if isinstance(o, TensorHandle) and is_float(o):
            set_shadows(o, np.asarray(m.data, np.float64), v, eps)


def edge_ratio(vals: np.ndarray, dtype: Any) -> float:
    """How far loaded values reach towards their dtype's limits: the largest |value| over the square
    root of the dtype's max (>= 1 where squaring or summing such values can overflow); inf for
    infinities."""
    return float(edge_ratios(np.asarray(vals).reshape(1, -1), dtype)[0])


def edge_ratios(rows: np.ndarray, dtype: Any, live: np.ndarray | None = None) -> np.ndarray:
    """`edge_ratio` of each row's values (those where `live`), 0 for a row with none."""
    keep = ~np.isnan(rows) if live is None else live & ~np.isnan(rows)
    a = np.where(keep, np.abs(rows), 0.0)
    top = a.max(axis=1) if a.shape[1] else np.zeros(a.shape[0])
    limit = dtype_max(dtype)
    with np.errstate(invalid="ignore"):
        ratio = top / math.sqrt(limit) if limit else np.zeros_like(top)
    return np.where(np.isinf(top), math.inf, ratio)


def dtype_max(t: Any) -> float:
    bits = getattr(t, "primitive_bitwidth", 32)
    if t == tl.bfloat16:
        return 3.3895313892515355e38
    return {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}.get(bits, 0.0)
