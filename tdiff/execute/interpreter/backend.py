"""The interpreter backend: Triton's numpy interpreter, selected per call, with instrumentation.

Beyond running the kernel, the instrumented interpreter
- stops (and reports) loads and stores outside every allocation (`memory`),
- records which program stored each element and, within a launch, which programs read and wrote
  it, so that a data race between programs is seen in one run in any order (`memory`),
- follows the magnitude of the values flowing into each result, the per-element scale of tdiff's
  tolerance, and where an overflow happened (`dataflow`),
- notes undefined float-to-int casts and the kinds of arithmetic the kernel used (for tolerances),
- runs what the compiler accepts and stock TRITON_INTERPRET=1 does not (`shims`, counted),
- and can run programs in another order or only a sample of them.
"""

from __future__ import annotations

import contextlib
import random
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import triton.language as tl
from triton.runtime import interpreter as _interp
from triton.runtime.jit import JITFunction

from ... import compat
from ...core import dtypes, kernels, limitations
from ...core.backend_spec import BackendSpec
from ...core.case import Case, strided_index
from ...core.outcome import ErrorInfo, Outcome, Trace, UBEvent
from ..backends.base import Target, error_info, user_line_now
from ..plan import LaunchPlan, LiveArgs, capture_returned, deterministic_empty, grid3, launch_record, route_launches
from . import coverage, dataflow, libdevice, shims, undefined, unspecified
from .memory import Memory, Region, violation
from .scope import interpreting, rewritten

Program = tuple[int, int, int]

TRANSCENDENTAL = ("exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "rsqrt", "erf", "precise_sqrt")
FLOAT_ARITH = ("fadd", "fsub", "fmul", "fdiv", "frem", "fma", "precise_divf")


class KernelRunError(RuntimeError):
    """An exception raised while interpreting one program."""

    def __init__(self, message: str, program: Program) -> None:
        super().__init__(message)
        self.program = program


@dataclass
class InterpreterOptions:
    order: str = "forward"  # "forward", "reversed" or "shuffled"
    seed: int = 0
    programs: Callable[[Program], Sequence[Program]] | None = None  # sampling: grid -> programs to run
    check_pointers: bool = True
    record_stores: bool = True
    poison: bool = True  # fill masked-out lanes of a load without other= with a poison value (`undefined`)
    alternate: bool = False  # give lanes whose result Triton leaves unspecified another value (`unspecified`)


def all_programs(grid: Program) -> list[Program]:
    """Every program of a grid in launch order (x fastest), as the GPU numbers them."""
    gx, gy, gz = grid
    return [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]


def linear(p: Program, grid: Program) -> int:
    return p[0] + grid[0] * (p[1] + grid[1] * p[2])


def sample_programs(grid: Program, size: int, seed: int = 0) -> list[Program]:
    """Programs worth interpreting in a large grid: the corners (first, last), programs on the last
    face of each axis (they own the masked tails), and `size` random ones."""
    gx, gy, gz = grid
    rng = random.Random(hash((grid, seed)) & 0xFFFFFFFF)
    chosen: set[Program] = set()
    for x in {0, gx - 1}:
        for y in {0, gy - 1}:
            for z in {0, gz - 1}:
                chosen.add((x, y, z))
    for axis, n in enumerate(grid):
        if n > 1:
            for _ in range(2):
                p = [rng.randrange(gx), rng.randrange(gy), rng.randrange(gz)]
                p[axis] = n - 1
                chosen.add((p[0], p[1], p[2]))
    total = gx * gy * gz
    for _ in range(min(size, total)):
        i = rng.randrange(total)
        chosen.add((i % gx, (i // gx) % gy, i // (gx * gy)))
    return sorted(chosen, key=lambda p: linear(p, grid))


@dataclass
class Session:
    """State of one interpreted run: memory, options and what the instrumentation recorded."""

    options: InterpreterOptions
    plan: LaunchPlan | None = None
    trace: Trace = field(default_factory=Trace)
    memory: Memory = field(default_factory=Memory)
    launches: list = field(default_factory=list)
    live: LiveArgs = field(default_factory=LiveArgs)
    grid: Program = (1, 1, 1)
    program: Program = (0, 0, 0)
    edge: float = 0.0  # the running program's largest input edge ratio (see dataflow.edge_ratio), or 1 once a
    # value it computed came to its dtype's limit (dataflow.near_limit)
    loaded: float = 0.0  # the running program's largest finite loaded magnitude
    above: float | None = None  # a float64 run on upcast inputs: values beyond the case's dtypes overflow
    other: undefined.OtherGiven = field(default_factory=undefined.OtherGiven)  # the load being built got other=

    def __post_init__(self) -> None:
        # allocations on a GPU are copied to the host per launch: only those host copies are valid memory
        if self.plan is not None and self.plan.device.type == "cpu":
            for name, alloc in self.plan.allocations.items():
                self.memory.regions.append(Region(name, alloc.base, alloc.nbytes, alloc.arg.dt.itemsize, True,
                                                  buffer=alloc.buffer.data_ptr(), view=alloc.arg.in_view()))
        self.memory.line = user_line_now

    def at_limit(self) -> None:
        """The running program computed a value at the limit of its dtype's range."""
        self.edge = max(self.edge, 1.0)

    def close_allowance(self, operand: Any) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None:
        """How far apart two compared values of `operand`'s type may be and still compare either way on
        another backend: the tolerance of the operations run so far, by the comparison's own formula
        (`tolerance.allowed`; `dataflow.compare` allows each side its share, twice it); None where those
        operations are exact (every backend computes the same bits)."""
        from ...core.tolerance import allowed, from_ops

        t = dataflow.scalar_type(operand)
        name = "bfloat16" if t == tl.bfloat16 else {16: "float16", 64: "float64"}.get(
            getattr(t, "primitive_bitwidth", 32), "float32")
        tol = from_ops(self.trace.ops, name, reference=True)
        if tol.exact:
            return None
        return lambda a, b, m: allowed(a, b, tol.rtol, tol.atol, tol.scale, m)

    @property
    def regions(self) -> list[Region]:
        return self.memory.regions

    @property
    def pid(self) -> int:
        return linear(self.program, self.grid)

    def add_launch_tensor(self, t: torch.Tensor, label: str) -> None:
        self.add_launch_storage(t.untyped_storage(), label, t.element_size())

    def add_launch_storage(self, storage: Any, label: str, itemsize: int = 1) -> None:
        base = storage.data_ptr()
        if any(r.guarded and r.buffer == base for r in self.regions):
            return  # a case input: only its storage, not its guard bands, is valid memory
        if self.memory.region_of(base) is None and storage.nbytes() > 0:
            self.regions.append(Region(label, base, storage.nbytes(), itemsize, False))

    def locate(self, address: int) -> str:
        if self.plan is not None:
            where = self.plan.locate(address)
            if self.plan.device.type != "cpu" and where != "outside every allocation":
                return f"{where} on {self.plan.device} (a device address the interpreter cannot read)"
            return where
        return "outside every allocation"

    def check(self, op: str, ptrs: np.ndarray, mask: np.ndarray | None, itemsize: int) -> np.ndarray | None:
        """Return a mask with bad addresses switched off (None if all are good) and record them."""
        addrs = ptrs.astype(np.uint64, copy=False)
        active = _full_mask(mask, addrs.shape)
        bad = self.memory.bad_lanes(addrs, active, itemsize)
        if bad is None:
            return None
        first = int(addrs[bad].reshape(-1)[0])
        self.trace.violations.append(violation(op, self.program, addrs, bad, self.locate(first), user_line_now()))
        return (np.ones(addrs.shape, bool) if active is None else active) & ~bad

    def transform_store(self, ptrs: np.ndarray, value: Any, mask: np.ndarray | None) -> Any:
        """The value a store writes; identity here, overridden to inject faults in tests."""
        return value


# ------------------------------------------------------------------ instrumentation

def _full_mask(mask: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """`mask` broadcast to `shape` (None stays None)."""
    if mask is None or mask.shape == shape:
        return mask
    return np.broadcast_to(mask, shape)


def _mask_data(mask: Any) -> np.ndarray | None:
    return None if mask is None else np.asarray(mask.data, dtype=bool)


def _itemsize(ptrs: Any) -> int:
    return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)


def _shaped(x: np.ndarray | None, shape: tuple) -> np.ndarray | None:
    if x is None or x.shape == shape:
        return x
    try:
        return np.broadcast_to(x, shape)
    except ValueError:
        return np.full(shape, x.max() if x.size else 0, dtype=x.dtype)


@contextlib.contextmanager
def instrumented(builder: Any, session: Session) -> Iterator[None]:
    """Wrap the interpreter's builder (and reductions) with `session`'s hooks for the body."""
    changes = _install(builder, session)
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
# operations with a class of their own (see tdiff.op_classes)
_OP_TAGS.update({"create_fma": "fma", "create_precise_divf": "div_rn", "create_precise_sqrt": "sqrt_rn",
                 "create_fdiv": "fdiv"})
_NOT_VALUES = ("get_grid", "get_null", "set_grid", "create_get_program_id", "create_get_num_programs",
               "create_make_range", "create_print", "create_assert", "create_assume", "create_barrier",
               "create_make_block_ptr", "create_advance", "create_make_tensor_descriptor", "create_addptr",
               "create_histogram")


def _value_methods(cls: type) -> list[str]:
    names = []
    for name in dir(cls):
        if not (name.startswith("create_") or name.startswith("get_")) or name.endswith("_ty"):
            continue
        if name.startswith(_NOT_VALUES) or name in dataflow.SPECIAL or not callable(getattr(cls, name)):
            continue
        names.append(name)
    return names


def _install(builder: Any, session: Session) -> list[tuple[object, str, Any]]:
    """Set instance attributes on the interpreter's builder that wrap the class methods, layer by
    layer (shims, then op tags and dataflow, then memory); and wrap reductions and scans.

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

    # 1. shims: what the compiler accepts and the stock interpreter does not (a reproducer installs the same)
    shims.install_builder(builder, put, trace.shims, poison=session.options.poison)
    shims.install_reductions(_interp, put, trace.shims)

    # 1b. results Triton leaves unspecified: recorded (and, for a verdict rerun, changed)
    def record(key: str, n: int) -> None:
        trace.unspecified[key] = trace.unspecified.get(key, 0) + n

    trace.alternate = session.options.alternate
    for name, fn in unspecified.hooks(current, record, session.options.alternate).items():
        put(builder, name, fn)

    # 2. values: op classes (for tolerances), undefined casts, dataflow magnitudes
    for name in _value_methods(cls):
        put(builder, name, _value_hook(name, current(name), session))
    put(builder, "create_dot", _dot_hook(current("create_dot"), session))

    # 3. memory: bounds, writers, races, stored magnitudes
    for name, hook in _memory_hooks(current, session).items():
        put(builder, name, hook)
    # whether a load was given other= (the interpreter's frontend drops a falsy single-element one)
    session.other.install(put)

    # libdevice: stubs under the interpreter; computed on the values instead (shim)
    if shims.ENABLED[shims.LIBDEVICE]:
        _install_libdevice(put, session)

    # reductions and scans bypass the builder: tag and follow them at the language level
    for mod in (tl, tl.core):
        for attr, tag in (("reduce", "reduce"), ("associative_scan", "scan")):
            put(mod, attr, _reduce_hook(getattr(mod, attr), tag, session))
    return changes


def _install_libdevice(put: Callable, session: Session) -> None:
    def after(h: Any, operands: list, rule: str) -> None:
        session.trace.ops.add("transcendental")
        if dataflow.elementwise(h, operands, f"create_{rule}", session.above):
            session.at_limit()

    def dispatch(name: str, *args: Any, **_: Any) -> Any:
        return libdevice.compute_libdevice(name, args, session.trace.shims, after)

    libdevice.install_libdevice(put, dispatch)


def _value_hook(name: str, fn: Callable, session: Session) -> Callable:
    tag = _OP_TAGS.get(name)
    layout = name in dataflow.LAYOUT
    ub = name in ("create_fp_to_si", "create_fp_to_ui")
    unsigned = name.endswith("ui")
    compare = name.startswith("create_fcmp")
    pole = dataflow.NEAR_POLE.get(name)

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
            dataflow.layout(fn, args, kw, out)
            return out
        if compare:
            dataflow.compare(out, args[0], args[1], session.close_allowance(args[0]))
        else:
            dataflow.carry_fragile(out, args)
        if pole is not None and len(args) > pole and isinstance(out, _interp.TensorHandle):
            dataflow.near_pole(out, args[pole], session.close_allowance(args[pole]))
        if isinstance(out, _interp.TensorHandle) and dataflow.is_float(out) \
                and dataflow.elementwise(out, args, name, session.above):
            session.at_limit()
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
        if isinstance(out, _interp.TensorHandle) and dataflow.is_float(out) \
                and dataflow.dot(a, b, d, out, session.above):
            session.at_limit()
        return out

    return create_dot


def _memory_hooks(current: Callable[[str], Callable], session: Session) -> dict[str, Callable]:
    TensorHandle = _interp.TensorHandle
    check = session.options.check_pointers
    record = session.options.record_stores
    poison = session.options.poison
    memory, trace = session.memory, session.trace
    trace.poisoned = poison
    load, store = current("create_masked_load"), current("create_masked_store")
    rmw, cas = current("create_atomic_rmw"), current("create_atomic_cas")

    def create_masked_load(ptrs, mask, other, *rest, **kw):
        m = given = _mask_data(mask)
        if check:
            fixed = session.check("load", ptrs.data, m, _itemsize(ptrs))
            if fixed is not None:
                m = fixed
                mask = TensorHandle(fixed, tl.int1)
        if compat.is_volatile(rest, kw):  # a flag another program sets
            _sync(trace, "volatile load")
        addrs = ptrs.data.astype(np.uint64, copy=False)
        active = _full_mask(m, addrs.shape)
        lanes = undefined.undefined_lanes(addrs.shape, given, other, session.other.now)
        if lanes is not None:  # the kernel's mask leaves these lanes undefined
            where = user_line_now()
            trace.undefined[where] = trace.undefined.get(where, 0) + int(lanes.sum())
            if poison:
                other = undefined.poisoned_other(ptrs, _interp._get_np_dtype, TensorHandle)
        out = load(ptrs, mask, other, *rest, **kw)
        if record:
            stored, ovf, fragile = memory.load(session.pid, addrs, active, addrs.shape)
            dataflow.set_fragile(out, _shaped(fragile, np.shape(out.data)))
        else:
            stored, ovf = None, None
        if dataflow.is_float(out):
            own = dataflow.own_mag(out)
            if active is not None and not active.all():  # masked-out lanes feed no error scale
                own = np.where(_shaped(active, own.shape), own, 0.0)
            mag = own if stored is None else np.maximum(own, _shaped(stored, own.shape))
            dataflow.set_shadows(out, mag, _shaped(ovf, own.shape))
            vals = dataflow.values(out)
            live = vals if active is None else vals[_shaped(active, vals.shape)]
            session.edge = max(session.edge, dataflow.edge_ratio(live, out.dtype.scalar))
            finite = np.abs(live[np.isfinite(live)])
            if finite.size:
                session.loaded = max(session.loaded, float(finite.max()))
        return out

    def create_masked_store(ptrs, value, mask, *rest, **kw):
        m = _mask_data(mask)
        if check:
            fixed = session.check("store", ptrs.data, m, _itemsize(ptrs))
            if fixed is not None:
                m = fixed
                mask = TensorHandle(fixed, tl.int1)
        value = session.transform_store(ptrs.data, value, m)
        if record:
            addrs = ptrs.data.astype(np.uint64, copy=False)
            memory.store(session.pid, addrs, _full_mask(m, addrs.shape), _shaped(dataflow.mag_of(value), addrs.shape),
                         _shaped(dataflow.ovf_of(value), addrs.shape), session.edge, eps=dataflow.eps_of(value),
                         loaded=session.loaded, fragile=_shaped(dataflow.fragile_of(value), addrs.shape))
        return store(ptrs, value, mask, *rest, **kw)

    def create_atomic_rmw(op, ptr, val, mask, *rest, **kw):
        trace.ops.add("atomic")
        trace.atomics = True
        m = _mask_data(mask)
        if check:
            fixed = session.check("atomic", ptr.data, m, _itemsize(ptr))
            if fixed is not None:
                m = fixed
                mask = TensorHandle(fixed, tl.int1)
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
                mv = dataflow.mag_of(val)
                mag = np.maximum(_shaped(mv, addrs.shape), _shaped(dataflow.own_mag(old), addrs.shape)) \
                    if isinstance(old, TensorHandle) and dataflow.is_float(old) else mv
                carried = dataflow.ovf_of(val)  # damaged upstream of the atomic
                ovf = _shaped(carried, addrs.shape) if carried is not None else None
                if "add" in opname and isinstance(old, TensorHandle):
                    with np.errstate(all="ignore"):
                        a, b = dataflow.values(old), dataflow.values(val)
                        new = _shaped(a, addrs.shape) + _shaped(b, addrs.shape)
                        made = np.isinf(new) & np.isfinite(_shaped(a, addrs.shape)) \
                            & np.isfinite(_shaped(b, addrs.shape))
                    near = dataflow.near_limit(new, dataflow.scalar_type(val), None,
                                               dataflow.type_eps(dataflow.scalar_type(val)), session.above)
                    if near is not None:
                        made |= near
                        session.at_limit()
                    ovf = made if ovf is None else ovf | made
            memory.store(session.pid, addrs, _full_mask(m, addrs.shape), _shaped(mag, addrs.shape), ovf,
                         session.edge, atomic=True, eps=max(dataflow.eps_of(val), dataflow.type_eps(val.dtype.scalar))
                         if dataflow.is_float(val) else 0.0, loaded=session.loaded,
                         fragile=_shaped(dataflow.fragile_of(val), addrs.shape))
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


def _sync(trace: Trace, how: str) -> None:
    if how not in trace.sync:
        trace.sync.append(how)


def _reduce_hook(inner: Callable, tag: str, session: Session) -> Callable:
    scan = tag == "scan"

    def hook(input, axis=None, combine_fn=None, *rest, **kw):
        session.trace.ops.add(tag)
        keep_dims = bool(kw.get("keep_dims", rest[0] if (rest and not scan) else False))
        ins = input if isinstance(input, tuple) else (input,)
        made: list[Any] = []

        def reduce(given: tuple) -> tuple:
            for g, i in zip(given, ins):  # (bf16 inputs widened to fp32 by the shim: their shadows go along)
                if g is not i:
                    _keep_shadows(g, i)
            out = inner(given if isinstance(input, tuple) else given[0], axis, combine_fn, *rest, **kw)
            made.append(out)
            outs = out if isinstance(out, tuple) else (out,)
            _follow_reduction(session, given, outs, axis, keep_dims, combine_fn, scan)
            return outs

        # bf16 carried as bits: reduced on the values in fp32 and rounded back (shim)
        narrowed = shims.bf16_reduce(reduce, ins, session.trace.shims)
        if narrowed is None:
            reduce(ins)
            return made[0]
        computed = made[0] if isinstance(made[0], tuple) else (made[0],)
        for new, old in zip(narrowed, computed):
            if new is not old:
                _keep_shadows(new, old)
        return narrowed if isinstance(made[0], tuple) else narrowed[0]

    return hook


def _follow_reduction(session: Session, ins: tuple, outs: tuple, axis: Any, keep_dims: bool, combine_fn: Any,
                      scan: bool) -> None:
    """Dataflow through a reduction or scan: error scales, fragile results, near-ties among extremes."""
    grow = combine_fn is not tl.standard._elementwise_max and combine_fn is not tl.standard._elementwise_min \
        and "arg" not in getattr(getattr(combine_fn, "fn", combine_fn), "__name__", "")
    for i, o in zip(ins, outs):
        if dataflow.reduction(i, o, axis, keep_dims, grow, scan=scan, above=session.above):
            session.at_limit()
    for o in outs:  # (an argmax's index depends on every input: each output on each input)
        for i in ins:
            dataflow.reduce_fragile(i, o, axis, keep_dims, scan=scan)
    extreme = _extreme(combine_fn)
    if extreme is not None and not scan:  # near-ties among the extremes: which lane holds it may change
        for o in outs:
            dataflow.extreme_fragile(ins[0], o, axis, keep_dims, extreme == "max",
                                     session.close_allowance(ins[0].handle))


def _keep_shadows(new: Any, old: Any) -> None:
    """A retyped tensor keeps the dataflow shadows (magnitudes, overflow) of the one it was made from."""
    h = old.handle
    dataflow.set_shadows(new.handle, getattr(h, dataflow.MAG, None), getattr(h, dataflow.OVF, None))


def _extreme(combine_fn: Any) -> str | None:
    """"max" or "min" for the combine functions of tl.max / tl.min / tl.argmax / tl.argmin, else None."""
    if combine_fn is tl.standard._elementwise_max:
        return "max"
    if combine_fn is tl.standard._elementwise_min:
        return "min"
    name = getattr(getattr(combine_fn, "fn", combine_fn), "__name__", "")
    if "arg" in name:
        return "max" if "max" in name else "min" if "min" in name else None
    return None


# ------------------------------------------------------------------ one launch

def interpret_launch(session: Session, jit: JITFunction, args: tuple, grid: Any, warmup: bool,
                     kwargs: dict) -> None:
    """Run one `kernel[grid](*args, **kwargs)` in the interpreter, program by program."""
    if warmup:
        return None
    fn = jit.fn
    names = kernels.arg_names(jit)
    options = {k: v for k, v in kwargs.items() if k not in names}
    kwargs = {k: v for k, v in kwargs.items() if k in names}
    bound = kernels.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    call_args = dict(bound.arguments)
    g = grid3(grid(call_args) if callable(grid) else grid)
    s = session
    s.live.add(len(s.launches), args, kwargs)
    s.launches.append(launch_record(jit, g, args, kwargs, s.plan, options))
    constexprs = set(kernels.constexpr_names(jit))
    host_args, copy_back = _to_host(call_args)
    for name, value in host_args.items():
        if isinstance(value, torch.Tensor):
            s.add_launch_tensor(value, f"<argument {name} of launch {len(s.launches) - 1}>")
        elif hasattr(value, "data_ptr") and callable(getattr(value, "untyped_storage", None)):
            # a tensor-like wrapper (FlagGems' StridedBuffer): the memory it points into is its storage's
            dt = getattr(value, "dtype", None)
            s.add_launch_storage(value.untyped_storage(), f"<argument {name} of launch {len(s.launches) - 1}>",
                                 getattr(dt, "itemsize", 1))
    s.memory.begin_launch(len(s.launches) - 1)
    programs = all_programs(g)
    if not programs:
        s.trace.empty_launches += 1
    if s.options.programs is not None:
        chosen = set(s.options.programs(g))
        programs = [p for p in programs if p in chosen]
        s.trace.sampled = s.trace.sampled or len(programs) < g[0] * g[1] * g[2]
    if s.options.order == "reversed":
        programs.reverse()
    elif s.options.order == "shuffled":
        random.Random(s.options.seed).shuffle(programs)
    s.grid = g
    builder = _interp.interpreter_builder
    with interpreting(), instrumented(builder, s), np.errstate(all="ignore"), warnings.catch_warnings(), \
            shims.counting(s.trace.shims):
        warnings.simplefilter("ignore", RuntimeWarning)
        run_fn = rewritten(fn)
        args_cvt = shims.convert_args(host_args, constexprs, _interp._implicit_cvt, s.trace.shims)
        builder.set_grid_dim(*g)
        for p in programs:
            s.program = p
            s.edge = s.loaded = 0.0
            builder.set_grid_idx(*p)
            try:
                run_fn(**args_cvt)
            except Exception as exc:
                raise KernelRunError(f"{type(exc).__name__}: {exc}", p) from exc
            s.trace.programs_run.append(p)
    for dev, host in copy_back:
        dev.copy_(host)
    return None


def _to_host(args: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[Any, Any]]]:
    """Device tensors replaced by host copies of their whole storages (layout kept)."""
    out: dict[str, Any] = {}
    back: list[tuple[Any, Any]] = []
    storages: dict[int, Any] = {}
    for name, value in args.items():
        if isinstance(value, torch.Tensor) and value.device.type != "cpu":
            st = value.untyped_storage()
            key = st.data_ptr()
            if key not in storages:
                host_st = st.cpu()
                storages[key] = host_st
                back.append((st, host_st))
            host = torch.empty(0, dtype=value.dtype).set_(storages[key], value.storage_offset(),
                                                           value.size(), value.stride())
            out[name] = host
        else:
            out[name] = value
    return out, back


# ------------------------------------------------------------------ the backend

class InterpreterBackend:
    """Runs a case through the instrumented interpreter, on CPU tensors."""

    def __init__(self, spec: BackendSpec | None = None, options: InterpreterOptions | None = None) -> None:
        self.spec = spec or BackendSpec("interpreter")
        self.name = self.spec.label
        self.options = options or InterpreterOptions(order=self.spec.order,
                                                     check_pointers=self.spec.check_pointers,
                                                     poison=self.spec.masked == "undefined",
                                                     alternate=self.spec.unspecified == "alternate")
        if self.spec.programs is not None:
            chosen = tuple(self.spec.programs)
            self.options.programs = lambda grid: chosen
        elif self.spec.sample is not None:
            threshold, size, seed = self.spec.sample

            def sampled(grid: Program) -> Sequence[Program]:
                if grid[0] * grid[1] * grid[2] <= threshold:
                    return all_programs(grid)
                return sample_programs(grid, size, seed)

            self.options.programs = sampled

    def make_session(self, plan: LaunchPlan) -> Session:
        session = Session(self.options, plan)
        if self.spec.upcast:  # a float64 run: a value beyond the case's own float dtypes would have overflowed
            tops = [float(a.dt.max) for a in plan.case.tensors().values() if a.dt.is_float and a.dt.bits < 64]
            session.above = min(tops) if tops else None
        return session

    def run(self, target: Target, case: Case) -> Outcome:
        t0 = time.perf_counter()
        outcome = Outcome(self.name)
        if kernels.interpreted_at_import(target.kernel):
            outcome.error = ErrorInfo("setup", "TRITON_INTERPRET=1 was set when this kernel was imported, so "
                                      "@triton.jit made an interpreter-only kernel that tdiff cannot instrument in "
                                      "this process: run with isolation='process' (the default; its workers "
                                      "import kernels without TRITON_INTERPRET), or unset TRITON_INTERPRET")
            return outcome
        try:
            plan = LaunchPlan(case, self.spec.device or "cpu", upcast=self.spec.upcast)
        except Exception as exc:
            outcome.error = error_info(exc, "setup")
            return outcome
        session = self.make_session(plan)
        kernel = kernels.rebuild(target.kernel, kernels.jit_function(target.kernel), case.config)

        def handler(jit, _original, args, grid, warmup, kwargs):
            return interpret_launch(session, jit, args, grid, warmup, kwargs)

        try:
            with deterministic_empty(), route_launches(handler), \
                    coverage.recording(session.trace.lines):  # type: ignore[arg-type]
                returned = target.launch(kernel, **plan.inputs)
        except Exception as exc:
            outcome.error = error_info(exc)
            known = limitations.match(exc)
            if known is not None:
                outcome.error.kind = "limitation"
                outcome.error.limitation = known.name
            returned = None
        outcome.returned_args = session.live.locate(returned, plan)
        outcome.storages = plan.snapshot()
        outcome.returned = capture_returned(returned)
        outcome.launches = session.launches
        finish_trace(session, returned)
        session.trace.executable = {k: coverage.executable(k) for k in session.trace.lines}
        outcome.trace = session.trace
        outcome.seconds = time.perf_counter() - t0
        return outcome


def finish_trace(session: Session, returned: Any) -> None:
    """Move per-region maps into the trace, keyed by input name or returned path."""
    trace = session.trace
    trace.races = list(session.memory.races)
    by_base = {r.base: r for r in session.regions}

    def maps(r: Region, key: str, index: np.ndarray | None = None, shape: tuple | None = None) -> None:
        def pick(a: np.ndarray) -> np.ndarray:
            return a if index is None else a[index.reshape(-1)].reshape(shape)

        if r.writers is not None:
            trace.writers[key] = pick(r.writers)
            trace.conflicts[key] = r.conflicts
        if r.mag is not None:
            scale = r.mag if r.adds is None else r.mag * np.sqrt(np.maximum(r.adds, 1))
            trace.scales[key] = pick(scale)
            trace.edges[key] = pick(r.edge) if r.edge is not None else pick(np.zeros(r.size))
            if r.loaded is not None:
                trace.loaded[key] = pick(r.loaded)
        if r.ovf is not None and r.ovf.any():
            trace.overflow[key] = pick(r.ovf)
        if r.fragile is not None and r.fragile.any():
            trace.fragile[key] = pick(r.fragile)
        if r.eps:
            trace.precision[key] = r.eps

    for r in session.regions:
        if r.guarded:
            maps(r, r.name)
            if r.outside is not None and r.outside_first is not None:
                trace.outside_reads[r.name] = (int(r.outside.sum()), *r.outside_first)
    returned_regions: set[int] = set()

    def visit(value: Any, path: str) -> None:
        if isinstance(value, torch.Tensor):
            r = by_base.get(value.untyped_storage().data_ptr())
            if r is not None and value.numel() > 0:
                returned_regions.add(id(r))
                idx = strided_index(tuple(value.shape), value.stride(), value.storage_offset())
                maps(r, path, idx, tuple(value.shape))
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                visit(v, f"{path}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                visit(v, f"{path}[{k!r}]")

    visit(returned, "returned")
    for r in session.regions:
        if not r.guarded and r.writers is not None:
            written = int(np.count_nonzero(r.writers >= 0))
            if written:
                trace.scratch.append((r.name, written, id(r) in returned_regions or r.read_back))
