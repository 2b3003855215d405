"""Shims: what tdiff's interpreter does that stock `TRITON_INTERPRET=1` does not, so that kernels the
compiler accepts also run interpreted, with the compiler's types.

Each shim is named, counted per run (`Trace.shims`) and reported in the summary, so a user knows
where stock `TRITON_INTERPRET=1` would fail or type differently:

- `float-args`: a float kernel argument becomes an fp32 scalar tensor, as the compiler types it
  (stock Triton passes a Python float: `eps.to(tl.float32)` raises `AttributeError`, and
  `x_fp16 * eps` stays fp16 where the compiled kernel computes in fp32).
- `bf16-constants`: Triton 3.4 to 3.8's interpreter has no `get_bf16`, so bf16 arithmetic with a
  Python float constant raises; the constant is built as Triton rounds it (to nearest even).
- `bf16-arith`: the interpreter keeps bf16 values as their 16 bits in uint16 arrays and applies
  numpy's arithmetic and comparisons to the bits (a product of two bf16 values is garbage,
  `x > 0` is false for every negative x), widens bf16 subnormals to fp32 wrongly and truncates
  fp32 -> bf16; tdiff computes on the values in fp32 and rounds the result to bf16 (nearest
  even), as the GPU's bf16 instructions and conversions do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from . import undefined

FLOAT_ARGS = "float-args"
BF16_CONSTANTS = "bf16-constants"
BF16_ARITH = "bf16-arith"

#: each shim can be switched off (tests show what stock TRITON_INTERPRET=1 does without it)
ENABLED = {FLOAT_ARGS: True, BF16_CONSTANTS: True, BF16_ARITH: True}

DESCRIPTIONS = {
    FLOAT_ARGS: "float kernel arguments typed as fp32 scalars, as the compiler types them (stock "
                "TRITON_INTERPRET=1 passes Python floats: `.to()` fails and fp16/bf16 products stay narrow)",
    BF16_CONSTANTS: "bf16 constants built with round-to-nearest-even (this Triton's interpreter has no get_bf16)",
    BF16_ARITH: "bf16 arithmetic and comparisons computed on the values (stock TRITON_INTERPRET=1 computes on "
                "their bits)",
}


def float_arg(value: float, used: Counter) -> Any:
    """A float kernel argument as the compiler sees it: an fp32 scalar tensor."""
    used[FLOAT_ARGS] += 1
    return tl.tensor(TensorHandle(np.array([value], dtype=np.float32), tl.float32), tl.float32)


def convert_args(args: dict[str, Any], constexprs: set[str], implicit: Callable[[Any], Any],
                 used: Counter) -> dict[str, Any]:
    """Kernel arguments for the interpreter: Triton's own conversion, floats typed as fp32."""
    out = {}
    for name, value in args.items():
        if name in constexprs:
            out[name] = value
        elif isinstance(value, float) and ENABLED[FLOAT_ARGS]:
            out[name] = float_arg(value, used)
        else:
            out[name] = implicit(value)
    return out


def bf16_bits(value: float) -> np.ndarray:
    """`value` rounded to bfloat16 (nearest even), as its 16 bits."""
    bits = np.array([value], dtype=np.float32).view(np.uint32)
    if np.isnan(np.float32(value)):
        return np.array([0x7FC0], dtype=np.uint16)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return rounded.astype(np.uint16)


def get_bf16(used: Counter) -> Callable[[float], TensorHandle] | None:
    """A `get_bf16` for builders that lack one (Triton < 3.9); None where the builder has it."""
    from triton.runtime.interpreter import InterpreterBuilder

    if hasattr(InterpreterBuilder, "get_bf16") or not ENABLED[BF16_CONSTANTS]:
        return None

    def build(value: float) -> TensorHandle:
        used[BF16_CONSTANTS] += 1
        return TensorHandle(bf16_bits(value), tl.bfloat16)

    return build


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) as float32 values."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest even), as uint16 bits; a NaN stays a quiet NaN with
    its sign and the top of its payload (as a conversion in hardware keeps them: a masked lane's
    poison stays poison, `tdiff.execute.interpreter.undefined`)."""
    v = np.asarray(values, dtype=np.float32)
    bits = v.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return np.where(np.isnan(v), nan, rounded).astype(np.uint16)


def _is_bf16(h: Any) -> bool:
    dt = getattr(h, "dtype", None)
    return dt is not None and getattr(dt, "scalar", dt) == tl.bfloat16


def bf16_arith(orig: dict[str, Callable], used: Counter) -> dict[str, Callable]:
    """Builder methods (by name) that compute bf16 operands on their values; `orig` holds the
    builder's own bound methods."""
    if not ENABLED[BF16_ARITH]:
        return {}
    binary, ternary, unary = orig["binary_op"], orig["ternary_op"], orig["unary_op"]

    def _result(out: np.ndarray, like: Any) -> TensorHandle:
        if out.dtype == np.bool_:  # a comparison: the builder keeps the operand's type on the handle
            return TensorHandle(out, like.dtype.scalar)
        return TensorHandle(f32_to_bf16(out), tl.bfloat16)

    def binary_op(lhs: Any, rhs: Any, op: Callable) -> TensorHandle:
        if not (_is_bf16(lhs) and _is_bf16(rhs)):
            return binary(lhs, rhs, op)
        used[BF16_ARITH] += 1
        with np.errstate(all="ignore"):
            return _result(op(bf16_to_f32(lhs.data), bf16_to_f32(rhs.data)), lhs)

    def ternary_op(a: Any, b: Any, c: Any, op: Callable) -> TensorHandle:
        if op is np.where or not all(_is_bf16(h) for h in (a, b, c)):
            return ternary(a, b, c, op)
        used[BF16_ARITH] += 1
        with np.errstate(all="ignore"):
            return _result(op(*(bf16_to_f32(h.data) for h in (a, b, c))), c)

    def unary_op(arg: Any, op: Callable) -> TensorHandle:
        if not _is_bf16(arg):
            return unary(arg, op)
        used[BF16_ARITH] += 1
        with np.errstate(all="ignore"):
            return _result(op(bf16_to_f32(arg.data)), arg)

    def unary_method(name: str, op: Callable) -> Callable:
        fallback = orig[name]

        def method(arg: Any) -> TensorHandle:
            if not _is_bf16(arg):
                return fallback(arg)
            used[BF16_ARITH] += 1
            with np.errstate(all="ignore"):
                return _result(op(bf16_to_f32(arg.data)), arg)

        return method

    fma = orig["create_fma"]

    def create_fma(x: Any, y: Any, z: Any) -> TensorHandle:
        if not all(_is_bf16(h) for h in (x, y, z)):
            return fma(x, y, z)
        used[BF16_ARITH] += 1
        a, b, c = (bf16_to_f32(h.data).astype(np.float64) for h in (x, y, z))
        with np.errstate(all="ignore"):
            return _result((a * b + c).astype(np.float32), z)

    cast = orig["cast_impl"]

    def cast_impl(src: Any, dst_type: Any) -> TensorHandle:
        # Triton 3.6's interpreter converts bf16 subnormals wrongly when widening and truncates when
        # narrowing; the compiler widens exactly and rounds fp32 -> bf16 to nearest even
        s_t, d_t = getattr(src.dtype, "scalar", src.dtype), getattr(dst_type, "scalar", dst_type)
        if s_t == tl.bfloat16 and d_t == tl.float32:
            used[BF16_ARITH] += 1
            return TensorHandle(bf16_to_f32(src.data), tl.float32)
        if s_t == tl.float32 and d_t == tl.bfloat16:
            used[BF16_ARITH] += 1
            return TensorHandle(f32_to_bf16(np.asarray(src.data, np.float32)), tl.bfloat16)
        return cast(src, dst_type)

    from triton.runtime.interpreter import np_erf_fp32

    return {
        "cast_impl": cast_impl,
        "binary_op": binary_op, "ternary_op": ternary_op, "unary_op": unary_op, "create_fma": create_fma,
        "create_rsqrt": unary_method("create_rsqrt", lambda v: 1 / np.sqrt(v)),
        "create_erf": unary_method("create_erf", np_erf_fp32),
    }


# ------------------------------------------------------------------ libdevice

LIBDEVICE = "libdevice"
BF16_ATOMICS = "bf16-atomics"
CONSTEXPR_ARGS = "constexpr-args"
BOOL_OPS = "tensor-and-or"
ENABLED.update({LIBDEVICE: True, BF16_ATOMICS: True, CONSTEXPR_ARGS: True, BOOL_OPS: True})
DESCRIPTIONS.update({
    LIBDEVICE: "libdevice functions computed with numpy in float64 (stock TRITON_INTERPRET=1 calls "
               "triton.language.extra.libdevice's empty stubs, which return None)",
    BF16_ATOMICS: "bf16 atomics done on the values (stock TRITON_INTERPRET=1: 'Unsupported data type')",
    CONSTEXPR_ARGS: "constexpr arguments of device functions wrapped in tl.constexpr, as the compiler does "
                    "(stock TRITON_INTERPRET=1 passes a bare tl.dtype: `.value` fails)",
    BOOL_OPS: "`and` / `or` between tensors as elementwise logical operations, as the compiler does (stock "
              "TRITON_INTERPRET=1 applies Python's truth value to whole tensors)",
})


def _erf_like(f: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    vec = np.vectorize(lambda v: f(v) if np.isfinite(v) else f(v) if not np.isnan(v) else np.nan,
                       otypes=[np.float64])
    return lambda x: vec(x) if np.size(x) else np.asarray(x, np.float64)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x - y * np.rint(x / y)


#: name -> (numpy function on float64 arrays, dataflow rule, result is an int32 predicate)
_LIBDEVICE: dict[str, tuple[Callable, str, bool]] = {}
for _names, _fn, _rule in (
    (("abs",), np.abs, "max"), (("floor",), np.floor, "max"), (("ceil",), np.ceil, "max"),
    (("trunc",), np.trunc, "max"), (("rint", "nearbyint"), np.rint, "max"), (("round",), _round_half_away, "max"),
    (("sqrt", "sqrt_rn", "sqrt_rz", "sqrt_rd", "sqrt_ru"), np.sqrt, "sqrt"),
    (("rsqrt", "rsqrt_rn"), lambda x: 1 / np.sqrt(x), "rsqrt"),
    (("exp", "fast_expf"), np.exp, "exp"), (("exp2",), np.exp2, "exp2"),
    (("exp10", "fast_exp10f"), lambda x: np.power(10.0, x), "exp"), (("expm1",), np.expm1, "exp"),
    (("log", "fast_logf"), np.log, "log"), (("log2", "fast_log2f"), np.log2, "log"),
    (("log10", "fast_log10f"), np.log10, "log"), (("log1p",), np.log1p, "log"),
    (("sin", "fast_sinf"), np.sin, "max"), (("cos", "fast_cosf"), np.cos, "max"), (("tan", "fast_tanf"), np.tan, "max"),
    (("sinpi",), lambda x: np.sin(np.pi * x), "max"), (("cospi",), lambda x: np.cos(np.pi * x), "max"),
    (("asin",), np.arcsin, "max"), (("acos",), np.arccos, "max"), (("atan",), np.arctan, "max"),
    (("sinh",), np.sinh, "exp"), (("cosh",), np.cosh, "exp"), (("tanh", "fast_tanhf"), np.tanh, "max"),
    (("asinh",), np.arcsinh, "max"), (("acosh",), np.arccosh, "max"), (("atanh",), np.arctanh, "max"),
    (("erf",), _erf_like(__import__("math").erf), "max"), (("erfc",), _erf_like(__import__("math").erfc), "max"),
    (("lgamma",), _erf_like(__import__("math").lgamma), "max"),
    (("tgamma",), _erf_like(__import__("math").gamma), "max"),
    (("cbrt",), np.cbrt, "max"), (("rcbrt",), lambda x: 1 / np.cbrt(x), "max"),
    (("saturatef",), lambda x: np.clip(x, 0.0, 1.0), "max"),
    (("rcp_rn", "rcp_rz", "rcp_rd", "rcp_ru"), lambda x: 1 / x, "max"),
    (("pow", "fast_powf", "powf"), np.power, "max"), (("atan2",), np.arctan2, "max"), (("hypot",), np.hypot, "max"),
    (("rhypot",), lambda x, y: 1 / np.hypot(x, y), "max"), (("fmod",), np.fmod, "max"),
    (("remainder",), _remainder, "max"), (("copysign",), np.copysign, "max"),
    (("fdim",), lambda x, y: np.maximum(x - y, 0.0), "max"), (("nextafter",), np.nextafter, "max"),
    (("fmin",), np.fmin, "max"), (("fmax",), np.fmax, "max"),
    (("div_rn", "div_rz", "div_rd", "div_ru", "fast_dividef"), np.divide, "fdiv"),
    (("add_rn", "add_rz", "add_rd", "add_ru"), np.add, "max"), (("sub_rn", "sub_rz", "sub_rd", "sub_ru"),
                                                               np.subtract, "max"),
    (("mul_rn", "mul_rz", "mul_rd", "mul_ru"), np.multiply, "fmul"),
    (("fma", "fma_rn", "fma_rz", "fma_rd", "fma_ru"), lambda x, y, z: x * y + z, "fma"),
):
    for _name in _names:
        _LIBDEVICE[_name] = (_fn, _rule, False)
for _name, _fn in (("isnan", np.isnan), ("isinf", np.isinf), ("finitef", np.isfinite), ("isfinited", np.isfinite),
                   ("signbit", np.signbit)):
    _LIBDEVICE[_name] = (_fn, "max", True)


def libdevice_names() -> list[str]:
    return sorted(_LIBDEVICE)


def libdevice(name: str, args: tuple, used: Counter, after: Callable[[TensorHandle, list, str], None]) -> Any:
    """`libdevice.<name>(*args)` for the interpreter: the function in float64 on the values, the
    result in the arguments' float type (or int32 for predicates). `after(handle, operands, rule)`
    sets the result's dataflow shadows."""
    if name not in _LIBDEVICE:
        raise NotImplementedError(f"libdevice function {name} has no interpreter shim in tdiff")
    fn, rule, predicate = _LIBDEVICE[name]
    used[LIBDEVICE] += 1
    tensors = [a for a in args if isinstance(a, tl.core.tensor)]
    like = next((t for t in tensors if t.dtype.is_floating()), tensors[0] if tensors else None)
    handles = [a.handle if isinstance(a, tl.core.tensor) else TensorHandle(np.array([float(a)], np.float32),
                                                                             tl.float32) for a in args]
    vals = [bf16_to_f32(h.data).astype(np.float64) if _is_bf16(h) else np.asarray(h.data, np.float64)
            for h in handles]
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*vals))
    dt = tl.int32 if predicate else (like.dtype if like is not None else tl.float32)
    if predicate:
        data = out.astype(np.int32)
    elif dt == tl.bfloat16:
        data = f32_to_bf16(out.astype(np.float32))
    else:
        data = out.astype({16: np.float16, 32: np.float32, 64: np.float64}[dt.primitive_bitwidth])
    h = TensorHandle(data, dt)
    if not predicate:
        after(h, handles, rule)
    ty = tl.block_type(dt, list(data.shape)) if data.ndim and like is not None and like.type.is_block() else dt
    return tl.core.tensor(h, ty)


# ------------------------------------------------------------------ NaN in tl.maximum / tl.minimum

NAN_MINMAX = "nan-minmax"
ENABLED[NAN_MINMAX] = True
DESCRIPTIONS[NAN_MINMAX] = (
    "tl.maximum / tl.minimum (propagate_nan=NONE) return the non-NaN operand, as compiled code does (stock "
    "TRITON_INTERPRET=1 before triton-lang/triton#10333 returns NaN)")


_STOCK_NAN: list[bool] = []


def _stock_propagates_nan(orig: Callable) -> bool:
    if not _STOCK_NAN:
        _STOCK_NAN.append(_probe_nan(orig))
    return _STOCK_NAN[0]


def _probe_nan(orig: Callable) -> bool:
    one = TensorHandle(np.array([np.nan], np.float32), tl.float32)
    two = TensorHandle(np.array([1.0], np.float32), tl.float32)
    try:
        return bool(np.isnan(np.asarray(orig(one, two).data)).any())
    except Exception:
        return False


def nan_minmax(orig: dict[str, Callable], used: Counter) -> dict[str, Callable]:
    """`create_maxnumf` / `create_minnumf` with the compiler's semantics (maxnum: a NaN operand loses);
    counted only where an operand holds a NaN and the stock interpreter would have returned it."""
    if not ENABLED[NAN_MINMAX] or not _stock_propagates_nan(orig["create_maxnumf"]):
        return {}
    binary = orig["binary_op"]

    def method(op: Callable, propagating: Callable) -> Callable:
        def create(lhs: Any, rhs: Any) -> TensorHandle:
            if not any(np.isnan(_values(h)).any() for h in (lhs, rhs)):
                return binary(lhs, rhs, op)
            used[NAN_MINMAX] += 1
            out = binary(lhs, rhs, op)
            # a masked-out lane's poison (tdiff.execute.interpreter.undefined) stands for any value: the max or min
            # of it is not the other operand, so the poison goes on (a NaN the kernel computed loses)
            poisoned = [undefined.is_poison_nan(h.data, h.dtype.scalar) for h in (lhs, rhs)
                        if isinstance(h, TensorHandle)]
            if any(p.any() for p in poisoned):
                shape = np.shape(out.data)
                where = np.zeros(shape, bool)
                for p in poisoned:
                    where |= np.broadcast_to(p, shape)
                out.data = np.where(where, binary(lhs, rhs, propagating).data, out.data)
            return out

        return create

    return {"create_maxnumf": method(np.fmax, np.maximum), "create_minnumf": method(np.fmin, np.minimum)}


def _values(h: Any) -> np.ndarray:
    data = np.asarray(h.data)
    if _is_bf16(h):
        return bf16_to_f32(data)
    return data if data.dtype.kind == "f" else np.zeros(0)


def bf16_atomic(op: str, ptr: TensorHandle, val: TensorHandle, mask: np.ndarray | None,
                used: Counter) -> TensorHandle:
    """A bf16 atomic read-modify-write done in order, lane by lane, on the values."""
    from triton.runtime.interpreter import _interpreter

    used[BF16_ATOMICS] += 1
    addrs = np.asarray(ptr.data)
    m = np.ones(addrs.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), addrs.shape)
    vals = np.broadcast_to(np.asarray(val.data), addrs.shape)
    flat_a, flat_m, flat_v = addrs.reshape(-1), m.reshape(-1), vals.reshape(-1)
    old = np.zeros(flat_a.shape, np.uint16)
    for i in np.flatnonzero(flat_m):
        one = flat_a[i : i + 1]
        cur = _interpreter.load(one, np.ones(1, bool), np.zeros(1, np.uint16), np.dtype(np.uint16))
        old[i] = cur[0]
        a, b = bf16_to_f32(cur), bf16_to_f32(flat_v[i : i + 1])
        new = {"add": a + b, "fadd": a + b, "max": np.maximum(a, b), "min": np.minimum(a, b), "xchg": b}.get(op)
        if new is None:
            raise NotImplementedError(f"bf16 atomic {op} is not supported by tdiff's interpreter shim")
        _interpreter.store(one, f32_to_bf16(new), np.ones(1, bool))
    return TensorHandle(old.reshape(addrs.shape), tl.bfloat16)


# ------------------------------------------------------------------ tl.fma rounds once

FMA_ROUNDING = "fma-rounding"
ENABLED[FMA_ROUNDING] = True
DESCRIPTIONS[FMA_ROUNDING] = (
    "tl.fma rounded once, as the GPU's fma.rn does (stock TRITON_INTERPRET=1 computes `x * y + z` in the operands' "
    "type: the product is rounded before the sum)")


def fma_once(x: np.ndarray, y: np.ndarray, z: np.ndarray, out: np.dtype) -> np.ndarray:
    """x * y + z rounded once to `out` (float32 or float16): the product is exact in float64; the
    float64 sum is rounded to odd (its error, from TwoSum, decides the last bit), so that the final
    rounding to nearest even is that of the exact result (53 >= 2 * 24 + 2 bits)."""
    with np.errstate(all="ignore"):
        p = x.astype(np.float64) * y.astype(np.float64)
        c = z.astype(np.float64)
        s = p + c
        bb = s - p
        e = (p - (s - bb)) + (c - bb)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        nudge = np.isfinite(s) & np.isfinite(e) & (e != 0) & even
        s = np.where(nudge, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return s.astype(out)


def fma(orig: dict[str, Callable], used: Counter) -> dict[str, Callable]:
    """`create_fma` rounding once for float32 and float16 operands (counted where that changes a value)."""
    if not ENABLED[FMA_ROUNDING]:
        return {}
    stock = orig["create_fma"]

    def create_fma(x: Any, y: Any, z: Any) -> TensorHandle:
        out = stock(x, y, z)
        data = np.asarray(out.data)
        if data.dtype not in (np.float32, np.float16):
            return out
        args = [np.broadcast_to(np.asarray(h.data), data.shape) for h in (x, y, z)]
        once = fma_once(*args, data.dtype)
        if not np.array_equal(once.view(np.uint8), np.ascontiguousarray(data).view(np.uint8)):
            used[FMA_ROUNDING] += 1
        return TensorHandle(once, out.dtype)

    return {"create_fma": create_fma}
