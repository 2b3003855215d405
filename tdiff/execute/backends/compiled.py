"""The compiled backend: Triton's normal GPU path, with launches recorded and compiles counted."""

from __future__ import annotations

import os
import time
from functools import lru_cache
from typing import Any

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from ...core import kernels
from ...core.backend_spec import BackendSpec
from ...core.case import Case
from ...core.outcome import ErrorInfo, Outcome
from ...core.static_ops import dot_kinds
from .. import compile_claims
from ..launch_keys import key_of, native_specialize_impl
from ..plan import LaunchPlan, LiveArgs, capture_returned, deterministic_empty, grid3, launch_record, route_launches
from .base import Target, error_info


def _cache_size(jit: JITFunction) -> int:
    caches = getattr(jit, "device_caches", None) or {}
    return sum(len(entry[0]) for entry in caches.values())


_COMPILES = [0]


def real_compiles() -> int:
    """Compiles this process has run, as opposed to specializations loaded from Triton's on-disk cache: Triton
    builds a compile's stages (`add_stages` of its backend) only on a cache miss. -1 where the backends could not
    be counted. (Entries appearing in the cache directory cannot tell it: other processes, a compile worker ahead
    of the search, write there at the same time.)"""
    if _COMPILES[0] >= 0 and not getattr(_count_compiles, "done", False):
        _count_compiles()
    return _COMPILES[0]


def _count_compiles() -> None:
    _count_compiles.done = True  # type: ignore[attr-defined]  # (a mark on the function: patched once a process)
    try:
        from triton.backends import backends

        for backend in backends.values():
            cls = backend.compiler
            original = cls.__dict__.get("add_stages")
            if original is None or getattr(original, "tdiff_counted", False):
                continue

            def add_stages(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                _COMPILES[0] += 1
                return _original(self, *args, **kwargs)

            add_stages.tdiff_counted = True  # type: ignore[attr-defined]  # (marks Triton's method as wrapped)
            cls.add_stages = add_stages
    except Exception:  # (a Triton without this registry): compiles cannot be told from loads
        _COMPILES[0] = -1


def counted(jit: JITFunction, call: Any) -> tuple[Any, int, int, float]:
    """Run `call()` (a launch of `jit`, or its warmup): what it returned, the specializations it compiled here and
    those it loaded from Triton's on-disk cache (an earlier run or another process compiled them), and its
    seconds."""
    before, compiled_before, t0 = _cache_size(jit), real_compiles(), time.perf_counter()
    out = call()
    new = _cache_size(jit) - before
    compiled = new if compiled_before < 0 else min(new, real_compiles() - compiled_before)
    return out, compiled, new - compiled, time.perf_counter() - t0


_claims = compile_claims.Claims() if os.environ.get("TDIFF_CLAIMS", "1") != "0" else None


def recorded_launch(plan: LaunchPlan, outcome: Outcome, live: LiveArgs, jit: JITFunction, original: Any,
                    args: tuple, grid: Any, warmup: bool, kwargs: dict) -> Any:
    """Record one launch, then launch it compiled; count compiles and their time."""
    names = kernels.arg_names(jit)
    call_kwargs = {k: v for k, v in kwargs.items() if k in names}
    bound = kernels.signature(jit.fn).bind(*args, **call_kwargs)  # a bad call or grid fails the launch
    bound.apply_defaults()
    g = grid3(grid(dict(bound.arguments)) if callable(grid) else grid)
    if not warmup:
        outcome.static_ops = outcome.static_ops | dot_kinds(jit)
        live.add(len(outcome.launches), args, call_kwargs)
        options = {k: v for k, v in kwargs.items() if k not in names}
        outcome.launches.append(launch_record(jit, g, args, call_kwargs, plan, options))
        if native_specialize_impl is not None:  # Triton 3.5+ (before: the keys are not known, as for dry launches)
            outcome.launch_keys = (*(outcome.launch_keys or ()), key_of(jit, bound.arguments, options))
    claim, name = None, None
    if not warmup and outcome.launch_keys and _claims is not None:
        name = compile_claims.name_of(jit, outcome.launch_keys[-1])
        if name in _claims.done:
            name = None
        else:  # another process compiling it (a compile worker ahead of the search): wait, then load it
            outcome.compile_wait += _claims.wait(name)
            claim = _claims.take(name)
    try:
        out, compiled, loaded, seconds = counted(
            jit, lambda: original(jit, *args, grid=grid, warmup=warmup, **kwargs))
    finally:
        if name is not None and _claims is not None:  # (a name is only taken with claims)
            _claims.release(claim, name)
    outcome.cache_loads += loaded
    if compiled:
        outcome.compiles += compiled
        outcome.compile_seconds += seconds
    return out


@lru_cache(maxsize=16)
def _device_name(index: int) -> str:
    return torch.cuda.get_device_name(index)


CUDA_FATAL = ("illegal memory access", "misaligned address", "unspecified launch failure",
              "illegal instruction", "device-side assert", "CUDA error")


class CompiledBackend:
    """Runs a case compiled on the GPU."""

    def __init__(self, spec: BackendSpec | None = None) -> None:
        self.spec = spec or BackendSpec("compiled")
        self.name = self.spec.label
        self.role = self.spec.role  # what its outcomes play
        self.device = self.spec.device or "cuda"
        self.poisoned = False  # set after a CUDA error: the context is unusable, the worker must restart
        self.lane = None  # compiled[from=<stage>] / compiled[ir=<file>]: see tdiff.execute.stages.launch
        if self.spec.stage or self.spec.ir:
            from ..stages.launch import StageLane

            self.lane = StageLane(self.spec.stage, self.spec.ir)

    def run(self, target: Target, case: Case) -> Outcome:
        t0 = time.perf_counter()
        outcome = Outcome(self.name, role=self.role)
        if not torch.cuda.is_available():
            outcome.error = ErrorInfo("setup", "no CUDA GPU is available for the compiled backend")
            return outcome
        try:
            plan = LaunchPlan(case, self.device, upcast=self.spec.upcast)
        except Exception as exc:
            outcome.error = self._error(exc, "setup")
            return outcome
        config = case.config if self.spec.config is None else self.spec.config
        kernel = kernels.rebuild(target.kernel, kernels.jit_function(target.kernel), config)
        live = LiveArgs()
        overrides = dict(self.spec.launch)  # a variant's launch options replace the launch's own
        lane = self.lane
        state = lane.begin() if lane is not None else None

        def handler(jit, original, args, grid, warmup, kwargs):
            if lane is not None and state is not None:  # a stage lane compiles each launch again from a stage,
                original = lane.wrap(original, state)  # then launches that
            return recorded_launch(plan, outcome, live, jit, original, args, grid, warmup, {**kwargs, **overrides})

        returned = None
        try:
            with deterministic_empty(), route_launches(handler):
                returned = target.launch(kernel, **plan.inputs)
            torch.cuda.synchronize()
        except Exception as exc:
            outcome.error = self._error(exc)
        outcome.returned_args = live.locate(returned, plan)
        if not self.poisoned:
            try:
                outcome.storages = plan.snapshot()
                outcome.returned = capture_returned(returned)
            except Exception as exc:  # the context died while copying back
                if outcome.error is None:
                    outcome.error = self._error(exc)
        if lane is not None and state is not None and not self.poisoned:
            try:
                lane.finish(state, outcome, lambda: self._plain().run(target, case))
            except Exception as exc:
                outcome.error = self._error(exc)
        outcome.seconds = time.perf_counter() - t0
        if not self.poisoned:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            pinned = f" (CUDA_VISIBLE_DEVICES={visible})" if visible else ""
            outcome.device = f"{_device_name(torch.cuda.current_device())}{pinned}"
        return outcome

    def _plain(self) -> CompiledBackend:
        """The same backend without its stage lane (a from= round trip's results are checked against it)."""
        return CompiledBackend(self.spec.with_(stage=None, ir=None))

    def _error(self, exc: BaseException, kind: str | None = None) -> ErrorInfo:
        if self.lane is not None:
            lane_error = self.lane.error(exc)
            if lane_error is not None:  # the lane could not give its opinion: the pair is not judged
                return lane_error
        info = error_info(exc, kind)
        if any(s in info.message for s in CUDA_FATAL):
            self.poisoned = True
            info.kind = "cuda"
        return info


@triton.jit
def _warm_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)


def warm_up() -> None:
    """Pay a process's first-compile costs (CUDA driver helpers, compiler libraries, ptxas) early."""
    x = torch.zeros(1, device="cuda")
    _warm_kernel[(1,)](x)
    torch.cuda.synchronize()
