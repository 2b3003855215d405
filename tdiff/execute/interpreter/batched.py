"""Grid-batched interpretation: the kernel's Python runs once for a batch of programs.

Every block value carries a leading program axis: its length is the batch's size, or 1 where the value is
the same for every program (`tl.arange`, a constant). Scalars are `(programs, 1)` arrays, or Triton's own
1-element arrays where uniform. Elementwise operations broadcast over that axis as numpy does; the operations
that name axes or build shapes (`splat`, `broadcast`, `reshape`, `trans`, `expand_dims`, `cat`, `join`,
`gather`, reductions and scans) are given it here, and memory accesses (loads, stores, atomic updates) are
widened to one lane set per program, so that every count and record is per program, as program by program.

A batch stops (`Unbatchable`) where its programs would part ways or its meaning would depend on their order:
a branch or loop bound that differs between programs (`outcomes`: the batch is split by it, see
`backend._batch`), programs sharing an element one of them writes (`memory`), an access outside every
allocation, an undefined cast, atomic exchanges and compare-and-swaps, block pointers, prints. The launch is
then undone and run program by program, so the report is the sequential interpreter's, word for word; the
reason and its kernel line are counted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp
from triton.runtime.interpreter import TensorHandle

from ..backends.base import user_line_now


class Unbatchable(Exception):
    """A batch cannot go on: `reason` (what), `line` (where in the kernel); `of_code`: the kernel's code
    decides it (an operation batches do not run, control flow that parts programs), not the case's data."""

    batch = 0  # the batch it stopped, where the backend runs several (set there)

    def __init__(self, reason: str, of_code: bool = False, outcomes: np.ndarray | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = user_line_now()
        self.of_code = of_code
        self.outcomes = outcomes  # a branch or bound: its value in each program of the batch (to split it by)


def stop(reason: str, of_code: bool = False, outcomes: np.ndarray | None = None) -> NoReturn:
    raise Unbatchable(reason, of_code, outcomes)


#: a batch splits by the values of a branch or loop bound into at most this many batches, else stops
SPLIT_WAYS = 8


#: kernels (their code objects) a batch stopped for a reason of their code: "reason at line"
_OF_CODE: dict[Any, str] = {}


def remember(fn: Any, exc: Unbatchable) -> None:
    """Later launches of `fn` in this process run program by program at once when `exc` is of its code."""
    if exc.of_code:
        _OF_CODE[getattr(fn, "__code__", fn)] = f"{exc.reason} at {exc.line}"


def known_unbatchable(fn: Any) -> str | None:
    """Why launches of `fn` run program by program ("reason at line"), if a batch of it stopped for its code."""
    return _OF_CODE.get(getattr(fn, "__code__", fn))


#: builder methods a batch does not run: what each is, for the fallback's reason
UNSUPPORTED = {
    "create_atomic_cas": "atomic_cas", "create_atomic_poll": "atomics",
    "create_atomic_load": "atomics", "create_atomic_store": "atomics",
    "create_make_block_ptr": "block pointers", "create_advance": "block pointers",
    "create_make_tensor_descriptor": "tensor descriptors", "create_descriptor_load": "tensor descriptors",
    "create_descriptor_store": "tensor descriptors", "create_descriptor_gather": "tensor descriptors",
    "create_descriptor_scatter": "tensor descriptors", "create_histogram": "tl.histogram",
    "create_print": "device_print", "create_inline_asm": "inline_asm_elementwise",
    "create_dot_scaled": "dot_scaled", "create_extern_elementwise": "an extern function",
}


def _np_dtype(t: Any) -> np.dtype:
    return _interp._get_np_dtype(t)


def _scalar_values(data: np.ndarray) -> np.ndarray:
    """A scalar handle's values, one per program of its leading axis (1 where uniform)."""
    d = np.asarray(data)
    return d.reshape(-1)[:1] if d.ndim <= 1 else d.reshape(d.shape[0], -1)[:, 0]


def _common(*arrays: np.ndarray) -> list[np.ndarray]:
    """Arrays with their leading (program) axes broadcast to one length; the other axes as they are."""
    n = max(a.shape[0] for a in arrays)
    return [a if a.shape[0] == n else np.broadcast_to(a, (n,) + a.shape[1:]) for a in arrays]


def builder_methods(coords: Callable[[], np.ndarray]) -> dict[str, Callable]:
    """The builder methods a batch replaces; `coords()`: the running batch's programs, (n, 3) coordinates."""

    def create_get_program_id(axis: int) -> TensorHandle:
        c = coords()
        return TensorHandle(np.ascontiguousarray(c[:, axis].reshape(len(c), 1).astype(np.int32)), tl.int32)

    def create_splat(ret_ty: Any, arg: TensorHandle) -> TensorHandle:
        shape = tuple(int(getattr(d, "value", d)) for d in ret_ty.shape)
        vals = _scalar_values(arg.data).astype(_np_dtype(arg.dtype), copy=False)
        out = np.empty((len(vals),) + shape, dtype=vals.dtype)
        out[...] = vals.reshape((len(vals),) + (1,) * len(shape))
        return TensorHandle(out, arg.dtype.scalar)

    def create_unsplat(arg: TensorHandle) -> TensorHandle:
        d = arg.data
        return TensorHandle(np.ascontiguousarray(d.reshape(d.shape[0], -1)[:, :1]), arg.dtype.scalar)

    def create_make_range(ret_ty: Any, start: int, stop: int) -> TensorHandle:
        return TensorHandle(np.arange(start, stop, dtype=np.int32)[None, :], tl.int32)

    def create_expand_dims(arg: TensorHandle, axis: int) -> TensorHandle:
        return TensorHandle(np.expand_dims(arg.data, axis + 1 if axis >= 0 else axis), arg.dtype.scalar)

    def create_broadcast(arg: TensorHandle, shape: Any) -> TensorHandle:
        d = arg.data
        return TensorHandle(np.broadcast_to(d, (d.shape[0],) + tuple(shape)), arg.dtype.scalar)

    def create_reshape(arg: TensorHandle, shape: Any, allow_reorder: bool = False) -> TensorHandle:
        d = arg.data
        return TensorHandle(d.reshape((d.shape[0],) + tuple(shape)), arg.dtype.scalar)

    def create_trans(arg: TensorHandle, perm: Any) -> TensorHandle:
        return TensorHandle(np.transpose(arg.data, (0,) + tuple(int(p) + 1 for p in perm)), arg.dtype.scalar)

    def create_cat(lhs: TensorHandle, rhs: TensorHandle) -> TensorHandle:
        a, b = _common(lhs.data, rhs.data)
        return TensorHandle(np.concatenate([a, b], axis=1), lhs.dtype.scalar)

    def create_join(lhs: TensorHandle, rhs: TensorHandle) -> TensorHandle:
        a, b = _common(lhs.data, rhs.data)
        return TensorHandle(np.stack([a, b], axis=-1), lhs.dtype.scalar)

    def create_gather(src: TensorHandle, indices: TensorHandle, axis: int) -> TensorHandle:
        a, i = _common(src.data, indices.data)
        return TensorHandle(np.take_along_axis(a, i, axis=axis + 1 if axis >= 0 else axis), src.dtype.scalar)

    out: dict[str, Callable] = {
        "create_get_program_id": create_get_program_id, "create_splat": create_splat,
        "create_unsplat": create_unsplat, "create_make_range": create_make_range,
        "create_expand_dims": create_expand_dims, "create_broadcast": create_broadcast,
        "create_reshape": create_reshape, "create_trans": create_trans, "create_cat": create_cat,
        "create_join": create_join, "create_gather": create_gather,
    }
    out["create_permute"] = create_trans  # (older Tritons' name)
    for name, what in UNSUPPORTED.items():
        out[name] = _refuse(what)
    return out


def _refuse(what: str) -> Callable:
    def refuse(*_: Any, **__: Any) -> Any:
        stop(what, of_code=True)

    return refuse


def access_methods(current: Callable[[str], Callable], size: Callable[[], int],
                   atomics_seen: Callable[[], None], width: Callable[[int], None]) -> dict[str, Callable]:
    """Loads, stores and atomic updates with their pointers, masks and values widened to one lane set per
    program (the outermost layer: every layer under it sees and counts the accesses of all `size()` programs;
    `width` hears each access's lanes per program).
    An atomic update runs its lanes in launch order, as one program after another would (`memory` stops the
    batch where that order would not hold); exchanges and compare-and-swaps (locks, flags) stop it."""
    load, store, rmw = current("create_masked_load"), current("create_masked_store"), current("create_atomic_rmw")

    def widen(*handles: Any) -> list[Any]:
        n = size()
        datas = [np.asarray(h.data) for h in handles if isinstance(h, TensorHandle)]
        shaped = [d if d.ndim >= 2 else d.reshape(1, 1) for d in datas]
        full = (n,) + tuple(np.broadcast_shapes(*[d.shape for d in shaped])[1:])
        width(_numel(full[1:]))  # (lanes per program: the size of later batches follows it)
        out, k = [], 0
        for h in handles:
            if not isinstance(h, TensorHandle):
                out.append(h)
                continue
            if np.shape(h.data) == full:
                out.append(h)
            else:
                shape = shaped[k].shape
                wide = TensorHandle(np.array(np.broadcast_to(shaped[k], full), order="C"), h.dtype)  # (writable)
                # (mypy infers no lambda with a default argument)
                out.append(with_shadows(h, wide, lambda v, shape=shape: np.broadcast_to(  # type: ignore[misc]
                    v.reshape(shape), full)))
            k += 1
        return out

    def create_masked_load(ptrs: Any, mask: Any, other: Any, *rest: Any, **kw: Any) -> Any:
        ptrs, mask, other = widen(ptrs, mask, other)
        return load(ptrs, mask, other, *rest, **kw)

    def create_masked_store(ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        ptrs, value, mask = widen(ptrs, value, mask)
        return store(ptrs, value, mask, *rest, **kw)

    def create_atomic_rmw(op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        if "xchg" in str(op).rsplit(".", 1)[-1].lower():
            stop("atomic_xchg", of_code=True)
        atomics_seen()
        ptr, val, mask = widen(ptr, val, mask)
        return rmw(op, ptr, val, mask, *rest, **kw)

    return {"create_masked_load": create_masked_load, "create_masked_store": create_masked_store,
            "create_atomic_rmw": create_atomic_rmw, "create_atomic_cas": _refuse("atomic_cas")}


# ------------------------------------------------------------------ Python control flow on tensor values

def _uniform_scalar(t: Any, what: str) -> Any:
    d = np.asarray(t.handle.data)
    vals = d.reshape(-1)
    if what == "bool":
        b = vals.astype(bool)
        if b.all() or not b.any():
            return bool(b[0])
        reason, per = "a branch that differs between programs", b
    elif vals.size > 1 and not (vals == vals[0]).all():
        reason, per = "a loop bound or index that differs between programs", vals
    else:
        return vals[0]
    outcomes = None
    if d.ndim >= 2 and int(np.prod(d.shape[1:])) == 1:  # a scalar with a program axis: split the batch by it
        outcomes = np.unique(per, return_inverse=True)[1].reshape(-1)
        if outcomes.max() + 1 > SPLIT_WAYS:
            outcomes = None
            reason += f" (more than {SPLIT_WAYS} ways)"
    stop(reason, of_code=True, outcomes=outcomes)


def tensor_methods() -> dict[str, Any]:
    """`tl.tensor`'s conversions to Python values (`if`, `while`, `range`): the same value in every program of
    the batch, or the batch stops; and `.T`, which keeps the program axis first."""

    def __bool__(self: Any) -> bool:
        if isinstance(self.type, tl.block_type) and _numel(shape_of(self.type)) != 1:
            return True  # as Triton's interpreter: only (1-element) scalars convert to booleans
        return bool(_uniform_scalar(self, "bool"))

    def __index__(self: Any) -> int:
        return int(_uniform_scalar(self, "index"))

    def _transpose(self: Any) -> Any:
        d = self.handle.data
        perm = (0,) + tuple(range(1, d.ndim - 2)) + (d.ndim - 1, d.ndim - 2)
        handle = TensorHandle(np.transpose(d, perm), self.handle.dtype)
        shape = list(shape_of(self.type))
        shape[-1], shape[-2] = shape[-2], shape[-1]
        return tl.core.tensor(handle, tl.core.block_type(self.dtype, shape))

    return {"__bool__": __bool__, "__index__": __index__, "T": property(_transpose)}


def _per_program(value: Any) -> np.ndarray:
    """A range argument's integer value in each program (one value where the same for all)."""
    value = getattr(value, "value", value)  # (a constexpr)
    if isinstance(value, tl.core.tensor):
        d = np.asarray(value.handle.data)
        return d.reshape(d.shape[0]) if d.ndim >= 2 and d.size == d.shape[0] else d.reshape(-1)[:1]
    return np.array([int(value)])


def loop_range(arg1: Any, arg2: Any = None, step: Any = None, **_: Any) -> Any:
    """`range` (and `tl.range`, whose other options only tune compiled code) in a batch: Python's where its
    bounds are the same in every program; where they differ but the loop runs as many times in each, the loop
    variable is a tensor with each program's value; else the batch stops, split by the trip count (see
    `Unbatchable.outcomes`)."""
    start, stop_ = (0, arg1) if arg2 is None else (arg1, arg2)
    step = 1 if step is None else step
    vals = [_per_program(a) for a in (start, stop_, step)]
    if all(v.size == 1 or (v == v[0]).all() for v in vals):
        return range(*(int(v[0]) for v in vals))
    n = max(v.size for v in vals)
    s, e, st = (np.broadcast_to(v.astype(np.int64), (n,)) for v in vals)
    if (st == 0).any():
        raise ValueError("range() arg 3 must not be zero")
    trips = np.where(st > 0, np.maximum(0, -(-(e - s) // np.where(st > 0, st, 1))),
                     np.maximum(0, -(-(s - e) // np.where(st < 0, -st, 1))))
    if not (trips == trips[0]).all():
        outcomes = np.unique(trips, return_inverse=True)[1].reshape(-1)
        if outcomes.max() + 1 > SPLIT_WAYS:
            stop(f"a loop whose trip count differs between programs (more than {SPLIT_WAYS} ways)", of_code=True)
        stop("a loop whose trip count differs between programs", of_code=True, outcomes=outcomes)
    values = [s + k * st for k in range(int(trips[0]))]
    wide = any(((v < -(2**31)) | (v >= 2**31)).any() for v in values)
    dtype, np_dtype = (tl.int64, np.int64) if wide else (tl.int32, np.int32)
    return [tl.core.tensor(TensorHandle(v.reshape(n, 1).astype(np_dtype), dtype), dtype) for v in values]


# ------------------------------------------------------------------ reductions and scans

def to_tensor_for(original: Callable) -> Callable:
    """`ReduceScanOpInterface.to_tensor` for batched data: the values in the dtype, under the scalar type
    (`reduce` and `scan` give each result its tl shape, which the data's program axis is not part of). Where a
    program's result is a scalar (data of one axis: the programs), each value goes through Triton's own
    `original` conversion of a scalar, so that one it rejects (an integer out of range) is rejected here too."""

    def to_tensor(self: Any, ret: Any, dtype: Any) -> Any:
        np_dtype = _np_dtype(dtype)
        data = np.asarray(ret)
        if data.ndim == 1 and data.size and data.dtype.kind in "iu":
            for extreme in (data.min(), data.max()):  # (a range check: its extremes decide)
                original(self, extreme, dtype)
        data = data.astype(np_dtype) if data.ndim else np.array([ret]).astype(np_dtype)
        return tl.core.tensor(TensorHandle(data, dtype.scalar), dtype)

    return to_tensor


def _tl_type(dtype: Any, shape: tuple[int, ...]) -> Any:
    return tl.core.block_type(dtype, list(shape)) if shape else dtype


def _wrap(data: np.ndarray, dtype: Any, shape: tuple[int, ...]) -> Any:
    """A tensor of tl shape `shape` from data with a leading program axis."""
    d = np.asarray(data)
    d = d.reshape((d.shape[0],) + (shape if shape else (1,)))
    return tl.core.tensor(TensorHandle(np.ascontiguousarray(d.astype(_np_dtype(dtype), copy=False)),
                                       dtype.scalar if hasattr(dtype, "scalar") else dtype), _tl_type(dtype, shape))


def shape_of(t: Any) -> tuple[int, ...]:
    """A tensor's tl shape as ints (Triton 3.6 and older hold constexprs)."""
    return tuple(int(getattr(d, "value", d)) for d in t.shape)


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def with_shadows(src: TensorHandle, dst: TensorHandle, move: Callable[[np.ndarray], np.ndarray]) -> TensorHandle:
    """`dst` (made from `src`'s values by `move`) given tdiff's shadows of `src` (dataflow, fragile), each moved
    alike where it is shaped like the values."""
    for name, v in vars(src).items():
        if name.startswith("_tdiff_"):
            if isinstance(v, np.ndarray) and v.shape == np.shape(src.data):
                v = np.ascontiguousarray(move(v))
            object.__setattr__(dst, name, v)
    return dst


def flat_per_program(t: Any) -> Any:
    """A batched tensor's values flattened per program (a 1-D block each), its shadows alike."""
    d = np.asarray(t.handle.data)
    flat = with_shadows(t.handle, TensorHandle(d.reshape(d.shape[0], -1), t.handle.dtype),
                        lambda v: v.reshape(d.shape[0], -1))
    return tl.core.tensor(flat, _tl_type(t.dtype, (_numel(shape_of(t)),)))


_KNOWN_REDUCE = None


def _known_reduce(fn: Any) -> bool:
    global _KNOWN_REDUCE
    if _KNOWN_REDUCE is None:
        s = tl.standard
        _KNOWN_REDUCE = tuple(getattr(s, n) for n in (
            "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast", "_argmax_combine_tie_break_left",
            "_argmax_combine_tie_break_fast", "_elementwise_max", "_elementwise_min", "_sum_combine")
            if hasattr(s, n))
    return any(fn is k for k in _KNOWN_REDUCE)


def reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: bool = False, **kwargs: Any) -> Any:
    """`tl.reduce` on batched tensors: the interpreter's own numpy reductions on the axis past the program
    axis, and any other combine function folded along the axis in the interpreter's order."""
    ins = input if isinstance(input, tuple) else (input,)
    shape = shape_of(ins[0])
    if axis is None:
        ins = tuple(flat_per_program(t) for t in ins)
        a, kept = 0, (1,) * len(shape) if keep_dims else ()
    else:
        a = int(axis) % max(len(shape), 1)
        kept = shape[:a] + ((1,) if keep_dims else ()) + shape[a + 1:]
    ndim = len(shape_of(ins[0]))
    if _known_reduce(combine_fn):
        outs = _interp.ReduceOps(a - ndim, combine_fn, keep_dims and axis is not None).apply(ins)
    else:
        outs = _fold(ins, a, combine_fn, scan=False)
    outs = tuple(_wrap(o.handle.data, o.dtype, kept) for o in outs)
    return outs if isinstance(input, tuple) else outs[0]


def scan(input: Any, axis: int, combine_fn: Any, reverse: bool = False, **kwargs: Any) -> Any:
    """`tl.associative_scan` on batched tensors, as `reduce`."""
    ins = input if isinstance(input, tuple) else (input,)
    shape = shape_of(ins[0])
    a = int(axis) % max(len(shape), 1)
    if combine_fn is tl.standard._sum_combine or combine_fn is getattr(tl.standard, "_prod_combine", None):
        outs = _interp.ScanOps(a - len(shape), combine_fn, reverse).apply(ins)
    else:
        if reverse:
            ins = tuple(_wrap(np.flip(t.handle.data, axis=a + 1), t.dtype, shape) for t in ins)
        outs = _fold(ins, a, combine_fn, scan=True)
        if reverse:
            outs = tuple(_wrap(np.flip(o.handle.data, axis=a + 1), o.dtype, shape) for o in outs)
    outs = tuple(_wrap(o.handle.data, o.dtype, shape) for o in outs)
    return outs if isinstance(input, tuple) else outs[0]


def _fold(ins: tuple, a: int, combine_fn: Any, scan: bool) -> tuple:
    """Combine along tl axis `a` in order, element 0 first, as the interpreter's generic reduce and scan do,
    each step on every other element (and program) at once; results kept in the inputs' dtypes."""
    datas = _common(*[np.asarray(t.handle.data) for t in ins])
    moved = [np.moveaxis(d, a + 1, 0) for d in datas]  # (length, programs, rest...)
    rest: tuple[int, ...] = tuple(moved[0].shape[2:])
    length = moved[0].shape[0]
    dtypes = [t.dtype for t in ins]

    def at(i: int) -> tuple:
        return tuple(_wrap(m[i], dt, rest) for m, dt in zip(moved, dtypes))

    acc = at(0)
    steps = [acc]
    for i in range(1, length):
        got = combine_fn.fn(*acc, *at(i))
        got = got if isinstance(got, tuple) else (got,)
        acc = tuple(_as(g, like, dt, rest) for g, like, dt in zip(got, acc, dtypes))
        if scan:
            steps.append(acc)
    if not scan:
        return acc
    outs = []
    for j, t in enumerate(ins):
        arrs = [np.asarray(s[j].handle.data).reshape((-1,) + rest) for s in steps]
        n = max(len(x) for x in arrs)  # (each x.shape[0])
        stacked = np.stack([np.broadcast_to(x, (n,) + rest) for x in arrs])  # (length, programs, rest...)
        outs.append(_wrap(np.moveaxis(stacked, 0, a + 1), dtypes[j], shape_of(t)))
    return tuple(outs)


def _as(value: Any, like: Any, dtype: Any, shape: tuple[int, ...]) -> Any:
    """A combine function's result stored as the interpreter stores it: in the input's dtype."""
    if isinstance(value, tl.core.tensor):
        d = np.asarray(value.handle.data)
        if d.ndim <= 1 and not shape:  # an unbatched scalar (a constant)
            d = d.reshape(1, 1)
        return _wrap(d, dtype, shape)
    n = like.handle.data.shape[0]
    return _wrap(np.full((n,) + (shape if shape else (1,)), value).astype(_np_dtype(dtype)), dtype, shape)
