"""The interpreter backend: Triton's numpy interpreter, selected per call, with instrumentation.

Beyond running the kernel, the instrumented interpreter records which program stored each
element, stops (and reports) loads and stores outside every allocation, notes undefined
float-to-int casts and the kinds of arithmetic the kernel used (for tolerances), and can run
programs in another order or only a sample of them.
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

from .. import dtypes, kernels
from ..case import Case, strided_index
from ..outcome import Outcome, Trace, UBEvent, Violation
from ..plan import (
    LaunchPlan,
    LiveArgs,
    capture_returned,
    deterministic_empty,
    grid3,
    launch_record,
    route_launches,
)
from .base import BackendSpec, Target, error_info, user_line_now
from .interpret_scope import interpreting, rewritten

Program = tuple[int, int, int]

TRANSCENDENTAL = ("exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "rsqrt", "erf", "precise_sqrt")
FLOAT_ARITH = ("fadd", "fsub", "fmul", "fdiv", "frem", "fma", "precise_divf")


class KernelRunError(RuntimeError):
    """An exception raised while interpreting one program."""

    def __init__(self, message: str, program: Program) -> None:
        super().__init__(message)
        self.program = program


@dataclass
class Region:
    name: str
    base: int
    nbytes: int
    itemsize: int
    guarded: bool  # a case allocation with guard bands around it
    buffer: int = 0  # for guarded regions: address of the whole buffer (guard bands included)
    writers: np.ndarray | None = None
    conflicts: int = 0


@dataclass
class InterpreterOptions:
    order: str = "forward"  # "forward", "reversed" or "shuffled"
    seed: int = 0
    programs: Callable[[Program], Sequence[Program]] | None = None  # sampling: grid -> programs to run
    check_pointers: bool = True
    record_stores: bool = True


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
    """State of one interpreted run: regions, options and what the instrumentation recorded."""

    options: InterpreterOptions
    plan: LaunchPlan | None = None
    trace: Trace = field(default_factory=Trace)
    regions: list[Region] = field(default_factory=list)
    launches: list = field(default_factory=list)
    live: LiveArgs = field(default_factory=LiveArgs)
    grid: Program = (1, 1, 1)
    program: Program = (0, 0, 0)

    def __post_init__(self) -> None:
        # allocations on a GPU are copied to the host per launch: only those host copies are valid memory
        if self.plan is not None and self.plan.device.type == "cpu":
            for name, alloc in self.plan.allocations.items():
                self.regions.append(Region(name, alloc.base, alloc.nbytes, alloc.arg.dt.itemsize, True,
                                           buffer=alloc.buffer.data_ptr()))

    # -- regions ---------------------------------------------------------
    def region_of(self, storage_ptr: int) -> Region | None:
        for r in self.regions:
            if r.base <= storage_ptr < r.base + max(r.nbytes, 1):
                return r
        return None

    def add_launch_tensor(self, t: torch.Tensor, label: str) -> None:
        base = t.untyped_storage().data_ptr()
        if any(r.guarded and r.buffer == base for r in self.regions):
            return  # a case input: only its storage, not its guard bands, is valid memory
        if self.region_of(base) is None and t.untyped_storage().nbytes() > 0:
            self.regions.append(Region(label, base, t.untyped_storage().nbytes(), t.element_size(), False))

    def locate(self, address: int) -> str:
        if self.plan is not None:
            where = self.plan.locate(address)
            if self.plan.device.type != "cpu" and where != "outside every allocation":
                return f"{where} on {self.plan.device} (a device address the interpreter cannot read)"
            return where
        return "outside every allocation"

    # -- checks ------------------------------------------------------------
    def check(self, op: str, ptrs: np.ndarray, mask: np.ndarray | None, itemsize: int) -> np.ndarray | None:
        """Return a mask with bad addresses switched off (None if all are good) and record them."""
        addrs = ptrs.astype(np.uint64, copy=False)
        active = _full_mask(mask, addrs.shape)
        live = addrs if active is None else addrs[active]
        if live.size == 0:
            return None
        lo, hi = int(live.min()), int(live.max())
        for r in self.regions:  # fast path: every active address inside one region
            if r.base <= lo and hi + itemsize <= r.base + r.nbytes:
                return None
        if active is None:
            active = np.ones(addrs.shape, bool)
        ok = np.zeros(addrs.shape, bool)
        for r in self.regions:
            ok |= (addrs >= r.base) & (addrs + itemsize <= r.base + r.nbytes)
        bad = active & ~ok
        if not bad.any():
            return None
        first = int(addrs[bad].reshape(-1)[0])
        self.trace.violations.append(
            Violation(op, self.program, int(bad.sum()), first, self.locate(first), user_line_now())
        )
        return active & ok

    def transform_store(self, ptrs: np.ndarray, value: Any, mask: np.ndarray | None) -> Any:
        """The value a store writes; identity here, overridden to inject faults in tests."""
        return value

    def record_store(self, ptrs: np.ndarray, mask: np.ndarray | None, atomic: bool) -> None:
        addrs = ptrs.astype(np.uint64, copy=False)
        if mask is not None:
            addrs = addrs[_full_mask(mask, addrs.shape)]
        addrs = addrs.reshape(-1)
        if addrs.size == 0:
            return
        pid = linear(self.program, self.grid)
        lo, hi = int(addrs.min()), int(addrs.max())
        for r in self.regions:
            if hi < r.base or lo >= r.base + r.nbytes:
                continue  # nothing of this store lands in this region
            inside = addrs if (r.base <= lo and hi < r.base + r.nbytes) else \
                addrs[(addrs >= r.base) & (addrs < r.base + r.nbytes)]
            if r.writers is None:
                r.writers = np.full(r.nbytes // r.itemsize, -1, dtype=np.int32)
            idx = ((inside - np.uint64(r.base)) // np.uint64(r.itemsize)).astype(np.int64)
            if not atomic:
                prev = r.writers[idx]
                r.conflicts += int(np.count_nonzero((prev != pid) & (prev != -1)))
            r.writers[idx] = pid


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


def _install(builder: Any, session: Session) -> list[tuple[object, str, Any]]:
    """Set instance attributes on the interpreter's builder that wrap the class methods.

    Returns what it changed, as (object, attribute, previous value or _MISSING)."""
    changes: list[tuple[object, str, Any]] = []

    def put(obj: object, name: str, value: Any) -> None:
        changes.append((obj, name, vars(obj).get(name, _MISSING)))
        setattr(obj, name, value)

    cls = type(builder)
    TensorHandle = _interp.TensorHandle

    def orig(name: str) -> Callable:
        return getattr(cls, name).__get__(builder, cls)

    load, store = orig("create_masked_load"), orig("create_masked_store")
    check = session.options.check_pointers
    record = session.options.record_stores

    def create_masked_load(ptrs, mask, other, *rest, **kw):
        if check:
            fixed = session.check("load", ptrs.data, _mask_data(mask), _itemsize(ptrs))
            if fixed is not None:
                mask = TensorHandle(fixed, tl.int1)
        return load(ptrs, mask, other, *rest, **kw)

    def create_masked_store(ptrs, value, mask, *rest, **kw):
        m = _mask_data(mask)
        if check:
            fixed = session.check("store", ptrs.data, m, _itemsize(ptrs))
            if fixed is not None:
                m = fixed
                mask = TensorHandle(fixed, tl.int1)
        if record:
            session.record_store(ptrs.data, m, atomic=False)
        value = session.transform_store(ptrs.data, value, m)
        return store(ptrs, value, mask, *rest, **kw)

    rmw = orig("create_atomic_rmw")

    def create_atomic_rmw(op, ptr, val, mask, *rest, **kw):
        session.trace.ops.add("atomic")
        session.trace.atomics = True
        m = _mask_data(mask)
        if check:
            fixed = session.check("atomic", ptr.data, m, _itemsize(ptr))
            if fixed is not None:
                m = fixed
                mask = TensorHandle(fixed, tl.int1)
        if record:
            session.record_store(ptr.data, m, atomic=True)
        return rmw(op, ptr, val, mask, *rest, **kw)

    cas = orig("create_atomic_cas")

    def create_atomic_cas(ptr, cmp, val, *rest, **kw):
        session.trace.ops.add("atomic")
        session.trace.atomics = True
        if check:
            fixed = session.check("atomic", ptr.data, None, _itemsize(ptr))
            if fixed is not None:
                raise RuntimeError(f"atomic_cas outside every allocation: {session.trace.violations[-1].where}")
        if record:
            session.record_store(ptr.data, None, atomic=True)
        return cas(ptr, cmp, val, *rest, **kw)

    dot = orig("create_dot")

    def create_dot(a, b, d, input_precision=None, *rest, **kw):
        kind = "dot"
        if a.dtype.scalar == tl.float32 and b.dtype.scalar == tl.float32:
            prec = str(input_precision).lower() if input_precision is not None else "tf32"
            kind = "dot:ieee" if "ieee" in prec else "dot:tf32"
        elif a.dtype.scalar.primitive_bitwidth <= 16 and a.dtype.scalar.is_floating():
            kind = "dot:lowp"
        session.trace.ops.add(kind)
        return dot(a, b, d, input_precision, *rest, **kw)

    def tagging(name: str, tag: str) -> Callable:
        fn = orig(name)

        def wrapped(*args, **kw):
            session.trace.ops.add(tag)
            return fn(*args, **kw)

        return wrapped

    def ub_cast(name: str) -> Callable:
        fn = orig(name)
        unsigned = name.endswith("ui")

        def wrapped(src, dst_type, *rest, **kw):
            out = fn(src, dst_type, *rest, **kw)
            data = np.asarray(src.data)
            if data.dtype.kind == "f" or data.dtype == np.uint16:  # uint16 carries bf16
                vals = dtypes.as_float64(data, dtypes.dtype("bfloat16")) if data.dtype == np.uint16 \
                    else data.astype(np.float64)
                bits = dst_type.scalar.primitive_bitwidth
                lo, hi = (0, 2.0**bits) if unsigned else (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1))
                bad = ~np.isfinite(vals) | (np.trunc(vals) < lo) | (np.trunc(vals) >= hi)
                if bad.any():
                    ex = float(vals[bad].reshape(-1)[0])
                    session.trace.ub.append(UBEvent(
                        f"float-to-{'u' if unsigned else ''}int{bits} cast of a value out of range",
                        session.program, int(bad.sum()), repr(ex), user_line_now()))
            return out

        return wrapped

    hooks: dict[str, Callable] = {
        "create_masked_load": create_masked_load,
        "create_masked_store": create_masked_store,
        "create_atomic_rmw": create_atomic_rmw,
        "create_atomic_cas": create_atomic_cas,
        "create_dot": create_dot,
    }
    for op in TRANSCENDENTAL:
        if hasattr(cls, f"create_{op}"):
            hooks[f"create_{op}"] = tagging(f"create_{op}", "transcendental")
    for op in FLOAT_ARITH:
        if hasattr(cls, f"create_{op}"):
            hooks[f"create_{op}"] = tagging(f"create_{op}", "farith")
    for name in ("create_fp_to_si", "create_fp_to_ui"):
        if hasattr(cls, name):
            hooks[name] = ub_cast(name)
    for name, fn in hooks.items():
        put(builder, name, fn)

    # reductions and scans bypass the builder: tag them at the language level
    for mod in (tl, tl.core):
        for attr, tag in (("reduce", "reduce"), ("associative_scan", "scan")):
            inner = getattr(mod, attr)

            def tagged(*args, _inner=inner, _tag=tag, **kw):
                session.trace.ops.add(_tag)
                return _inner(*args, **kw)

            put(mod, attr, tagged)
    return changes


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
            s.add_launch_tensor(value, f"<argument {name}>")
    programs = all_programs(g)
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
    with interpreting(), instrumented(builder, s), np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run_fn = rewritten(fn)
        args_cvt = {n: (v if n in constexprs else _interp._implicit_cvt(v)) for n, v in host_args.items()}
        builder.set_grid_dim(*g)
        for p in programs:
            s.program = p
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
                                                     check_pointers=self.spec.check_pointers)
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
        return Session(self.options, plan)

    def run(self, target: Target, case: Case) -> Outcome:
        t0 = time.perf_counter()
        outcome = Outcome(self.name)
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
            with deterministic_empty(), route_launches(handler):
                returned = target.launch(kernel, **plan.inputs)
        except Exception as exc:
            outcome.error = error_info(exc)
            returned = None
        outcome.returned_args = session.live.locate(returned)
        outcome.storages = plan.snapshot()
        outcome.returned = capture_returned(returned)
        outcome.launches = session.launches
        finish_trace(session, returned)
        outcome.trace = session.trace
        outcome.seconds = time.perf_counter() - t0
        return outcome


def finish_trace(session: Session, returned: Any) -> None:
    """Move per-region writer maps into the trace, keyed by input name or returned path."""
    trace = session.trace
    by_base = {r.base: r for r in session.regions}
    for r in session.regions:
        if r.guarded and r.writers is not None:
            trace.writers[r.name] = r.writers
            trace.conflicts[r.name] = r.conflicts

    def visit(value: Any, path: str) -> None:
        if isinstance(value, torch.Tensor):
            r = by_base.get(value.untyped_storage().data_ptr())
            if r is not None and r.writers is not None and value.numel() > 0:
                idx = strided_index(tuple(value.shape), value.stride(), value.storage_offset())
                trace.writers[path] = r.writers[idx.reshape(-1)].reshape(tuple(value.shape))
                trace.conflicts[path] = r.conflicts
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                visit(v, f"{path}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                visit(v, f"{path}[{k!r}]")

    visit(returned, "returned")
