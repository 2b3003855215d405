"""Shims: what tdiff's interpreter does that stock `TRITON_INTERPRET=1` does not, so that kernels the
compiler accepts also run interpreted, with the compiler's types and results.

Each shim is named, counted per run (`Trace.shims`) and reported in the summary, so a user knows
where stock `TRITON_INTERPRET=1` would fail or compute differently (`shim_names.DESCRIPTIONS`). This module is the
one implementation of each: tdiff's interpreter installs them on its builder (`install_builder`, under
its own hooks) and in its rewrite of kernels (`scope`), and a reproducer's interpreter side embeds this
module's source and installs the same functions on stock TRITON_INTERPRET=1 (`stock`). Standalone:
numpy, triton, `tdiff.compat`, `shim_names` and `undefined`.

Builder-level shims are functions `make(orig, used) -> {method name: method}`, `orig` holding the
builder's current bound methods, `used` a Counter of uses.
"""

from __future__ import annotations

import ast
import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from ...compat import has_get_bf16, minmax_propagates_nan, reduce_minmax_propagates_nan
from .shim_names import (
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
from .undefined import is_poison_nan

#: each shim can be switched off (tests show what stock TRITON_INTERPRET=1 does without it)
ENABLED = {FLOAT_ARGS: True, BF16_CONSTANTS: True, BF16_ARITH: True, LIBDEVICE: True, BF16_ATOMICS: True,
           CONSTEXPR_ARGS: True, BOOL_OPS: True, NAN_MINMAX: True, FMA_ROUNDING: True, BUILTIN_ALIASES: True,
           BOOL_SPLAT: True, INT_METHODS: True, CONSTEXPR_IS: True}

_COUNTER: list[Counter | None] = [None]  # where shims called from kernel code count (`counting`)


@contextlib.contextmanager
def counting(used: Counter) -> Iterator[None]:
    """Shims applied from kernel code (`bool_op`, `constexpr_args`) count into `used` in the body."""
    saved = _COUNTER[0]
    _COUNTER[0] = used
    try:
        yield
    finally:
        _COUNTER[0] = saved


def count_into(used: Counter | None) -> None:
    """Shims applied from kernel code count into `used` from now on (a reproducer's interpreter side)."""
    _COUNTER[0] = used


def _count(name: str) -> None:
    if _COUNTER[0] is not None:
        _COUNTER[0][name] += 1


def current(builder: Any, name: str) -> Callable:
    """`builder.<name>` as it is now: an instance attribute a layer set, or the class's method, bound."""
    if name in vars(builder):
        return vars(builder)[name]
    cls = type(builder)
    return getattr(cls, name).__get__(builder, cls)


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
    ops = {"add": np.add, "fadd": np.add, "max": np.maximum, "min": np.minimum, "xchg": lambda a, b: b}
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


# ------------------------------------------------------------------ constexpr-args, tensor-and-or

def constexpr_args(args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """A device function's arguments as the compiler passes them: a dtype wrapped in tl.constexpr."""
    # (compared by type: tl.constexpr(dtype) == dtype is true)
    if not ENABLED[CONSTEXPR_ARGS] or not any(isinstance(a, tl.dtype) for a in (*args, *kwargs.values())):
        return args, kwargs
    _count(CONSTEXPR_ARGS)
    return (tuple(tl.constexpr(a) if isinstance(a, tl.dtype) else a for a in args),
            {k: tl.constexpr(v) if isinstance(v, tl.dtype) else v for k, v in kwargs.items()})


def _helper(module: str, name: str) -> ast.Attribute:
    """`__import__(module, fromlist=["_"]).<name>`: a function of `module`, reached from rewritten kernel code."""
    imported = ast.Call(func=ast.Name("__import__", ast.Load()), args=[ast.Constant(module)],
                        keywords=[ast.keyword("fromlist", ast.List([ast.Constant("_")], ast.Load()))])
    return ast.Attribute(value=imported, attr=name, ctx=ast.Load())


class BoolOps(ast.NodeTransformer):
    """`a and b` / `a or b` -> `<module>.bool_op("and", a, lambda: b)`: on tensors the compiler makes them
    elementwise logical operations; on Python values they keep Python's short-circuit semantics.
    `module`: the name of a module that has `bool_op`, imported by the rewritten code."""

    def __init__(self, module: str) -> None:
        self.module = module

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        self.generic_visit(node)
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = node.values[0]
        for value in node.values[1:]:
            helper = _helper(self.module, "bool_op")
            thunk = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                  defaults=[]), body=value)
            result = ast.Call(func=helper, args=[ast.Constant(op), result, thunk], keywords=[])
        return result


def bool_op(op: str, a: Any, b: Callable[[], Any]) -> Any:
    """`a and b()` / `a or b()` as the compiler evaluates it (see `BoolOps`)."""
    if not isinstance(a, tl.core.tensor):
        return (a and b()) if op == "and" else (a or b())
    other = b()
    _count(BOOL_OPS)
    if not isinstance(other, tl.core.tensor):
        other = tl.full((), bool(other), tl.int1)
    return a.logical_and(other) if op == "and" else a.logical_or(other)


class IsOps(ast.NodeTransformer):
    """`a is b` / `a is not b` -> `<module>.is_op(a, b, negate)`: constexprs compared by their values, as the
    compiler compares them (`code_generator.visit_Compare`)."""

    def __init__(self, module: str) -> None:
        self.module = module

    def visit_Compare(self, node: ast.Compare) -> Any:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            return node
        negate = ast.Constant(isinstance(node.ops[0], ast.IsNot))
        return ast.copy_location(ast.Call(func=_helper(self.module, "is_op"),
                                          args=[node.left, node.comparators[0], negate], keywords=[]), node)


def is_op(a: Any, b: Any, negate: bool) -> bool:
    """`a is b` (or `is not`) on the values of constexprs."""
    if ENABLED[CONSTEXPR_IS] and (isinstance(a, tl.constexpr) or isinstance(b, tl.constexpr)):
        plain = (a is b) != negate
        a, b = getattr(a, "value", a) if isinstance(a, tl.constexpr) else a, \
            getattr(b, "value", b) if isinstance(b, tl.constexpr) else b
        result = (a is b) != negate
        if result != plain:
            _count(CONSTEXPR_IS)
        return result
    return (a is b) != negate


#: tensor methods a kernel calls on a loop index, which is a Python int in the interpreter and a tensor in the compiler
INT_TENSOR_METHODS = frozenset({"to"})


class IntMethods(ast.NodeTransformer):
    """`x.to(...)` -> `<module>.int_method(x, "to")(...)`: a Python int (a loop index) made the integer tensor the
    compiler's loop index is."""

    def __init__(self, module: str) -> None:
        self.module = module

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in INT_TENSOR_METHODS and not (
                isinstance(f.value, ast.Name) and f.value.id in ("tl", "triton", "core", "language")):
            node.func = ast.copy_location(ast.Call(func=_helper(self.module, "int_method"),
                                                   args=[f.value, ast.Constant(f.attr)], keywords=[]), f)
        return node


def int_method(x: Any, name: str) -> Any:
    """`x.<name>`, with a Python int `x` first made a scalar tensor (int32, else int64 where it does not fit, as a
    kernel's integer argument is)."""
    if type(x) is int and ENABLED[INT_METHODS]:
        from triton.runtime.interpreter import _implicit_cvt

        _count(INT_METHODS)
        x = _implicit_cvt(x)
    return getattr(x, name)


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

    out = {"create_splat": lambda ret_ty, arg: splat(ret_ty, as_bool(arg))}
    if unsplat is not None:  # (Triton 3.5+)
        out["create_unsplat"] = lambda arg: unsplat(as_bool(arg))
    return out


# ------------------------------------------------------------------ builtin-aliases

def builtin_alias(owner: object, name: str) -> Callable:
    """A module-level alias of the builtin `owner.<name>`: calls what `owner.<name>` is when called (the
    interpreter's patched version in its scope), counted."""

    def call(*args: Any, **kwargs: Any) -> Any:
        _count(BUILTIN_ALIASES)
        return getattr(owner, name)(*args, **kwargs)

    call.__tdiff_alias_of__ = (owner, name)  # type: ignore[attr-defined]
    return call


def alias_targets(patches: list[tuple[object, str, Any, Any]]) -> dict[int, tuple[Any, object, str]]:
    """From the interpreter's language patches `(object, attribute, patched, original)`: id(original builtin) ->
    (original, object, attribute), for the builtins a module-level name may be bound to."""
    out: dict[int, tuple[Any, object, str]] = {}
    for obj, name, _new, old in patches:
        if isinstance(obj, type) or not callable(old) or not tl.core.is_builtin(old):
            continue
        out.setdefault(id(old), (old, obj, name))
    return out


def bind_aliases(g: dict[str, Any], targets: dict[int, tuple[Any, object, str]],
                 put: Callable[[dict[str, Any], str, Any], None]) -> None:
    """Rebind the names of a module's globals `g` that hold an original builtin of `targets` to its alias (with
    `put(globals, name, value)`, which records the change to undo it)."""
    if not ENABLED[BUILTIN_ALIASES]:
        return
    for key, value in list(g.items()):
        hit = targets.get(id(value))
        if hit is not None and hit[0] is value:
            put(g, key, builtin_alias(hit[1], hit[2]))


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
        once = fma_once(*args, data.dtype)
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
