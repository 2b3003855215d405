"""Where the main job's time goes: the README's `pytest --tdiff suites` run in one process, each phase timed.

    python -m bench.speed.first_run [PYTEST ARGS ...]          # default: suites

The run is the main job's, in this process (`-p no:xdist --tdiff-isolation none`), so that one clock sees
every phase. A phase's time is exclusive: entering a nested phase pauses the one around it. Phases:
start-up and collection (importing the suites and the libraries they check), drawing cases (hypothesis and
the strategies: shapes, layouts, values), building inputs (a case's storages onto the device, with guard
bands), each backend (tdiff's interpreter, the reference, the compiled kernel), judging (evidence,
comparison, verdict), shrinking / reproducer / corpus, replaying the corpus, and the rest of tdiff's loop.
With `-n 2` and worker processes the same work is spread over two cores, plus worker start-up (shown
apart: the time a worker process takes to import torch and triton, times the number started).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    """Exclusive time per phase: a stack of phases, the innermost one running."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[tuple[str, float]] = []

    def enter(self, phase: str) -> None:
        now = time.perf_counter()
        if self.stack:
            top, since = self.stack[-1]
            self.spent[top] += now - since
        self.stack.append((phase, now))
        self.calls[phase] += 1

    def leave(self) -> None:
        now = time.perf_counter()
        phase, since = self.stack.pop()
        self.spent[phase] += now - since
        if self.stack:
            self.stack[-1] = (self.stack[-1][0], now)

    def wrap(self, owner: object, name: str, phase: str) -> None:
        fn = getattr(owner, name)
        clock = self

        def timed(*args, **kw):
            clock.enter(phase)
            try:
                return fn(*args, **kw)
            finally:
                clock.leave()

        timed.__wrapped__ = fn  # type: ignore[attr-defined]
        setattr(owner, name, timed)


def worker_start_seconds() -> float:
    """How long a fresh Python takes to import what a tdiff worker imports (torch, triton, tdiff)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, triton, numpy, tdiff.execute.worker_main"], check=True,
                   cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    import pytest

    from tdiff.drive import case_judge, runner, search
    from tdiff.execute import plan
    from tdiff.execute.backends import reference
    from tdiff.execute.interpreter import backend as interpreter

    clock = Clock()
    clock.wrap(runner.Runner, "run_check", "tdiff's loop (other)")
    clock.wrap(runner.Runner, "replay_entry", "replaying the corpus")
    clock.wrap(runner.Runner, "finish", "shrinking, reproducer, corpus entry")
    clock.wrap(search, "search", "drawing cases (hypothesis, strategies)")
    clock.wrap(case_judge.CaseJudge, "verdict", "judging (evidence, comparison, verdict)")
    clock.wrap(case_judge.CaseJudge, "run", "running backends (other)")
    clock.wrap(plan, "allocate", "building inputs (storages, guard bands)")
    clock.wrap(interpreter.InterpreterBackend, "run", "interpreter")
    clock.wrap(reference.ReferenceBackend, "run", "reference")
    runner.search = search.search  # the runner imported the name: time it through the module
    args = argv or ["suites"]
    t0 = time.perf_counter()
    clock.enter("start-up, collection, pytest")
    code = pytest.main(["--tdiff", *args, "-p", "no:xdist", "--tdiff-isolation", "none", "-q",
                        "-p", "no:cacheprovider", "--tdiff-run-dir", str(ROOT / ".tdiff" / "first-run")])
    clock.leave()
    wall = time.perf_counter() - t0
    start = worker_start_seconds()
    print(f"\nwhere the time goes, one process ({wall:.1f} s wall, pytest exit {int(code)}):")
    print("| phase | seconds | share |\n|---|---:|---:|")
    for phase, s in sorted(clock.spent.items(), key=lambda kv: -kv[1]):
        print(f"| {phase} | {s:.1f} | {100 * s / wall:.0f}% |")
    print(f"\na worker process's start (import torch, triton, tdiff): {start:.1f} s")
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
