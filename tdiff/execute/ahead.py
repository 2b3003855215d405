"""Compiling ahead of use: which compile workers a check gets, and which planned cases each compiles.

A check's boundary plan knows most of its cases before the search runs them (`Plan.replay_order`). Compile
workers (`backends.compile_ahead`, on lanes `compile0`, `compile1`, ...) go through them from the last one the
search will reach, while the search's GPU worker starts at the first: the two meet in the middle, and no
specialization is compiled twice (`compile_claims`). The GPU worker loads what the compile workers got to first
from Triton's on-disk cache; when the search ends, the compile workers stop.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..core.backend_spec import Lane
from ..core.case import Case
from .compile_budget import layout_of
from .workers import Ahead

#: the most compile workers one check uses
MAX_WORKERS = 4


def auto_workers() -> int:
    """Compile workers per check: the cores beyond two per xdist worker (its GPU and interpreter workers),
    shared among the xdist workers; at least 1, at most MAX_WORKERS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    xdist = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))
    return max(1, min(MAX_WORKERS, (cores - 2 * xdist) // xdist))


def workers(option: int | None) -> int:
    """Compile workers per check for `--tdiff-compile-ahead` (None: `auto_workers`)."""
    return auto_workers() if option is None else option


def lanes(n: int) -> list[Lane]:
    return [Lane(f"compile{i}") for i in range(n)]


def jobs(target: Any, cases: Sequence[Case], n: int) -> list[Ahead]:
    """One job per compile worker: the cases of new layouts (a layout decides a case's specializations), the last
    the search reaches first, dealt out in turn."""
    seen: set = set()
    todo: list[Case] = []
    for case in cases:
        layout = layout_of(case)
        if layout not in seen:
            seen.add(layout)
            todo.append(case)
    todo.reverse()
    return [Ahead(target, todo[i::n], lane) for i, lane in enumerate(lanes(n)) if todo[i::n]]
