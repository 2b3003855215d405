"""The bfloat16 shims: bf16 constants (`get_bf16`), bf16 arithmetic computed in float32 and rounded back
(`bf16_arith`, `bf16_reduce`), and bf16 atomics applied lane by lane in order (`bf16_atomics`, `rmw_in_order`).
Standalone: numpy, triton, `tdiff.compat`, `shim_names` and `shim_switches` (embedded by reproducers)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from ...compat import has_get_bf16
from .shim_names import BF16_ARITH, BF16_ATOMICS, BF16_CONSTANTS
from .shim_switches import ENABLED

# ------------------------------------------------------------------ bf16

def bf16_bits(value: float) -> np.ndarray:
    """`value` rounded to bfloat16 (nearest even), as its 16 bits."""
    return f32_to_bf16(np.array([value], dtype=np.float32))


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) as float32 values."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest even), as uint16 bits; a NaN stays a quiet NaN with
    its sign and the top of its payload (as a conversion in hardware keeps them: a masked lane's
    poison stays poison, `undefined`)."""
    v = np.asarray(values, dtype=np.float32)
    bits = v.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return np.where(np.isnan(v), nan, rounded).astype(np.uint16)


def is_bf16(h: Any) -> bool:
    """Whether a handle (or tensor) holds bfloat16 values (kept as their bits)."""
    dt = getattr(h, "dtype", None)
    return dt is not None and getattr(dt, "scalar", dt) == tl.bfloat16


def get_bf16(used: Counter) -> Callable[[float], TensorHandle] | None:
    """A `get_bf16` for builders that lack one (Triton < 3.9); None where the builder has it."""
    if has_get_bf16() or not ENABLED[BF16_CONSTANTS]:
        return None

    def build(value: float) -> TensorHandle:
        used[BF16_CONSTANTS] += 1
        return TensorHandle(bf16_bits(value), tl.bfloat16)

    return build


def bf16_arith(orig: dict[str, Callable], used: Counter) -> dict[str, Callable]:
    """Builder methods that compute bf16 operands on their values in fp32 and round the result to bf16,
    and convert bf16 <-> fp32 as the compiler does (stock widens subnormals wrongly, truncates)."""
    if not ENABLED[BF16_ARITH]:
        return {}
    binary, ternary, unary, fma, cast = (orig[n] for n in ("binary_op", "ternary_op", "unary_op", "create_fma",
                                                           "cast_impl"))

    def _result(out: np.ndarray, like: Any) -> TensorHandle:
        if out.dtype == np.bool_:  # a comparison: the builder keeps the operand's type on the handle
            return TensorHandle(out, like.dtype.scalar)
        return TensorHandle(f32_to_bf16(out), tl.bfloat16)

    def binary_op(lhs: Any, rhs: Any, op: Callable) -> TensorHandle:
        if not (is_bf16(lhs) and is_bf16(rhs)):
            return binary(lhs, rhs, op)
        used[BF16_ARITH] += 1
        with np.errstate(all="ignore"):
            return _result(op(bf16_to_f32(lhs.data), bf16_to_f32(rhs.data)), lhs)

    def ternary_op(a: Any, b: Any, c: Any, op: Callable) -> TensorHandle:
        if op is np.where or not all(is_bf16(h) for h in (a, b, c)):
            return ternary(a, b, c, op)
        used[BF16_ARITH] += 1
        with np.errstate(all="ignore"):
            return _result(op(*(bf16_to_f32(h.data) for h in (a, b, c))), c)

    def unary_op(arg: Any, op: Callable) -> TensorHandle:
        if not is_bf16(arg):
            return unary(arg, op)
        used[BF16_ARITH] += 1
        with np.errstate(all="ignore"):
            return _result(op(bf16_to_f32(arg.data)), arg)

    def unary_method(name: str, op: Callable) -> Callable:
        fallback = orig[name]

        def method(arg: Any) -> TensorHandle:
            if not is_bf16(arg):
                return fallback(arg)
            used[BF16_ARITH] += 1
            with np.errstate(all="ignore"):
                return _result(op(bf16_to_f32(arg.data)), arg)

        return method

    def create_fma(x: Any, y: Any, z: Any) -> TensorHandle:
        if not all(is_bf16(h) for h in (x, y, z)):
            return fma(x, y, z)
        used[BF16_ARITH] += 1
        a, b, c = (bf16_to_f32(h.data).astype(np.float64) for h in (x, y, z))
        with np.errstate(all="ignore"):
            return _result((a * b + c).astype(np.float32), z)

    def cast_impl(src: Any, dst_type: Any) -> TensorHandle:
        s_t, d_t = getattr(src.dtype, "scalar", src.dtype), getattr(dst_type, "scalar", dst_type)
        if s_t == tl.bfloat16 and d_t == tl.float32:
            used[BF16_ARITH] += 1
            return TensorHandle(bf16_to_f32(src.data), tl.float32)
        if s_t == tl.float32 and d_t == tl.bfloat16:
            used[BF16_ARITH] += 1
            return TensorHandle(f32_to_bf16(np.asarray(src.data, np.float32)), tl.bfloat16)
        return cast(src, dst_type)

    from triton.runtime.interpreter import np_erf_fp32

    return {"cast_impl": cast_impl, "binary_op": binary_op, "ternary_op": ternary_op, "unary_op": unary_op,
            "create_fma": create_fma, "create_rsqrt": unary_method("create_rsqrt", lambda v: 1 / np.sqrt(v)),
            "create_erf": unary_method("create_erf", np_erf_fp32)}


BF16_ARITH_METHODS = ("binary_op", "ternary_op", "unary_op", "create_fma", "create_rsqrt", "create_erf", "cast_impl")


def is_bf16_tensor(t: Any) -> bool:
    return isinstance(t, tl.core.tensor) and t.dtype == tl.bfloat16


def retype(t: Any, to: Any) -> Any:
    """A bf16 tensor as fp32 values (`to` float32), or an fp32 tensor rounded to bf16."""
    data = bf16_to_f32(t.handle.data) if to == tl.float32 else f32_to_bf16(t.handle.data)
    ty = tl.block_type(to, list(t.type.shape)) if t.type.is_block() else to
    return tl.core.tensor(TensorHandle(np.asarray(data), to), ty)


def bf16_reduce(reduce: Callable[[tuple], tuple], inputs: tuple, used: Counter) -> tuple | None:
    """A reduction or scan of bf16 tensors on their values: `reduce` (a tuple of tensors -> a tuple)
    run on them widened to fp32, the fp32 results rounded back to bf16; None where no input is bf16."""
    narrow = [is_bf16_tensor(t) for t in inputs]
    if not any(narrow) or not ENABLED[BF16_ARITH]:
        return None
    used[BF16_ARITH] += 1
    outs = reduce(tuple(retype(t, tl.float32) if n else t for t, n in zip(inputs, narrow)))
    return tuple(retype(o, tl.bfloat16) if n and isinstance(o, tl.core.tensor) and o.dtype == tl.float32 else o
                 for o, n in zip(outs, narrow))


# ------------------------------------------------------------------ bf16 atomics

def rmw_in_order(ptr: TensorHandle, val: TensorHandle, mask: np.ndarray | None, carrier: np.dtype,
                 new: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """An atomic read-modify-write done on the values, lane by lane in order (all lanes at once where each owns its
    address): `new(current, operand)` gives what each lane stores, in `carrier`; returns the old values."""
    from triton.runtime.interpreter import _interpreter

    addrs = np.asarray(ptr.data)
    m = np.ones(addrs.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), addrs.shape)
    vals = np.broadcast_to(np.asarray(val.data), addrs.shape)
    flat_a, flat_m, flat_v = addrs.reshape(-1), m.reshape(-1), vals.reshape(-1)
    old = np.zeros(flat_a.shape, carrier)
    lanes = np.flatnonzero(flat_m)
    groups = [lanes] if np.unique(flat_a[lanes]).size == lanes.size else [lanes[i : i + 1] for i in range(lanes.size)]
    for at in groups:
        on = np.ones(at.size, bool)
        cur = _interpreter.load(flat_a[at], on, np.zeros(at.size, carrier), np.dtype(carrier))
        old[at] = cur
        with np.errstate(all="ignore"):
            _interpreter.store(flat_a[at], new(cur, flat_v[at]), on)
    return old.reshape(addrs.shape)


def bf16_atomic(op: str, ptr: TensorHandle, val: TensorHandle, mask: np.ndarray | None,
                used: Counter) -> TensorHandle:
    """A bf16 atomic read-modify-write done in order, lane by lane, on the values."""
    ops: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
        "add": np.add, "fadd": np.add, "max": np.maximum, "min": np.minimum, "xchg": lambda a, b: b}
    if op not in ops:
        raise NotImplementedError(f"bf16 atomic {op} is not supported by tdiff's interpreter shim")
    used[BF16_ATOMICS] += 1
    old = rmw_in_order(ptr, val, mask, np.dtype(np.uint16),
                       lambda cur, v: f32_to_bf16(ops[op](bf16_to_f32(cur), bf16_to_f32(v))))
    return TensorHandle(old, tl.bfloat16)


def bf16_atomics(orig: dict[str, Callable], used: Counter) -> dict[str, Callable]:
    """`create_atomic_rmw` doing bf16 atomics on the values (stock: 'Unsupported data type')."""
    if not ENABLED[BF16_ATOMICS]:
        return {}
    rmw = orig["create_atomic_rmw"]

    def create_atomic_rmw(op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        if not is_bf16(val):
            return rmw(op, ptr, val, mask, *rest, **kw)
        name = str(op).rsplit(".", 1)[-1].lower()
        return bf16_atomic(name, ptr, val, None if mask is None else np.asarray(mask.data, bool), used)

    return {"create_atomic_rmw": create_atomic_rmw}
