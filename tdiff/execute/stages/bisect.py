"""Which pass: bisection over a compile's per-pass snapshots, as pure logic over a `run` callable.

`run(snapshot)` lowers one snapshot (the module after some passes of its stage, the stage's remaining
passes skipped, every later stage run in full), runs the case and says AGREE, DIVERGE or UNKNOWN (the
snapshot could not be lowered or run: never counted as agreeing). Snapshots with the same text are run once.

Within one stage, snapshot k has the stage's first k passes and every later stage; so a pass that
miscompiles makes its stage's snapshots agree before it and diverge from it on, while every snapshot of an
earlier stage (which runs this stage in full) diverges. Hence the stages are searched from the last to the
first: in the first stage (from the end) whose first lowerable snapshot agrees, the boundary between the last
agreeing and the first diverging snapshot is found by bisection; the passes between them are the suspects
(one, unless snapshots between could not be lowered). Where no stage has an agreeing snapshot, the divergence
is in a stage's first passes that no snapshot separates, or below the MLIR passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

AGREE, DIVERGE, UNKNOWN = "agree", "diverge", "unknown"
FOUND, NONE_AGREE, NOT_REPRODUCED = "found", "no snapshot agrees", "not reproduced"
NOT_RUN = "the whole compile could not be run"


class Point(Protocol):
    """A snapshot as the bisection sees it."""

    stage: str
    index: int
    after: str
    text: str

    @property
    def label(self) -> str: ...


@dataclass(frozen=True)
class Probe:
    """One run of the bisection: what ran, its result, and why (an UNKNOWN's reason, a DIVERGE's summary)."""

    label: str
    result: str
    detail: str = ""
    point: Any = field(default=None, compare=False)


@dataclass
class Bisection:
    outcome: str  # FOUND, NONE_AGREE, NOT_REPRODUCED (the whole compile agrees) or NOT_RUN
    stage: str | None = None
    last_agree: Any = None  # the last snapshot that agrees
    first_diverge: Any = None  # the first snapshot after it that diverges
    suspects: tuple[str, ...] = ()  # the passes between them (one, unless snapshots between were UNKNOWN)
    suspect_points: tuple[Any, ...] = ()  # for each suspect, the snapshot right after it
    probes: list[Probe] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len(self.probes)


Run = Callable[[Any], tuple[str, str]]


class _Memo:
    def __init__(self, run: Run, max_runs: int) -> None:
        self.run = run
        self.max_runs = max_runs
        self.cache: dict[tuple[str, str], tuple[str, str]] = {}
        self.probes: list[Probe] = []

    def __call__(self, point: Any) -> str:
        key = (point.stage, point.text)
        if key not in self.cache:
            if len(self.probes) >= self.max_runs:
                result = (UNKNOWN, "the localizer's run budget is spent")
            else:
                result = self.run(point)
                self.probes.append(Probe(point.label, result[0], result[1], point))
            self.cache[key] = result
        return self.cache[key][0]

    def known(self, point: Any) -> str | None:
        hit = self.cache.get((point.stage, point.text))
        return hit[0] if hit else None


def bisect(stages: Sequence[Sequence[Any]], run: Run, max_runs: int = 40) -> Bisection:
    """Find the first pass after which the result diverges. `stages`: each stage's snapshots in pipeline
    order, earliest stage first; the last snapshot of the last stage is the whole compile."""
    memo = _Memo(run, max_runs)
    stages = [list(s) for s in stages if s]
    if not stages:
        return Bisection(NOT_REPRODUCED, probes=memo.probes)
    whole = memo(stages[-1][-1])
    if whole != DIVERGE:
        return Bisection(NOT_REPRODUCED if whole == AGREE else NOT_RUN, probes=memo.probes)
    for seq in reversed(stages):
        first = next((i for i, p in enumerate(seq) if memo(p) != UNKNOWN), None)
        if first is None or memo(seq[first]) == DIVERGE:
            continue  # the divergence is before this stage's first lowerable snapshot
        last = len(seq) - 1
        if last == first or memo(seq[last]) != DIVERGE:
            continue  # this stage's output agrees (or cannot be run): not where the divergence starts
        lo, hi = _search(seq, first, last, memo)
        points = tuple(seq[k] for k in range(lo + 1, hi + 1) if seq[k].text != seq[k - 1].text) or (seq[hi],)
        return Bisection(FOUND, seq[hi].stage, seq[lo], seq[hi], tuple(p.after for p in points), points,
                         memo.probes)
    return Bisection(NONE_AGREE, probes=memo.probes)


def _search(seq: list[Any], lo: int, hi: int, memo: _Memo) -> tuple[int, int]:
    """Narrow lo (AGREE) and hi (DIVERGE) until every snapshot between them is UNKNOWN."""
    unknown: set[int] = set()
    while True:
        between = [k for k in range(lo + 1, hi) if k not in unknown]
        if not between:
            return lo, hi
        mid = min(between, key=lambda k: (abs(k - (lo + hi) / 2), k))
        result = memo(seq[mid])
        if result == AGREE:
            lo = mid
        elif result == DIVERGE:
            hi = mid
        else:
            unknown.add(mid)
