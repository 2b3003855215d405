"""Compiling ahead of use, in a compile worker: the specializations a check's planned cases will launch,
compiled before the search reaches them, so that the GPU worker loads them from Triton's on-disk cache.

The check's `launch` runs on CPU copies of a case's inputs, as for a dry launch (`tdiff.execute.launch_keys`);
each launch goes to Triton's JIT with `warmup=True`, which binds and specializes the arguments as a real launch
does (pointer alignment comes from the same copies the dry launch classifies) and compiles, launching nothing.
A specialization another process has claimed (`compile_claims`: the GPU worker compiling it, another compile
worker) is skipped; one this worker compiles is claimed, so the GPU worker waits for it instead of compiling it
a second time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.case import Case
from .. import compile_claims
from ..launch_keys import dry_launches
from .compiled import counted

_claims = compile_claims.Claims()


@dataclass
class AheadCount:
    """What a compile worker did for one check."""

    cases: int = 0  # planned cases whose launches it went through
    compiles: int = 0  # specializations it compiled
    seconds: float = 0.0  # in those compiles
    loads: int = 0  # found in Triton's cache (compiled by an earlier run)
    taken: int = 0  # skipped: another process was compiling them or had compiled them
    stopped: bool = False  # told to stop before it went through every case
    errors: list[str] = field(default_factory=list)

    def add(self, other: AheadCount) -> None:
        self.cases += other.cases
        self.compiles += other.compiles
        self.seconds += other.seconds
        self.loads += other.loads
        self.taken += other.taken
        self.stopped = self.stopped or other.stopped
        self.errors += other.errors


def compile_case(target: Any, case: Case, count: AheadCount) -> None:
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
            _, compiled, loaded, seconds = counted(
                jit, lambda: original(jit, *args, grid=grid, warmup=True, **kwargs))
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


def compile_ahead(target: Any, cases: list[Case], stop: Callable[[], bool]) -> AheadCount:
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
