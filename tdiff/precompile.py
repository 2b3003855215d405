"""Compiling ahead of use: the specializations a check's search is about to need, compiled on
several workers at once before the search runs them.

The search first draws its cases without judging them (`tdiff.search`, `ahead=`); each new layout's
launch keys are predicted by a dry launch; one case per new set of keys goes to a compile worker
(`backends.precompile`), several side by side. The compiles land in Triton's on-disk cache, where the
GPU worker's real launches load them (counted as loads, not compiles, in the summary). A GPU machine
compiles on its CPU cores while the GPU worker waits on nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from .backends.base import BackendSpec
from .budget import layout_of
from .case import Case
from .workers import Job

#: the most compile workers one check uses
MAX_WORKERS = 8


def auto_workers() -> int:
    """Compile workers per check: the machine's cores shared among pytest-xdist workers, one core
    left for each one's GPU worker, at most MAX_WORKERS."""
    share = (os.cpu_count() or 1) // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    return max(0, min(MAX_WORKERS, share - 1))


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


def compile_ahead(executor: Any, target: Any, cases: Sequence[Case], workers: int, timeout: float) -> dict:
    """Compile the cases' launches on `workers` compile workers at once; what it cost and did."""
    t0 = time.perf_counter()
    jobs = [Job(target, BackendSpec("precompile", slot=i % workers), c) for i, c in enumerate(cases)]
    outcomes = executor.run_many(jobs, timeout) if jobs else []
    errors = [o.error.summary() for o in outcomes if o.error is not None]
    return {"cases": len(cases), "compiles": sum(o.compiles for o in outcomes),
            "compile_seconds": sum(o.compile_seconds for o in outcomes), "wall": time.perf_counter() - t0,
            "workers": min(workers, len(cases)), "errors": errors}
