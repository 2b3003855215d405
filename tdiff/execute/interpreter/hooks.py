"""The instrumentation: hooks on the interpreter's builder (and on `tl.reduce` / `tl.associative_scan`)
that run the shims, tag the operations behind each tolerance, note undefined casts, follow the dataflow
and check and record memory, installed for one session's launch (`instrumented`)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

from ... import compat
from ...core import dtypes
from ...core.outcome import Trace, UBEvent
from ..backends.base import user_line_now
from . import (
    batched,
    carry,
    dataflow,
    fragile,
    gpu_arith,
    libdevice,
    reduction_hooks,
    reductions,
    rounding,
    shims,
    undefined,
    unspecified,
)
from .dataflow import fit
from .session import Session, full_mask

TRANSCENDENTAL = ("exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "rsqrt", "erf", "precise_sqrt")
FLOAT_ARITH = ("fadd", "fsub", "fmul", "fdiv", "frem", "fma", "precise_divf")


def _mask_data(mask: Any) -> np.ndarray | None:
    return None if mask is None else np.asarray(mask.data, dtype=bool)


def _itemsize(ptrs: Any) -> int:
    return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)


@contextlib.contextmanager
def instrumented(builder: Any, session: Session, batch: bool = False) -> Iterator[None]:
    """Wrap the interpreter's builder (and reductions) with `session`'s hooks for the body; with `batch`,
    over the layer that runs a batch of programs at once (`batched`; `session.batch` names them)."""
    changes = _install(builder, session, batch)
    try:
        yield
    finally:
        for obj, name, old in reversed(changes):
            if old is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)


_MISSING = object()

_OP_TAGS = {f"create_{op}": "transcendental" for op in TRANSCENDENTAL}
_OP_TAGS.update({f"create_{op}": "farith" for op in FLOAT_ARITH})
# operations with a class of their own (see tdiff.core.op_classes)
_OP_TAGS.update({"create_fma": "fma", "create_precise_divf": "div_rn", "create_precise_sqrt": "sqrt_rn",
                 "create_fdiv": "fdiv"})
_NOT_VALUES = ("get_grid", "get_null", "set_grid", "create_get_program_id", "create_get_num_programs",
               "create_make_range", "create_print", "create_assert", "create_assume", "create_barrier",
               "create_make_block_ptr", "create_advance", "create_make_tensor_descriptor", "create_addptr",
               "create_histogram")


@functools.lru_cache(maxsize=8)
def _value_methods(cls: type) -> tuple[str, ...]:
    """The builder methods that make values (hooked for op classes and dataflow): a function of the class, so
    found once per process, not at every launch."""
    names = []
    for name in dir(cls):
        if not (name.startswith("create_") or name.startswith("get_")) or name.endswith("_ty"):
            continue
        if name.startswith(_NOT_VALUES) or name in dataflow.SPECIAL or not callable(getattr(cls, name)):
            continue
        names.append(name)
    return tuple(names)


def _install(builder: Any, session: Session, batch: bool = False) -> list[tuple[object, str, Any]]:
    """Set instance attributes on the interpreter's builder that wrap the class methods, layer by
    layer (a batch's program axis, shims, then op tags and dataflow, then memory); and wrap reductions
    and scans.

    Returns what it changed, as (object, attribute, previous value or _MISSING)."""
    changes: list[tuple[object, str, Any]] = []

    def put(obj: object, name: str, value: Any) -> None:
        old = getattr(obj, name) if name == "__code__" else vars(obj).get(name, _MISSING)
        changes.append((obj, name, old))
        setattr(obj, name, value)

    cls = type(builder)
    trace = session.trace

    def current(name: str) -> Callable:
        return shims.current(builder, name)

    # 0. a batch: every value carries a leading program axis (see `batched`)
    if batch:
        # (the coordinates are set whenever a batch runs)
        for name, fn in batched.builder_methods(lambda: session.coords).items():  # type: ignore[arg-type,return-value]
            if hasattr(builder, name):
                put(builder, name, fn)
        for name, value in batched.tensor_methods().items():
            put(tl.core.tensor, name, value)
        for mod in (tl, tl.core):
            put(mod, "reduce", batched.reduce)
            put(mod, "associative_scan", batched.scan)
            put(mod, "range", batched.loop_range)  # (tl.static_range stays Python's: its bounds are constexprs)
        put(_interp.ReduceScanOpInterface, "to_tensor", batched.to_tensor_for(_interp.ReduceScanOpInterface.to_tensor))

    # 0b. a branch on a fragile value (`1.0 if argmax == y else 0.0`): what the program stores after it is fragile
    below_bool = tl.core.tensor.__bool__

    def __bool__(self: Any) -> bool:
        decided = fragile.fragile_of(getattr(self, "handle", None))
        if decided is not None and decided.any():
            session.sway(decided)
        return below_bool(self)

    put(tl.core.tensor, "__bool__", __bool__)

    # 1. shims: what the compiler accepts and the stock interpreter does not (a reproducer installs the same)
    shims.install_builder(builder, put, trace.shims, poison=session.options.poison)
    shims.install_reductions(_interp, put, trace.shims)

    # 1b. results Triton leaves unspecified: recorded (and, for a verdict rerun, changed)
    def record(key: str, lanes: np.ndarray) -> None:
        trace.unspecified[key] = trace.unspecified.get(key, 0) + session.count(lanes)

    trace.alternate = session.options.alternate
    for name, fn in unspecified.hooks(current, record, session.options.alternate).items():
        put(builder, name, fn)

    # 1c. random rounding (an ensemble run: `interpreter:rr<k>`): every floating result rounded up or down at random
    rounder = rounding.Rounder(session.options.rounding, trace.rounded) if session.options.rounding else None
    if rounder is not None:
        rounding.install(rounder, put, builder)

    # 1d. the GPU's arithmetic (a modelled run: `interpreter:gpu`), around the random rounding it may carry
    if session.options.gpu_arith:
        halves = not session.options.rounding or session.options.rounding % 2 == 0  # (odd k: a tree of neighbours)
        gpu_arith.GpuArithmetic(rounder, trace.modelled, fusion=gpu_arith.fusion_default(), halves=halves).install(
            builder, put)

    # 2. values: op classes (for tolerances), undefined casts, dataflow magnitudes
    for name in _value_methods(cls):  # type: ignore[arg-type]  # (a class is hashable; type[Any] is not to mypy)
        put(builder, name, _value_hook(name, current(name), session))
    put(builder, "create_dot", _dot_hook(current("create_dot"), session))

    # 3. memory: bounds, writers, races, stored magnitudes
    for name, hook in _memory_hooks(current, session).items():
        put(builder, name, hook)
    if batch:  # outermost: every layer under it sees one lane set per program
        def seen() -> None:
            session.batch_atomics = True

        def width(lanes: int) -> None:
            session.widest = max(session.widest, lanes)

        for name, fn in batched.access_methods(current, session.batch_size, seen, width).items():
            put(builder, name, fn)
    # whether a load was given other= (the interpreter's frontend drops a falsy single-element one)
    session.other.install(put)

    # libdevice: stubs under the interpreter; computed on the values instead (shim)
    if shims.ENABLED[shims.LIBDEVICE]:
        _install_libdevice(put, session)

    # reductions and scans bypass the builder: tag and follow them at the language level
    for mod in (tl, tl.core):
        for attr, tag in (("reduce", "reduce"), ("associative_scan", "scan")):
            put(mod, attr, reduction_hooks.reduce_hook(getattr(mod, attr), tag, session))
    return changes


def _install_libdevice(put: Callable, session: Session) -> None:
    def after(h: Any, operands: list, rule: str) -> None:
        session.trace.ops.add("transcendental")
        near = dataflow.elementwise(h, operands, f"create_{rule}", session.above, session.left_range)
        if near is not None:
            session.at_limit(near)

    def dispatch(name: str, *args: Any, **_: Any) -> Any:
        if session.options.gpu_arith:  # (compiled with flush-to-zero: subnormal operands and results are zeros)
            return gpu_arith.flushed_call(lambda *a: libdevice.compute_libdevice(name, a, session.trace.shims, after),
                                          args, session.trace.modelled)
        return libdevice.compute_libdevice(name, args, session.trace.shims, after)

    libdevice.install_libdevice(put, dispatch)


def _value_hook(name: str, fn: Callable, session: Session) -> Callable:
    tag = _OP_TAGS.get(name)
    layout = name in dataflow.LAYOUT
    ub = name in ("create_fp_to_si", "create_fp_to_ui")
    unsigned = name.endswith("ui")
    compare = name.startswith("create_fcmp")
    pole = fragile.NEAR_POLE.get(name)

    def hook(*args: Any, **kw: Any) -> Any:
        if tag is not None:
            session.trace.ops.add(tag)
        out = fn(*args, **kw)
        if ub:
            bad = _check_cast(session, args[0], args[1], unsigned)
            if bad is not None and session.options.alternate:  # another value for the unspecified lanes
                data = np.asarray(out.data)
                out = _interp.TensorHandle(np.where(np.broadcast_to(bad, data.shape), ~data, data), out.dtype)
        if layout:
            fragile.layout_fragile(fn, args, kw, out)
            dataflow.layout(fn, args, kw, out)
            return out
        if compare:
            fragile.compare(out, args[0], args[1], session.close_allowance(args[0]))
        else:
            fragile.carry_fragile(out, args)
        if pole is not None and len(args) > pole and isinstance(out, _interp.TensorHandle):
            fragile.near_pole(out, args[pole], session.close_allowance(args[pole]))
        if isinstance(out, _interp.TensorHandle) and dataflow.is_float(out):
            near = dataflow.elementwise(out, args, name, session.above, session.left_range)
            if near is not None:
                session.at_limit(near)
        return out

    return hook


def _check_cast(session: Session, src: Any, dst_type: Any, unsigned: bool) -> np.ndarray | None:
    """Record a float-to-int cast of values out of range (undefined); the lanes, or None."""
    data = np.asarray(src.data)
    if not (data.dtype.kind == "f" or data.dtype == np.uint16):  # uint16 carries bf16
        return None
    vals = dtypes.as_float64(data, dtypes.dtype("bfloat16")) if data.dtype == np.uint16 else data.astype(np.float64)
    bits = dst_type.scalar.primitive_bitwidth
    lo, hi = (0, 2.0**bits) if unsigned else (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1))
    bad = ~np.isfinite(vals) | (np.trunc(vals) < lo) | (np.trunc(vals) >= hi)
    if session.options.poison:  # a masked-out lane's poison, cast: not a result anything observed
        bad &= ~undefined.is_poison(data, src.dtype.scalar)
    if bad.any():
        if session.batch is not None:  # reported program by program, as the sequential run does
            batched.stop("a float-to-int cast of a value out of range (undefined)")
        ex = float(vals[bad].reshape(-1)[0])
        session.trace.ub.append(UBEvent(
            f"float-to-{'u' if unsigned else ''}int{bits} cast of a value out of range",
            session.program, int(bad.sum()), repr(ex), user_line_now()))
        return bad
    return None


def _dot_hook(fn: Callable, session: Session) -> Callable:
    def create_dot(a, b, d, input_precision=None, *rest, **kw):
        kind = "dot"
        if a.dtype.scalar == tl.float32 and b.dtype.scalar == tl.float32:
            prec = str(input_precision).lower() if input_precision is not None else "tf32"
            kind = "dot:ieee" if "ieee" in prec else "dot:tf32"
        elif a.dtype.scalar.primitive_bitwidth <= 16 and a.dtype.scalar.is_floating():
            kind = "dot:lowp"
        session.trace.ops.add(kind)
        out = fn(a, b, d, input_precision, *rest, **kw)
        if isinstance(out, _interp.TensorHandle) and dataflow.is_float(out):
            near = reductions.dot(a, b, d, out, session.above, session.left_range)
            if near is not None:
                session.at_limit(near)
        return out

    return create_dot


def _checked(session: Session, op: str, ptrs: Any, m: np.ndarray | None, mask: Any) -> tuple[Any, Any]:
    """The mask of an access, with its lanes outside every allocation turned off (`Session.check` records
    them), as an array and as the handle the builder takes."""
    fixed = session.check(op, ptrs.data, m, _itemsize(ptrs))
    if fixed is None:
        return m, mask
    return fixed, _interp.TensorHandle(fixed, tl.int1)


def _memory_hooks(current: Callable[[str], Callable], session: Session) -> dict[str, Callable]:
    TensorHandle = _interp.TensorHandle
    check = session.options.check_pointers
    record = session.options.record_stores
    poison = session.options.poison
    memory, trace = session.memory, session.trace
    trace.poisoned = poison
    load, store = current("create_masked_load"), current("create_masked_store")
    nudger = carry.Nudger(session.options.nudge) if session.options.nudge else None
    rmw, cas = current("create_atomic_rmw"), current("create_atomic_cas")

    def create_masked_load(ptrs, mask, other, *rest, **kw):
        m = given = _mask_data(mask)
        if check:
            m, mask = _checked(session, "load", ptrs, m, mask)
        if compat.is_volatile(rest, kw):  # a flag another program sets
            _sync(trace, "volatile load")
        addrs = ptrs.data.astype(np.uint64, copy=False)
        active = full_mask(m, addrs.shape)
        lanes = undefined.undefined_lanes(addrs.shape, given, other, session.other.now)
        if lanes is not None:  # the kernel's mask leaves these lanes undefined
            where = user_line_now()
            trace.undefined[where] = trace.undefined.get(where, 0) + int(lanes.sum())
            if poison:
                other = undefined.poisoned_other(ptrs, _interp._get_np_dtype, TensorHandle)
        out = load(ptrs, mask, other, *rest, **kw)
        if record:
            stored, ovf, decided = memory.load(session.pid, addrs, active, addrs.shape)
            fragile.set_fragile(out, fit(decided, np.shape(out.data)))
        else:
            stored, ovf = None, None
        if dataflow.is_float(out):
            own = dataflow.own_mag(out)
            if active is not None and not active.all():  # masked-out lanes feed no error scale
                own = np.where(fit(active, own.shape), own, 0.0)
            mag = own if stored is None else np.maximum(own, fit(stored, own.shape))
            dataflow.set_shadows(out, mag, fit(ovf, own.shape))
            vals = dataflow.values(out)
            if session.batch is not None:
                _loaded_batch(session, vals, active, out.dtype.scalar)
                return out
            live = vals if active is None else vals[fit(active, vals.shape)]
            session.edge = max(session.edge, dataflow.edge_ratio(live, out.dtype.scalar))
            finite = np.abs(live[np.isfinite(live)])
            if finite.size:
                session.loaded = max(session.loaded, float(finite.max()))
        return out

    def create_masked_store(ptrs, value, mask, *rest, **kw):
        m = _mask_data(mask)
        if check:
            m, mask = _checked(session, "store", ptrs, m, mask)
        if nudger is not None:  # a carried run: the kernel's admissible rounding on what it stores
            value = nudger.nudge(value, session.loaded)
        value = session.transform_store(ptrs.data, value, m)
        if record:
            addrs = ptrs.data.astype(np.uint64, copy=False)
            memory.store(session.pid, addrs, full_mask(m, addrs.shape), fit(dataflow.mag_of(value), addrs.shape),
                         fit(dataflow.ovf_of(value), addrs.shape), session.edge, eps=dataflow.eps_of(value),
                         loaded=session.loaded, fragile=_decided(session, value, addrs.shape))
        return store(ptrs, value, mask, *rest, **kw)

    def create_atomic_rmw(op, ptr, val, mask, *rest, **kw):
        trace.ops.add("atomic")
        trace.atomics = True
        m = _mask_data(mask)
        if check:
            m, mask = _checked(session, "atomic", ptr, m, mask)
        opname = str(op).rsplit(".", 1)[-1].lower()
        if "xchg" in opname:
            _sync(trace, "atomic_xchg")
        elif not dataflow.is_float(val):
            _sync(trace, f"integer atomic_{opname}")
        old = rmw(op, ptr, val, mask, *rest, **kw)  # (bf16: the shim under this layer)
        if record:
            addrs = ptr.data.astype(np.uint64, copy=False)
            mag = ovf = None
            if dataflow.is_float(val):
                mv = dataflow.float_mag(val)
                mag = np.maximum(fit(mv, addrs.shape), fit(dataflow.own_mag(old), addrs.shape)) \
                    if isinstance(old, TensorHandle) and dataflow.is_float(old) else mv
                carried = dataflow.ovf_of(val)  # damaged upstream of the atomic
                ovf = fit(carried, addrs.shape) if carried is not None else None
                if "add" in opname and isinstance(old, TensorHandle):
                    with np.errstate(all="ignore"):
                        a, b = dataflow.values(old), dataflow.values(val)
                        new = fit(a, addrs.shape) + fit(b, addrs.shape)
                        made = np.isinf(new) & np.isfinite(fit(a, addrs.shape)) \
                            & np.isfinite(fit(b, addrs.shape))
                    near = dataflow.near_limit(new, dataflow.scalar_type(val), None,
                                               dataflow.type_eps(dataflow.scalar_type(val)), session.above)
                    if near is not None:
                        made |= near
                        session.at_limit(near)
                    ovf = made if ovf is None else ovf | made
            memory.store(session.pid, addrs, full_mask(m, addrs.shape), fit(mag, addrs.shape), ovf,
                         session.edge, atomic=True, eps=max(dataflow.eps_of(val), dataflow.type_eps(val.dtype.scalar))
                         if dataflow.is_float(val) else 0.0, loaded=session.loaded,
                         fragile=_decided(session, val, addrs.shape))
        return old

    def create_atomic_cas(ptr, cmp, val, *rest, **kw):
        trace.ops.add("atomic")
        trace.atomics = True
        _sync(trace, "atomic_cas")
        if check:
            fixed = session.check("atomic", ptr.data, None, _itemsize(ptr))
            if fixed is not None:
                raise RuntimeError(f"atomic_cas outside every allocation: {trace.violations[-1].where}")
        if record:
            addrs = ptr.data.astype(np.uint64, copy=False)
            memory.store(session.pid, addrs, None, None, None, session.edge, atomic=True)
        return cas(ptr, cmp, val, *rest, **kw)

    return {"create_masked_load": create_masked_load, "create_masked_store": create_masked_store,
            "create_atomic_rmw": create_atomic_rmw, "create_atomic_cas": create_atomic_cas}


def _loaded_batch(session: Session, vals: np.ndarray, active: np.ndarray | None, dtype: Any) -> None:
    """A batch's load (one lane set per program): each program's input edge ratio and largest finite
    loaded magnitude, as `create_masked_load` keeps them for one program."""
    n = session.batch_size()
    rows = vals.reshape(n, -1)
    live = None if active is None else np.broadcast_to(active, vals.shape).reshape(n, -1)
    session.edge = np.maximum(session.edge, dataflow.edge_ratios(rows, dtype, live))
    finite = np.isfinite(rows) if live is None else live & np.isfinite(rows)
    top = np.where(finite, np.abs(rows), -1.0).max(axis=1) if rows.shape[1] else np.full(n, -1.0)
    session.loaded = np.where(top >= 0, np.maximum(session.loaded, top), session.loaded)


def _sync(trace: Trace, how: str) -> None:
    if how not in trace.sync:
        trace.sync.append(how)


def _decided(session: Session, value: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """Where a stored value is fragile: decided by a comparison within tolerance, or stored after a branch on
    one (`Session.sway`)."""
    own = fit(fragile.fragile_of(value), shape)
    swayed = session.swayed_lanes(shape)
    if swayed is None:
        return own
    return swayed if own is None else own | swayed
