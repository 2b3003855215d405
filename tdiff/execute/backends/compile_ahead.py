"""Compiling ahead of use, in a compile worker: the specializations a check's planned cases will launch,
compiled before the search reaches them, so that the GPU worker loads them from Triton's on-disk cache.

The check's `launch` runs on CPU copies of a case's inputs, as for a dry launch (`tdiff.execute.launch_keys`);
each launch goes to Triton's JIT with `warmup=True`, which binds and specializes the arguments as a real launch
does (pointer alignment comes from the same copies the dry launch classifies) and compiles, launching nothing.
A specialization another process has claimed (`compile_claims`: the GPU worker compiling it, another compile
worker) is skipped; one this worker compiles is claimed, so the GPU worker waits for it instead of compiling it
a second time. Under the same claim it builds the kernel's C launcher (Triton builds one per signature at a
kernel's first launch, and caches it on disk as it does kernels), so the GPU worker's first launch loads that too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.case import Case
from .. import compile_claims
from ..launch_keys import dry_launches
from .base import Target
from .compiled import counted

_claims = compile_claims.Claims()


@dataclass
class AheadCount:
    """What a compile worker did for one check."""

    cases: int = 0  # planned cases whose launches it went through
    compiles: int = 0  # specializations it compiled
    seconds: float = 0.0  # in those compiles
    loads: int = 0  # found in Triton's cache (compiled by an earlier run)
    launchers: int = 0  # Triton's C launchers for them, built (or found in Triton's cache) here
    launcher_seconds: float = 0.0
    taken: int = 0  # skipped: another process was compiling them or had compiled them
    stopped: bool = False  # told to stop before it went through every case
    errors: list[str] = field(default_factory=list)

    def add(self, other: AheadCount) -> None:
        self.cases += other.cases
        self.compiles += other.compiles
        self.seconds += other.seconds
        self.loads += other.loads
        self.launchers += other.launchers
        self.launcher_seconds += other.launcher_seconds
        self.taken += other.taken
        self.stopped = self.stopped or other.stopped
        self.errors += other.errors


def compile_case(target: Target, case: Case, count: AheadCount) -> None:
    """Compile the specializations of `case`'s launches that no process has compiled or claimed."""

    def warm(jit: Any, original: Any, args: tuple, grid: Any, kwargs: dict, key: tuple | None) -> None:
        name = compile_claims.name_of(jit, key) if key is not None else None
        claim = None
        if name is not None:
            if name in _claims.done:
                return
            claim = _claims.take(name)
            if claim is None:
                count.taken += 1
                return
        try:
            kernel, compiled, loaded, seconds = counted(
                jit, lambda: original(jit, *args, grid=grid, warmup=True, **kwargs))
            t0 = time.perf_counter()
            try:  # (under the claim: a GPU worker waiting for the kernel needs its launcher too)
                if build_launcher(kernel):
                    count.launchers += 1
                    count.launcher_seconds += time.perf_counter() - t0
            except Exception as exc:  # the GPU worker's first launch builds it again, and reports a failure
                count.errors.append(f"launcher: {type(exc).__name__}: {str(exc)[:200]}")
        except Exception as exc:  # the real launch fails the same way, and reports it
            count.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            return
        finally:
            if name is not None:
                _claims.release(claim, name)
        count.loads += loaded
        if compiled:
            count.compiles += compiled
            count.seconds += seconds

    dry_launches(target, case, then=warm)
    count.cases += 1


def build_launcher(kernel: Any) -> bool:
    """Build the C launcher a compiled kernel's first launch builds (Triton's CUDA driver compiles one per
    signature with the C compiler, about 0.25 s, and keeps it in its on-disk cache, where the GPU worker's launch
    then finds it). False where this Triton or backend has no such launcher, or the kernel is not a compiled one."""
    if getattr(kernel, "src", None) is None or getattr(kernel, "metadata", None) is None:
        return False
    from triton.runtime import driver

    make = getattr(driver.active, "launcher_cls", None)
    if make is None:
        return False
    make(kernel.src, kernel.metadata)
    return True


def compile_ahead(target: Target, cases: list[Case], stop: Callable[[], bool]) -> AheadCount:
    """Go through `cases` in order until `stop()` says the search no longer needs them."""
    count = AheadCount()
    for case in cases:
        if stop():
            count.stopped = True
            break
        try:
            compile_case(target, case, count)
        except Exception as exc:  # the launch function itself failed on CPU copies: the search says why
            count.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
    return count
