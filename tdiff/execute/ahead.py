"""Compiling ahead of use: the specializations a check's search is about to need, compiled on
several workers at once before the search runs them.

The search first draws its cases without judging them (`tdiff.drive.search`, `ahead=`); each new layout's
launch keys are predicted by a dry launch; one case per new set of keys is queued on a compile
worker (`backends.precompile`), several side by side, in the background: the search starts at once,
and its GPU worker finds each specialization in Triton's on-disk cache once a compile worker got to
it (counted as a load, not a compile, in the summary), or compiles it itself if it got there first.
When the search ends, compiles it no longer needs are dropped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..core.backend_spec import BackendSpec
from ..core.case import Case
from .compile_budget import layout_of
from .workers import Job

#: the most compile workers one check uses
MAX_WORKERS = 8


def auto_workers() -> int:
    """Compile workers per check: the machine's cores shared among pytest-xdist workers, two left
    for each one's GPU and interpreter workers, at most MAX_WORKERS."""
    share = (os.cpu_count() or 1) // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    return max(0, min(MAX_WORKERS, share - 2))


def plan(cases: Sequence[Case], keys_of: Callable[[Case], Sequence | None]) -> list[Case]:
    """One case for each set of launch keys not seen before, in draw order (one dry launch per
    layout). A case whose keys cannot be predicted is compiled ahead as it is."""
    chosen: list[Case] = []
    layouts: set = set()
    seen: set = set()
    for case in cases:
        layout = layout_of(case)
        if layout in layouts:
            continue
        layouts.add(layout)
        keys = keys_of(case)
        if keys is not None:
            new = set(keys) - seen
            if not new:
                continue
            seen |= new
        chosen.append(case)
    return chosen


def start(executor: Any, target: Any, cases: Sequence[Case], workers: int, timeout: float) -> dict:
    """Queue the cases' compiles on `workers` compile workers, in the background: the search starts
    at once and finds each specialization in Triton's cache once its worker got to it."""
    # last first: the search starts with the first cases itself, and the two meet in the middle
    jobs = [Job(target, BackendSpec("precompile", slot=i % workers), c) for i, c in enumerate(reversed(cases))]
    executor.background(jobs, timeout)
    return {"cases": len(cases), "workers": min(workers, len(cases)), "started": time.perf_counter()}


def finish(executor: Any, state: dict) -> dict:
    """Drop the compiles the search no longer needs, wait for the running ones; what it did."""
    outcomes = executor.reap(wait=True, cancel=True)
    errors = [o.error.summary() for o in outcomes if o.error is not None]
    return {"cases": state["cases"], "ran": len(outcomes), "compiles": sum(o.compiles for o in outcomes),
            "loads": sum(o.cache_loads for o in outcomes), "compile_seconds": sum(o.compile_seconds for o in outcomes),
            "wall": time.perf_counter() - state["started"], "workers": state["workers"], "errors": errors}
