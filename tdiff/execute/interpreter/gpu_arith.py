"""The GPU's arithmetic in the interpreter: a run that computes as compiled Triton documents it computes on NVIDIA
GPUs, where that differs from numpy's IEEE arithmetic (`interpreter:gpu`, a modelled run of the judge).

- `tl.dot` on float32 operands at `input_precision="tf32"` (Triton's default) or `"tf32x3"`: the tensor cores read
  each operand as tf32, the low 13 bits of its float32 pattern dropped (PTX ISA: `mma`/`wgmma` `.tf32`). A subnormal
  below 2^-136 becomes 0, so `-inf * 1e-45` is NaN there (measured on an H200). `tf32x3` adds the products of the
  operands' remainders (`a - tf32(a)`) and drops a NaN they make (Triton's F32DotTC pass: `select(isnan(x), 0, x)`),
  so it is tf32's big-times-big product plus a finite correction. `ieee` and the half types are unchanged.
- Multiply-adds contract: `a * b + c` (and `c - a * b`, ...) is one fused multiply-add, rounded once
  (`enable_fp_fusion`; NVPTX fuses every fmul feeding an fadd). Its default is Triton's knob (`fusion_default`: on
  in Triton 3.4 to 3.9, off with `TRITON_DEFAULT_FP_FUSION=0` or `TRITON_FORCE_DISABLE_FP_FUSION=1`; Triton 3.9
  warns that 3.10 turns it off), and a modelled run contracts only where it is on.
- A block's sum pairs lanes half a block apart (the warp shuffles' butterfly: `x[i] + x[i + n/2]`, then again),
  not numpy's left-to-right order, so values near the range's end can overflow in one order and not the other
  (`[big, -big, big, 0]`: finite left to right, inf in halves). The run rounded to nearest and every second run
  rounded at random sum in halves; the others keep the random rounding's tree of neighbours. (An overflow from
  inputs at float32's limits passes as the range edge anyway; the order matters to a NaN or an infinity the
  GPU's sums make of other values.)
- Float32 division `/` is PTX `div.full.f32`, not IEEE `div.rn` (`tl.math.div_rn` is): the dividend times the
  divisor's reciprocal, each rounded to float32. Measured on an H200 (`bench/gpu/div_full.py`, 4 million pairs a
  family): the same bits as `a * (1 / b)` for every pair with b in {3, 5, 6, 7, 10, 100}, and for 88-90% of other
  pairs (the hardware's reciprocal is not always the correctly rounded one; the others are one ulp apart); IEEE's
  quotient for 69-76%. So a row's mean `sum / n` can land on an element where IEEE's lands one ulp away, and
  `x - mean` is 0 on the GPU (times an infinite weight: NaN).
- The math functions flush subnormals: their subnormal operands and results are zeros of the same sign (Triton's
  libdevice calls are compiled with flush-to-zero; `ex2.approx.ftz`, `rsqrt.approx.ftz`, `sqrt.approx.ftz`), and
  float32 `exp(x)` is `ex2.approx(x * log2(e))`, the product rounded to float32 first.

With `Rounder` (random rounding, `interpreter:gpu:rr<k>`) the results it computes itself (fused multiply-adds,
`x * log2(e)`) are rounded at random too, as every other floating result of such a run is (see `rounding`); an
ensemble of such runs shows which NaNs and infinities the GPU's arithmetic can make of this case (a value within
rounding of zero times an infinity).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from .rounding import Rounder, pairwise_sum

#: builder methods of math functions whose subnormal operands and results are flushed
FLUSHED = ("create_exp", "create_exp2", "create_log", "create_log2", "create_sin", "create_cos", "create_sqrt",
           "create_rsqrt", "create_erf")
#: how many products a run remembers for contraction (a product is fused into an add that uses it soon after)
PRODUCTS = 4096
LOG2E = 1.4426950408889634


def tf32(x: np.ndarray) -> np.ndarray:
    """float32 values as the tensor cores read them in tf32: the low 13 bits of each pattern dropped (NaN and
    infinities stay; a subnormal below 2^-136 becomes a zero of its sign)."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32).reshape(np.shape(x))


def flush(x: np.ndarray) -> np.ndarray:
    """Subnormal elements of a float array as zeros of their sign (other arrays as they are)."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.size == 0:
        return x
    tiny = np.finfo(x.dtype).tiny
    with np.errstate(invalid="ignore"):
        small = (x != 0) & (np.abs(x) < tiny)
    if not small.any():
        return x
    return np.where(small, np.copysign(np.zeros((), x.dtype), x), x).astype(x.dtype)


def fusion_default() -> bool:
    """Whether compiled Triton contracts multiply-adds here by default: its knob `TRITON_DEFAULT_FP_FUSION` (on unless
    set otherwise, in Triton 3.4 to 3.9), unless `TRITON_FORCE_DISABLE_FP_FUSION` (Triton 3.9) turns it off."""
    from triton import knobs

    lang = knobs.language
    return bool(getattr(lang, "default_fp_fusion", True)) and not bool(getattr(lang, "force_disable_fp_fusion", False))


def _precision(input_precision: Any) -> str:
    """`ieee`, `tf32`, `tf32x3` or another (bf16x3...) from what the frontend passes the builder (None: tf32)."""
    text = str(input_precision).lower() if input_precision is not None else "tf32"
    for name in ("tf32x3", "ieee", "bf16x6", "bf16x3", "tf32"):
        if name in text:
            return name
    return text


class GpuArithmetic:
    """Installs the GPU's arithmetic on an interpreter builder (through `put`, the hooks' undo log). `rounder`: the
    run's random rounding, for the results computed here; `fusion`: whether multiply-adds contract; `halves`:
    whether float sums add in halves (else as `rounder` or numpy sums)."""

    def __init__(self, rounder: Rounder | None = None, used: set[str] | None = None, fusion: bool = True,
                 halves: bool = True) -> None:
        self.rounder = rounder
        self.fusion = fusion
        self.halves = halves
        self.products: OrderedDict[int, tuple[Any, np.ndarray, np.ndarray]] = OrderedDict()
        self.used = used if used is not None else set()  # what it changed (`tf32 dot`, `fma contraction`, `ftz`)

    def _round(self, data: np.ndarray) -> np.ndarray:
        return self.rounder.perturb(data) if self.rounder is not None else data

    def install(self, builder: Any, put: Callable[[object, str, Any], None]) -> None:
        from triton.runtime import interpreter as _interp

        handle = _interp.TensorHandle
        dot = builder.create_dot

        def create_dot(a: Any, b: Any, d: Any, input_precision: Any = None, *rest: Any, **kw: Any) -> Any:
            av, bv = np.asarray(a.data), np.asarray(b.data)
            prec = _precision(input_precision)
            if av.dtype != np.float32 or bv.dtype != np.float32 or prec not in ("tf32", "tf32x3"):
                return dot(a, b, d, input_precision, *rest, **kw)
            big_a, big_b = tf32(av), tf32(bv)
            if not (np.array_equal(big_a, av, equal_nan=True) and np.array_equal(big_b, bv, equal_nan=True)):
                self.used.add(f"{prec} dot")
            if prec == "tf32":
                return dot(handle(big_a, a.dtype), handle(big_b, b.dtype), d, input_precision, *rest, **kw)
            # tf32x3, as Triton's F32DotTC pass orders it: the remainders' products onto the accumulator, a NaN
            # among them replaced by the accumulator, then the big parts' product onto that
            with np.errstate(all="ignore"):
                small_a, small_b = tf32(av - big_a), tf32(bv - big_b)
            low = dot(handle(small_a, a.dtype), handle(big_b, b.dtype), d, input_precision, *rest, **kw)
            low = dot(handle(big_a, a.dtype), handle(small_b, b.dtype), low, input_precision, *rest, **kw)
            lo, acc = np.asarray(low.data), np.asarray(d.data)
            masked = handle(np.where(np.isnan(lo), np.broadcast_to(acc, lo.shape), lo).astype(lo.dtype), d.dtype)
            return dot(handle(big_a, a.dtype), handle(big_b, b.dtype), masked, input_precision, *rest, **kw)

        put(builder, "create_dot", create_dot)

        if self.fusion:
            mul, add, sub = builder.create_fmul, builder.create_fadd, builder.create_fsub

            def create_fmul(x: Any, y: Any) -> Any:
                out = mul(x, y)
                data = np.asarray(out.data)
                if data.dtype.kind == "f":
                    self.products[id(out)] = (out, np.asarray(x.data), np.asarray(y.data))
                    if len(self.products) > PRODUCTS:
                        self.products.popitem(last=False)
                return out

            def product(h: Any) -> tuple[np.ndarray, np.ndarray] | None:
                found = self.products.get(id(h))
                return (found[1], found[2]) if found is not None and found[0] is h else None

            def fused(x: Any, y: Any, sign: float, inner: Callable) -> Any:
                """x + sign * y with a product among them contracted (the first, as LLVM picks)."""
                px, py = product(x), product(y)
                if px is None and py is None:
                    return inner(x, y)
                out = inner(x, y)
                data = np.asarray(out.data)
                if data.dtype.kind != "f" or data.dtype == np.float64:
                    return out
                with np.errstate(all="ignore"):
                    if px is not None:
                        a, b = px
                        exact = a.astype(np.float64) * b.astype(np.float64) + sign * np.asarray(y.data, np.float64)
                    elif py is not None:  # (one of them is: returned above otherwise)
                        a, b = py
                        exact = np.asarray(x.data, np.float64) + sign * (a.astype(np.float64) * b.astype(np.float64))
                    fma = exact.astype(data.dtype)
                if not np.array_equal(np.broadcast_to(fma, data.shape), data, equal_nan=True):
                    self.used.add("fma contraction")
                return handle(self._round(np.broadcast_to(fma, data.shape).copy()), out.dtype)

            put(builder, "create_fmul", create_fmul)
            put(builder, "create_fadd", lambda x, y: fused(x, y, 1.0, add))
            put(builder, "create_fsub", lambda x, y: fused(x, y, -1.0, sub))

        div = builder.create_fdiv

        def create_fdiv(x: Any, y: Any) -> Any:
            out = div(x, y)
            data = np.asarray(out.data)
            if data.dtype != np.float32:
                return out
            with np.errstate(all="ignore"):
                rcp = self._round((np.float32(1) / np.asarray(y.data, np.float32)).astype(np.float32))
                full = (np.asarray(x.data, np.float32) * rcp).astype(np.float32)
            full = np.broadcast_to(full, data.shape)
            if not np.array_equal(full, data, equal_nan=True):
                self.used.add("div.full")
            return handle(self._round(full.copy()), out.dtype)

        put(builder, "create_fdiv", create_fdiv)

        for name in FLUSHED:
            fn = getattr(builder, name, None)
            if fn is not None:
                put(builder, name, self._flushing(fn, name, handle, builder))

        if self.halves:
            self._sum_in_halves(_interp, put)

    def _sum_in_halves(self, interp: Any, put: Callable[[object, str, Any], None]) -> None:
        below = interp.ReduceOps.sum  # numpy's order, or the random rounding's tree
        arith = self

        def ssum(op: Any, input: Any) -> Any:
            data = np.asarray(input.handle.data)
            if data.dtype.kind != "f":
                return below(op, input)
            if op.axis is None:
                out = pairwise_sum(data.reshape(-1), 0, False, arith._round, halves=True)
                if op.keep_dims:
                    out = out.reshape((1,) * data.ndim)
            else:
                out = pairwise_sum(data, op.axis, op.keep_dims, arith._round, halves=True)
            if arith.rounder is not None:
                arith.rounder.keep(out)
            elif "reduction order" not in arith.used:
                with np.errstate(all="ignore"):
                    numpy_order = np.sum(data, axis=op.axis, keepdims=op.keep_dims)
                if not np.array_equal(np.reshape(numpy_order, np.shape(out)), out, equal_nan=True):
                    arith.used.add("reduction order")
            return op.to_tensor(out, input.dtype)

        put(interp.ReduceOps, "sum", ssum)

    def _flushing(self, fn: Callable, name: str, handle: type, builder: Any) -> Callable:
        exp2 = builder.create_exp2 if name == "create_exp" else None

        def hook(x: Any) -> Any:
            data = np.asarray(x.data)
            if data.dtype.kind != "f":
                return fn(x)
            flushed = flush(data)
            if flushed is not data:
                self.used.add("ftz")
            arg = handle(flushed, x.dtype) if flushed is not data else x
            if exp2 is not None and data.dtype == np.float32:  # ex2.approx(x * log2(e))
                with np.errstate(all="ignore"):
                    scaled = self._round((flushed * np.float32(LOG2E)).astype(np.float32))
                out = exp2(handle(flush(scaled), x.dtype))
            else:
                out = fn(arg)
            result = np.asarray(out.data)
            flat = flush(result)
            if flat is result:
                return out
            self.used.add("ftz")
            return handle(flat, out.dtype)

        return hook


def flushed_call(fn: Callable[..., Any], args: tuple, used: set[str]) -> Any:
    """`fn(*args)` (a libdevice function on `tl.core.tensor`s and numbers) with the float32 tensors' subnormal
    operands and results flushed to zero, as libdevice compiled with flush-to-zero computes them."""
    import triton.language as tl
    from triton.runtime import interpreter as _interp

    def flat(t: Any) -> Any:
        if not isinstance(t, tl.core.tensor) or np.asarray(t.handle.data).dtype != np.float32:
            return t
        data = np.asarray(t.handle.data)
        out = flush(data)
        if out is data:
            return t
        used.add("ftz")
        return tl.core.tensor(_interp.TensorHandle(out, t.handle.dtype), t.type)

    return flat(fn(*(flat(a) for a in args)))
