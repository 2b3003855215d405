"""Dataflow: for every value the interpreter computes, the scale of the rounding error it can carry,
the precision its arithmetic ran in, and whether an overflow happened on the way.

Each floating `TensorHandle` the instrumented builder returns carries shadows:

- `mag` (per element): an error scale M, such that a correct computation's rounding error is about
  eps * M. It follows first-order error propagation: a loaded value's M is its own magnitude; a sum's
  is the larger of its operands' (or its own magnitude); a product's is M_a * |b| + M_b * |a|; a
  quotient's, a square root's, an exponential's follow their derivatives; a reduction's grows with
  the square root of its number of terms, and so do `tl.dot` and atomic adds. So a result that
  cancels (`a * b - c` near zero) keeps the scale of its operands, and an element fed by values near 1
  is judged near 1 whatever other elements of the tensor hold. It is the per-element scale of
  tdiff's tolerance.
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
  rounding (see tdiff.judge.compare).
- `fragile` (per element, any dtype): the value was decided by a comparison of computed floats that
  were within the arithmetic's tolerance of each other (`x == tl.max(x)` after an approximate `tanh`,
  `block_max > m`): another backend, rounding within its tolerance, may decide the other way, so an
  argmax index or a branch taken may legitimately differ there. Comparisons of values no arithmetic
  produced (loads, constants) are exact and never fragile. It follows every value computed from a
  fragile one, through memory too.

Handles without shadows (made outside the builder) count with their own magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from ...core.outcome import Precision, narrowing_casts
from ..backends.base import user_line_now
from .shims import bf16_to_f32

MAG = "_tdiff_mag"
OVF = "_tdiff_ovf"
EPS = "_tdiff_eps"
FRAGILE = "_tdiff_fragile"

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


def _finite_abs(v: np.ndarray) -> np.ndarray:
    a = np.abs(v)
    return np.where(np.isfinite(a), a, 0.0)


def own_mag(h: TensorHandle) -> np.ndarray:
    return _finite_abs(values(h))


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


def _fit(x: np.ndarray, shape: tuple) -> np.ndarray:
    """`x` broadcast to `shape`, or its maximum everywhere when it does not broadcast."""
    if x.shape == shape:
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
        reach = a + NEAR_ROUNDINGS * max(eps, type_eps(out_t)) * (np.maximum(_fit(mag, a.shape), a)
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
        finite &= np.isfinite(_fit(v, shape))
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
    vals = [_fit(values(h), shape) for h in floats]
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
    own = _finite_abs(out_vals)
    m = [_fit(mag_of(h), shape) for h in floats]  # type: ignore[arg-type]
    v = [_fit(_finite_abs(values(h)), shape) for h in floats]
    with np.errstate(all="ignore"):
        if rule == "mul" and len(floats) == 2:
            prop = m[0] * v[1] + m[1] * v[0]
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
        v = _fit(values(h), out_vals.shape)
        small &= (v != 0) & np.isfinite(v)
        if cast:  # a cast that kept the value (a subnormal widened) lost nothing
            small &= v != out_vals
    return small if small.any() else None


def elementwise(out: TensorHandle, ins: Sequence[Any], name: str = "", above: float | None = None) -> bool:
    """An elementwise result: its error scale by first-order propagation, its precision, and where
    an overflow (or an underflow of a product) damaged it. True where a result came to the limit
    of its dtype's range (see `near_limit`)."""
    shape = np.shape(out.data)
    floats = [h for h in ins if isinstance(h, TensorHandle) and is_float(h)]
    out_vals = values(out)
    mag = _propagate(_rule(name), floats, out_vals, shape)
    ovf = None
    for h in floats:
        o = ovf_of(h)
        if o is not None:
            ovf = _fit(o, shape) if ovf is None else ovf | _fit(o, shape)
    new = _new_overflow(out_vals, [values(h) for h in floats], above)
    if new is not None:
        ovf = new if ovf is None else ovf | new
    zero_inf = _zero_times_inf(out_vals, floats)
    if zero_inf is not None:
        ovf = zero_inf if ovf is None else ovf | zero_inf
    out_t = scalar_type(out)
    under = _underflow(_rule(name), out_vals, floats, out_t, cast=name in FLOAT_CASTS)
    if under is not None:
        ovf = under if ovf is None else ovf | under
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
    return near is not None


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
    o = ovf_of(h) if kind == "ovf" else fragile_of(h)
    return TensorHandle(o if o is not None else np.zeros(np.shape(h.data), bool), tl.int1)


# ------------------------------------------------------------------ fragile: decided by a close comparison

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
                acc |= _fit(f, shape)
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
    va, vb = _fit(values(a), shape), _fit(values(b), shape)
    ma, mb = _fit(mag_of(a), shape), _fit(mag_of(b), shape)  # type: ignore[arg-type]
    with np.errstate(all="ignore"):
        close = np.isfinite(va) & np.isfinite(vb) & (va != vb) & (np.abs(va - vb) <= 2 * allowed(
            np.abs(va), np.abs(vb), np.maximum(ma, mb)))
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
    v, m = _fit(values(operand), shape), _fit(mag_of(operand), shape)  # type: ignore[arg-type]
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
    vals, mag = values(hi), mag_of(hi)
    if vals.ndim == 0:
        return
    ax = -1 if axis is None else axis % vals.ndim
    if axis is None:
        vals, mag = vals.reshape(-1), mag.reshape(-1)  # type: ignore[union-attr]
    if vals.shape[ax] < 2:
        return
    with np.errstate(all="ignore"):
        s = np.sort(vals if largest else -vals, axis=ax)
        top, second = np.take(s, -1, axis=ax), np.take(s, -2, axis=ax)
        m = np.max(mag, axis=ax)  # type: ignore[arg-type]
        near = np.isfinite(top) & np.isfinite(second) & (top - second <= 2 * allowed(np.abs(top), np.abs(second), m))
    if not near.any():
        return
    shape = np.shape(ho.data)
    if keep_dims and axis is not None:
        near = np.expand_dims(near, ax)
    near = near.reshape(shape) if near.size == int(np.prod(shape, dtype=int)) else np.full(shape, bool(near.any()))
    prev = fragile_of(ho)
    set_fragile(ho, near if prev is None else prev | near)


def layout_fragile(fn: Callable, args: tuple, kw: dict, out: Any) -> None:
    """Move the operands' fragile shadows as a layout op moves their values (any dtype)."""
    srcs = [a for a in args if isinstance(a, TensorHandle) and fragile_of(a) is not None]
    if not srcs:
        return
    ids = {id(a) for a in srcs}
    got = fn(*[_shadow_handle(a, "fragile") if id(a) in ids else a for a in args], **kw)
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
        r = np.logical_or.accumulate(f, axis=ax) if ax is not None else np.logical_or.accumulate(f.reshape(-1))
    else:
        r = f.any(axis=ax, keepdims=keep_dims) if ax is not None else f.any()
    r = np.asarray(r)
    set_fragile(ho, r.reshape(shape) if r.size == int(np.prod(shape, dtype=int)) else np.full(shape, bool(r.any())))


def layout(fn: Callable, args: tuple, kw: dict, out: Any) -> None:
    """A result that only moves values: apply the same move to the operands' shadows."""
    layout_fragile(fn, args, kw, out)
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


def dot(a: TensorHandle, b: TensorHandle, d: TensorHandle, out: TensorHandle, above: float | None = None) -> bool:
    """`tl.dot`: each output sums K products a_ik * b_kj, each with error scale M_a |b| + M_b |a|; the
    largest, grown by sqrt(K), is added in quadrature to the accumulator's (so a K loop of dots grows
    as one long dot)."""
    ma, mb, md = mag_of(a), mag_of(b), mag_of(d)
    shape = np.shape(out.data)
    fa, fb = fragile_of(a), fragile_of(b)
    if fa is not None or fb is not None or fragile_of(d) is not None:  # each output on a row of a, a column of b
        f = np.zeros(shape, bool) | _fit(fragile_of(d) if fragile_of(d) is not None else np.zeros(shape, bool), shape)
        if fa is not None and fa.ndim >= 2:
            f |= fa.any(axis=-1)[..., :, None]
        if fb is not None and fb.ndim >= 2:
            f |= fb.any(axis=-2)[..., None, :]
        set_fragile(out, f)
    if ma is None or mb is None or ma.ndim < 2:
        return elementwise(out, [a, b, d], "create_dot", above)
    va, vb = _finite_abs(values(a)), _finite_abs(values(b))
    k = ma.shape[-1]
    with np.errstate(all="ignore"):
        prod = (ma.max(axis=-1)[..., :, None] * vb.max(axis=-2)[..., None, :]
                + va.max(axis=-1)[..., :, None] * mb.max(axis=-2)[..., None, :]) * math.sqrt(k)
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
    fa, fb, fd = values(a), values(b), values(d)
    finite = np.isfinite(fa).all(axis=-1)[..., :, None] & np.isfinite(fb).all(axis=-2)[..., None, :] \
        & _fit(np.isfinite(fd), shape)
    new = ~np.isfinite(out_vals) & finite
    if not finite.all():  # infinite terms: damaged where the finite products could overflow on the way, or an
        # infinity met a 0 (see `_zero_times_inf`)
        limit = above if above is not None else dtype_max(scalar_type(out))
        with np.errstate(all="ignore"):
            big = _finite_abs(fa).max(axis=-1)[..., :, None] * _finite_abs(fb).max(axis=-2)[..., None, :] * k
        new |= ~np.isfinite(out_vals) & ~finite & (big + _fit(_finite_abs(fd), shape) > limit)
        inf_a, inf_b = np.isinf(fa).any(axis=-1)[..., :, None], np.isinf(fb).any(axis=-2)[..., None, :]
        zero_a, zero_b = (fa == 0).any(axis=-1)[..., :, None], (fb == 0).any(axis=-2)[..., None, :]
        new |= np.isnan(out_vals) & ((inf_a & zero_b) | (zero_a & inf_b))
    if above is not None:
        with np.errstate(invalid="ignore"):
            new |= np.isfinite(out_vals) & (np.abs(out_vals) > above)
    eps = max(eps_of(a), eps_of(b), eps_of(d), type_eps(scalar_type(out)))
    near = near_limit(out_vals, scalar_type(out), mag, eps, above)
    if near is not None:
        new |= near
    if new.any():
        ovf = new if ovf is None else ovf | new
    set_shadows(out, mag, ovf, eps)
    return near is not None


def reduction(inp: Any, out: Any, axis: int | None, keep_dims: bool, terms_grow: bool, scan: bool = False,
              above: float | None = None) -> bool:
    """`tl.reduce` / `tl.associative_scan` of one tensor: the largest input error scale along the
    axis (grown by sqrt(n) for sums), and any overflow along it."""
    hi, ho = getattr(inp, "handle", None), getattr(out, "handle", None)
    if not (isinstance(hi, TensorHandle) and isinstance(ho, TensorHandle) and is_float(hi) and is_float(ho)):
        return False
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
    return near is not None


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
    limit = dtype_max(dtype)
    return top / math.sqrt(limit) if limit else 0.0


def dtype_max(t: Any) -> float:
    bits = getattr(t, "primitive_bitwidth", 32)
    if t == tl.bfloat16:
        return 3.3895313892515355e38
    return {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}.get(bits, 0.0)
