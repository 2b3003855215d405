"""The interpreter backend: Triton's numpy interpreter, selected per call, with instrumentation
(`hooks`), launch by launch (`interpret_launch`) into one run's `session`.

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
import os
import random
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from triton.runtime import interpreter as _interp
from triton.runtime.jit import JITFunction

from ...core import kernels, limitations
from ...core.backend_spec import BackendSpec, short_path
from ...core.case import Case, strided_index
from ...core.outcome import ErrorInfo, Outcome
from ..backends.base import Target, error_info, user_frame, user_line_now
from ..plan import LaunchPlan, capture_returned, deterministic_empty, grid3, launch_record, route_launches
from . import batched, coverage, shims, undo
from .hooks import instrumented
from .memory import Region
from .scope import bind_globals, interpreting, rewritten
from .session import InterpreterOptions, KernelRunError, Program, Session, all_programs, linear, sample_programs

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
    if not (s.options.batched and s.options.check_pointers and len(programs) > 1
            and _batch(s, fn, host_args, constexprs, g, programs)):
        _one_by_one(s, fn, host_args, constexprs, g, programs)
    for dev, host in copy_back:
        dev.copy_(host)
    return None


@contextlib.contextmanager
def _launching(s: Session, fn: Any, host_args: dict[str, Any], constexprs: set[str], g: Program,
               batch: bool) -> Iterator[tuple[Any, Callable, dict[str, Any]]]:
    """The interpreter set up for one launch of `fn` on grid `g` (with `batch`, for batches of programs):
    the builder, the rewritten kernel and its converted arguments."""
    builder = _interp.interpreter_builder
    with interpreting(), instrumented(builder, s, batch=batch), np.errstate(all="ignore"), \
            warnings.catch_warnings(), shims.counting(s.trace.shims), \
            (_global(fn, "range", batched.loop_range) if batch else contextlib.nullcontext()):
        warnings.simplefilter("ignore", RuntimeWarning)
        run_fn = rewritten(fn)
        bind_globals(fn)
        args_cvt = shims.convert_args(host_args, constexprs, _interp._implicit_cvt, s.trace.shims)
        builder.set_grid_dim(*g)
        yield builder, run_fn, args_cvt


def _one_by_one(s: Session, fn: Any, host_args: dict[str, Any], constexprs: set[str], g: Program,
                programs: list[Program]) -> None:
    """Run `programs` one after another (Triton's own way)."""
    with _launching(s, fn, host_args, constexprs, g, batch=False) as (builder, run_fn, args_cvt):
        for p in programs:
            s.program = p
            s.edge = s.loaded = 0.0
            s.swayed = False
            builder.set_grid_idx(*p)
            try:
                run_fn(**args_cvt)
            except Exception as exc:
                raise KernelRunError(f"{type(exc).__name__}: {exc}", p) from exc
            s.trace.programs_run.append(p)


#: programs a batch runs at once (a launch runs in batches of at most this many, in launch order)
BATCH = 256


def _batch(s: Session, fn: Any, host_args: dict[str, Any], constexprs: set[str], g: Program,
           programs: list[Program]) -> bool:
    """Run `programs` in batches (`batched`); where a branch or loop bound parts a batch's programs, the launch
    is undone and run again with that batch split by its outcome. False, with the launch undone and the
    reason counted in the trace, where a batch stopped for good (the caller then runs them one by one)."""
    known = batched.known_unbatchable(fn)
    if known is not None:
        s.trace.unbatched[known] = s.trace.unbatched.get(known, 0) + 1
        return False
    saved = undo.Saved(s)
    # the first program runs alone: a comparison's tolerance follows the operations run so far (`Session.
    # close_allowance`), which for every later program, one by one, include the whole first program's
    batches = [programs[:1]] + [programs[i:i + BATCH] for i in range(1, len(programs), BATCH)]
    s.batch_atomics = False
    for _ in range(SPLITS + 1):
        why, failed = _run_batches(s, fn, host_args, constexprs, g, batches)
        if why is None:
            s.trace.programs_run.extend(programs)
            s.trace.batched += len(programs)
            return True
        saved.restore(s)
        outcomes = failed.outcomes if isinstance(failed, batched.Unbatchable) else None
        if outcomes is not None and s.batch_atomics:  # split batches would update atomically out of order
            why += " (a kernel with atomics is not split)"
            outcomes = None
        if outcomes is None or not isinstance(failed, batched.Unbatchable):  # (outcomes: only an Unbatchable's)
            break
        i, parts = failed.batch, []
        for label in range(int(outcomes.max()) + 1):
            parts.append([p for p, o in zip(batches[i], outcomes) if o == label])
        batches[i:i + 1] = [part for part in parts if part]
    else:
        why = f"{why} (split {SPLITS} times)"
    if isinstance(failed, batched.Unbatchable):
        batched.remember(fn, failed)
    s.trace.unbatched[why] = s.trace.unbatched.get(why, 0) + 1
    return False


@contextlib.contextmanager
def _global(fn: Any, name: str, value: Any) -> Iterator[None]:
    """`name` set to `value` in the kernel's module globals for the body (the kernel's own `range` loops), then
    put back as it was."""
    g = fn.__globals__
    old = g.get(name, _MISSING)
    g[name] = value
    try:
        yield
    finally:
        if old is _MISSING:
            del g[name]
        else:
            g[name] = old


_MISSING = object()


#: lanes a batch's widest access may hold (programs x lanes each): bounds the memory of a batch's arrays
LANES = 1 << 21


def _fit(batches: list[list[Program]], i: int, widest: int) -> None:
    """Cut batch `i` into consecutive batches (launch order kept) small enough that an access `widest` lanes
    wide per program holds at most LANES lanes."""
    cap = max(1, LANES // max(widest, 1))
    if len(batches[i]) > cap:
        batches[i:i + 1] = [batches[i][k:k + cap] for k in range(0, len(batches[i]), cap)]


#: how many times a launch is run again with a batch split (by a branch or bound that parts its programs)
SPLITS = 8


def _run_batches(s: Session, fn: Any, host_args: dict[str, Any], constexprs: set[str], g: Program,
                 batches: list[list[Program]]) -> tuple[str | None, Exception | None]:
    """Run each batch of programs in turn; (None, None), or why a batch stopped and its exception (an
    `Unbatchable` carries the index of its batch as `batch`)."""
    try:
        with _launching(s, fn, host_args, constexprs, g, batch=True) as (builder, run_fn, args_cvt):
            i = 0
            while i < len(batches):
                _fit(batches, i, s.widest)
                chunk = batches[i]
                n = len(chunk)
                s.coords = np.array(chunk, dtype=np.int64)
                s.batch = np.array([linear(p, g) for p in chunk], dtype=np.int32)
                s.program = chunk[0]
                s.edge, s.loaded = np.zeros(n), np.zeros(n)
                s.swayed = np.zeros(n, bool)
                builder.set_grid_idx(*chunk[0])
                before = Counter(s.trace.shims)
                s.trace.shims.batch = n  # type: ignore[attr-defined]  # (shims counted per program read it)
                try:
                    run_fn(**args_cvt)
                except batched.Unbatchable as exc:
                    exc.batch = i
                    raise
                finally:
                    s.trace.shims.batch = 0  # type: ignore[attr-defined]  # (as above)
                for k, v in list(s.trace.shims.items()):  # a batch's use of a shim stands for each program's
                    if k not in shims.PER_PROGRAM:  # (those counted their programs themselves)
                        s.trace.shims[k] = before.get(k, 0) + (v - before.get(k, 0)) * n
                i += 1
    except batched.Unbatchable as exc:
        return f"{exc.reason} at {exc.line}", exc
    except Exception as exc:  # the sequential run raises it again for the program that raised it
        if os.environ.get("TDIFF_BATCH_DEBUG"):
            traceback.print_exc()
        fr = user_frame(exc.__traceback__)
        where = f"{short_path(fr.filename)}:{fr.lineno}: {(fr.line or '').strip()}" if fr else user_line_now()
        return f"{type(exc).__name__} in a batch at {where}", exc
    finally:
        s.batch = s.coords = None
        s.edge = s.loaded = 0.0
        s.swayed = False
    return None, None


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
        self.role = self.spec.role  # what its outcomes play
        self.options = options or InterpreterOptions(order=self.spec.order,
                                                     check_pointers=self.spec.check_pointers,
                                                     poison=self.spec.masked == "undefined",
                                                     alternate=self.spec.unspecified == "alternate",
                                                     batched=self.spec.batched, rounding=self.spec.rounding,
                                                     gpu_arith=self.spec.gpu_arith, nudge=self.spec.nudge)
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
        outcome = Outcome(self.name, role=self.role)
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
                    coverage.recording(session.trace.lines):
                returned = target.launch(kernel, **plan.inputs)
        except Exception as exc:
            outcome.error = error_info(exc)
            known = limitations.match(exc)
            if known is not None:
                outcome.error.kind = "limitation"
                outcome.error.limitation = known.name
                detail = known.explain(exc) if known.explain is not None else ""
                if detail:
                    outcome.error.message = f"{outcome.error.message} ({detail})"
                    outcome.error.explained = detail
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
                idx = strided_index(tuple(value.shape), value.stride(), int(value.storage_offset()))
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
