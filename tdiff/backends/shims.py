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
  `x > 0` is false for every negative x); tdiff computes on the values in fp32 and rounds the
  result to bf16 (nearest even), as the GPU's bf16 instructions do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

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
    """float32 values rounded to bfloat16 (nearest even), as uint16 bits; NaN stays NaN."""
    v = np.asarray(values, dtype=np.float32)
    bits = v.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(v), np.uint16(0x7FC0), rounded).astype(np.uint16)


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

    from triton.runtime.interpreter import np_erf_fp32

    return {
        "binary_op": binary_op, "ternary_op": ternary_op, "unary_op": unary_op, "create_fma": create_fma,
        "create_rsqrt": unary_method("create_rsqrt", lambda v: 1 / np.sqrt(v)),
        "create_erf": unary_method("create_erf", np_erf_fp32),
    }
