"""Shims: what tdiff's interpreter does that stock `TRITON_INTERPRET=1` does not, so that kernels the
compiler accepts also run interpreted, with the compiler's types and results.

Each shim is named, counted per run (`Trace.shims`) and reported in the summary, so a user knows
where stock `TRITON_INTERPRET=1` would fail or compute differently (`shim_names.DESCRIPTIONS`). This module is the
one implementation of each: tdiff's interpreter installs them on its builder (`install_builder`, under
its own hooks) and in its rewrite of kernels (`scope`), and a reproducer's interpreter side embeds this
module's source and installs the same functions on stock TRITON_INTERPRET=1 (`stock`). Standalone:
numpy, triton, `tdiff.compat`, `shim_names`, `undefined` and the shim modules it gathers: `shim_switches` (which
shims are on, their counting), `bf16_shims`, `rewrite_shims` (those applied by rewriting kernel source); here the
float-args, bool-splat, NaN-propagating min/max and fused multiply-add shims, and their installation.

Builder-level shims are functions `make(orig, used) -> {method name: method}`, `orig` holding the
builder's current bound methods, `used` a Counter of uses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from ...compat import minmax_propagates_nan, reduce_minmax_propagates_nan
from .bf16_shims import (  # noqa: F401  (re-exported: the one place the rest of tdiff names the shims)
    BF16_ARITH_METHODS,
    bf16_arith,
    bf16_atomic,
    bf16_atomics,
    bf16_bits,
    bf16_reduce,
    bf16_to_f32,
    f32_to_bf16,
    get_bf16,
    is_bf16,
    is_bf16_tensor,
    retype,
    rmw_in_order,
)
from .rewrite_shims import (  # noqa: F401  (re-exported)
    INT_TENSOR_METHODS,
    BoolOps,
    IntMethods,
    IsOps,
    alias_targets,
    bind_aliases,
    bool_op,
    builtin_alias,
    constexpr_args,
    int_method,
    is_op,
)
from .shim_names import (  # noqa: F401  (re-exported: tests and the summary name the shims from here)
    BF16_ARITH,
    BF16_ATOMICS,
    BF16_CONSTANTS,
    BOOL_OPS,
    BOOL_SPLAT,
    BUILTIN_ALIASES,
    CONSTEXPR_ARGS,
    CONSTEXPR_IS,
    FLOAT_ARGS,
    FMA_ROUNDING,
    INT_METHODS,
    LIBDEVICE,
    NAN_MINMAX,
)
from .shim_switches import ENABLED, count_into, count_use, counting, current  # noqa: F401  (re-exported)
from .undefined import is_poison_nan

# ------------------------------------------------------------------ float-args

def float_arg(value: float, used: Counter) -> Any:
    """A float kernel argument as the compiler sees it: an fp32 scalar tensor."""
    used[FLOAT_ARGS] += 1
    return tl.tensor(TensorHandle(np.array([value], dtype=np.float32), tl.float32), tl.float32)


def implicit_cvt(cvt: Callable[[Any], Any], used: Counter) -> Callable[[Any], Any]:
    """The interpreter's argument conversion (`cvt`), with top-level float arguments typed fp32 (floats
    inside tuples stay Python floats: the conversion recurses through the module's name)."""
    depth = [0]

    def convert(arg: Any) -> Any:
        if isinstance(arg, float) and not depth[0] and ENABLED[FLOAT_ARGS]:
            return float_arg(arg, used)
        depth[0] += 1
        try:
            return cvt(arg)
        finally:
            depth[0] -= 1

    return convert


def convert_args(args: dict[str, Any], constexprs: set[str], implicit: Callable[[Any], Any],
                 used: Counter) -> dict[str, Any]:
    """Kernel arguments for the interpreter: Triton's own conversion, floats typed as fp32."""
    convert = implicit_cvt(implicit, used)
    return {name: value if name in constexprs else convert(value) for name, value in args.items()}


# ------------------------------------------------------------------ bool-splat

def bool_splat(orig: dict[str, Callable], used: Counter) -> dict[str, Callable]:
    """`create_splat` / `create_unsplat` keeping a comparison's boolean values: the interpreter's comparison handles
    carry the compared operands' type, which the stock splat converts the booleans to."""
    if not ENABLED[BOOL_SPLAT]:
        return {}
    splat, unsplat = orig["create_splat"], orig.get("create_unsplat")

    def as_bool(arg: Any) -> Any:
        if np.asarray(arg.data).dtype == np.bool_ and getattr(arg.dtype, "scalar", arg.dtype) != tl.int1:
            used[BOOL_SPLAT] += 1
            return TensorHandle(arg.data, tl.int1)
        return arg

    out: dict[str, Callable[..., Any]] = {"create_splat": lambda ret_ty, arg: splat(ret_ty, as_bool(arg))}
    if unsplat is not None:  # (Triton 3.5+)
        out["create_unsplat"] = lambda arg: unsplat(as_bool(arg))
    return out


# ------------------------------------------------------------------ NaN in tl.maximum / tl.minimum

def _values(h: Any) -> np.ndarray:
    data = np.asarray(h.data)
    if is_bf16(h):
        return bf16_to_f32(data)
    return data if data.dtype.kind == "f" else np.zeros(0)


#: shims counted per program where the data asks for them (a NaN operand): a batch counts the programs whose rows
#: needed it (`programs_with_nan`), where other shims' use in a batch stands for each of its programs
PER_PROGRAM = frozenset({NAN_MINMAX})


def programs_with_nan(used: Counter, *arrays: Any) -> int:
    """How many programs an operation met a NaN in: 1 program by program; in a batch (`used.batch` programs, the
    leading axis of every block value, of length 1 where uniform), those whose rows hold one."""
    n = getattr(used, "batch", 0)
    if not n:
        return 1
    hit = np.zeros(n, bool)
    for data in arrays:
        data = np.asarray(data)
        if data.dtype.kind != "f":
            continue
        nan = np.isnan(data)
        if not nan.any():
            continue
        if data.ndim and data.shape[0] == n:
            hit |= nan.reshape(n, -1).any(axis=1)
        else:  # a value uniform over the batch: every program met it
            hit[:] = True
    return int(hit.sum())


def minmax(orig: dict[str, Callable], used: Counter, poison: bool = False) -> dict[str, Callable]:
    """`create_maxnumf` / `create_minnumf` with the compiler's semantics (maxnum: a NaN operand loses),
    counted only where an operand holds a NaN and the stock interpreter would have returned it. With
    `poison`, a masked-out lane's poison (`undefined`) stands for any value: the max or min of it is
    not the other operand, so the poison goes on (a NaN the kernel computed loses)."""
    stock_nan = minmax_propagates_nan()
    fix = ENABLED[NAN_MINMAX] and stock_nan
    keep = poison and (fix or not stock_nan)  # (where NaN wins anyway, the poison goes on by itself)
    if not (fix or keep):
        return {}
    binary = orig["binary_op"]

    def method(name: str, num: Callable, propagating: Callable) -> Callable:
        stock = orig[name]

        def create(lhs: Any, rhs: Any) -> TensorHandle:
            if not any(np.isnan(_values(h)).any() for h in (lhs, rhs)):
                return stock(lhs, rhs)
            if fix:
                used[NAN_MINMAX] += programs_with_nan(used, _values(lhs), _values(rhs))
                out = binary(lhs, rhs, num)
            else:
                out = stock(lhs, rhs)
            if keep:
                poisoned = [is_poison_nan(h.data, h.dtype.scalar) for h in (lhs, rhs) if isinstance(h, TensorHandle)]
                if any(p.any() for p in poisoned):
                    shape = np.shape(out.data)
                    where = np.zeros(shape, bool)
                    for p in poisoned:
                        where |= np.broadcast_to(p, shape)
                    out.data = np.where(where, binary(lhs, rhs, propagating).data, out.data)
            return out

        return create

    return {"create_maxnumf": method("create_maxnumf", np.fmax, np.maximum),
            "create_minnumf": method("create_minnumf", np.fmin, np.minimum)}


def minmax_reductions(apply_impl: Callable, used: Counter) -> Callable | None:
    """`ReduceOps.apply_impl` whose `tl.max` / `tl.min` reductions skip NaN, as compiled code and the
    interpreter from Triton 3.5 do (3.4's use `np.max`: NaN wins); None where nothing needs changing."""
    if not ENABLED[NAN_MINMAX] or not reduce_minmax_propagates_nan():
        return None

    def apply_impl_nan(self: Any, input: Any) -> Any:
        fn = self.combine_fn
        op = np.nanmax if fn is tl.standard._elementwise_max else np.nanmin if fn is tl.standard._elementwise_min \
            else None
        data = np.asarray(input[0].handle.data) if op is not None else None
        if data is None or data.dtype.kind != "f" or not np.isnan(data).any():
            return apply_impl(self, input)
        used[NAN_MINMAX] += programs_with_nan(used, data)
        with np.errstate(all="ignore"):
            return self.min_max(input[0], val_reduce_op=op, idx_reduce_op=None)

    return apply_impl_nan


# ------------------------------------------------------------------ tl.fma rounds once

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
    """`create_fma` rounding once for float32 and float16 operands, counted where that changes a value
    (from Triton 3.9 the stock interpreter rounds float32 once itself: no use is counted there)."""
    if not ENABLED[FMA_ROUNDING]:
        return {}
    stock = orig["create_fma"]

    def create_fma(x: Any, y: Any, z: Any) -> TensorHandle:
        out = stock(x, y, z)
        data = np.asarray(out.data)
        if data.dtype not in (np.float32, np.float16):
            return out
        args = [np.broadcast_to(np.asarray(h.data), data.shape) for h in (x, y, z)]
        once = fma_once(args[0], args[1], args[2], data.dtype)
        if not np.array_equal(once.view(np.uint8), np.ascontiguousarray(data).view(np.uint8)):
            used[FMA_ROUNDING] += 1
        return TensorHandle(once, out.dtype)

    return {"create_fma": create_fma}


# ------------------------------------------------------------------ installing them on a builder

def install_builder(builder: Any, put: Callable[[object, str, Any], None], used: Counter,
                    poison: bool = False) -> None:
    """Set the builder-level shims on `builder` (the interpreter's builder instance) with
    `put(object, name, value)`, each over the builder's current method (a layer under it stays)."""
    build = get_bf16(used)
    if build is not None:
        put(builder, "get_bf16", build)
    layers: list[tuple[Callable[[dict[str, Callable]], dict[str, Callable]], tuple[str, ...]]] = [
        (lambda orig: bf16_arith(orig, used), BF16_ARITH_METHODS),
        (lambda orig: minmax(orig, used, poison), ("binary_op", "create_maxnumf", "create_minnumf")),
        (lambda orig: fma(orig, used), ("create_fma",)),
        (lambda orig: bf16_atomics(orig, used), ("create_atomic_rmw",)),
        (lambda orig: bool_splat(orig, used), ("create_splat", "create_unsplat")),
    ]
    for make, names in layers:
        for name, fn in make({n: current(builder, n) for n in names if hasattr(builder, n)}).items():
            put(builder, name, fn)


def install_reductions(interp: Any, put: Callable[[object, str, Any], None], used: Counter) -> None:
    """Set the reduction-level shims on the interpreter's `ReduceOps` (`interp`: its module) with `put`."""
    apply_impl = minmax_reductions(interp.ReduceOps.apply_impl, used)
    if apply_impl is not None:
        put(interp.ReduceOps, "apply_impl", apply_impl)
