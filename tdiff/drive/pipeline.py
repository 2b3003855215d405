"""One case's way through tdiff, the same wherever it was drawn: the search, a fuzz target and corpus replay
each hand a case to `CasePipeline.judge_case`. The compile budget filters the opinions the case gets, the
judge runs them and decides (reruns included), and the check's tally counts it (`Tally.add`); `CaseRecord` is what comes
back. `drawn_cases` is the strategy a check's search and its fuzz target both draw from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import hypothesis
from hypothesis import strategies as st

from ..core.case import Case
from ..core.kernels import jit_function
from ..core.settings import RunOptions
from ..execute.compile_budget import CompileBudget, layout_of
from ..generate import case_strategy
from ..generate.thresholds import Threshold, thresholds
from ..judge.evidence import Evidence
from ..judge.opinions import Opinions
from ..record.tally import PAST_BUDGET, CaseRecord
from .case_judge import CaseJudge

if TYPE_CHECKING:
    from ..declaration import Check

__all__ = ["CLOSENESS", "LINES_RUN", "PAST_BUDGET", "CasePipeline", "CaseRecord", "drawn_cases", "guide",
           "kernel_thresholds"]

#: the labels of what each case reports to `hypothesis.target` (search and shrinking climb them)
CLOSENESS = "tdiff: largest difference / tolerance"
LINES_RUN = "tdiff: kernel lines run"


def kernel_thresholds(check: Check, options: RunOptions) -> tuple[Threshold, ...]:
    """The sizes and dtypes the kernel branches on, which the size strategies also draw, unless
    `--tdiff-thresholds off`."""
    return tuple(thresholds(jit_function(check.kernel), check.launch)) if options.thresholds else ()


def drawn_cases(check: Check, options: RunOptions,
                admit: Callable[[Case], bool] | None = None) -> st.SearchStrategy[Case]:
    """The cases a check draws under `options`, in its search and its fuzz target alike: its case strategy,
    aimed at the kernel's thresholds; `admit` (the pipeline's) sees each case before its values are drawn."""
    return case_strategy(check, admit, kernel_thresholds(check, options))


def guide(ev: Evidence) -> None:
    """Tell hypothesis how near this case came to a divergence (the largest difference over
    tolerance among compared float elements) and how much kernel code it ran, so that its
    targeted phase, and HypoFuzz, move toward cases that diverge and code no case reached."""
    near = max((p.comparison.closeness for p in ev.pairs if p.comparison is not None), default=0.0)
    hypothesis.target(min(near, 1e6), label=CLOSENESS)
    lines = max((sum(len(v) for v in o.trace.lines.values()) for o in ev.outcomes.values() if o.trace is not None),
                default=0)
    hypothesis.target(float(lines), label=LINES_RUN)


@dataclass
class CasePipeline:
    """Judges a check's cases. The compile budget is a filter on the opinions a case gets: past it, a case of
    a layout that needs a new combination of specializations gets the opinions that need no compile (the
    interpreter against the reference, or against itself). Without a budget every case gets them all."""

    judge: CaseJudge
    budget: CompileBudget = field(default_factory=CompileBudget)
    predict: Callable[[Case], tuple | None] | None = None  # a case's launch keys, without compiling
    _keys: dict = field(default_factory=dict, init=False, repr=False)  # layout -> the keys its decision found

    def __post_init__(self) -> None:
        self.free = self.judge.opinions.without_compiled()

    def _predicted(self, case: Case) -> tuple | None:
        return self.predict(case) if self.predict is not None else None

    def _compiles(self, case: Case) -> bool:
        """Whether the budget lets this case's layout compile (decided once per layout: hypothesis replays draws
        and needs the same answer every time)."""
        if not self.budget.active:
            return True
        layout = layout_of(case)
        ok, keys = self.budget.decide(layout, lambda: self._predicted(case))
        if keys is not None:
            self._keys[layout] = keys
        return ok

    def admit(self, skeleton: Case) -> bool:
        """Whether a drawn case, its values not drawn yet, can be judged: one the budget keeps from compiling
        can only where two opinions remain without the compiled backend."""
        return self._compiles(skeleton) or self.free is not None

    def opinions(self, case: Case) -> Opinions:
        """The opinions a case gets: the check's, less those that compile where the budget says so."""
        return self.judge.opinions if self.free is None or self._compiles(case) else self.free

    def judge_case(self, case: Case, *, final: bool = False, shrinking: bool = False) -> CaseRecord:
        """Judge one case (with `final`, every rerun a verdict can use) and count it in the check's result,
        unless hypothesis is `shrinking` a failing case (those runs are not the check's cases)."""
        tally = self.judge.tally
        opinions = self.opinions(case)
        compiled = opinions is self.judge.opinions
        t0, before, before_s = time.perf_counter(), tally.compiles, tally.compile_seconds
        verdict, ev = self.judge.verdict(case, final=final, opinions=opinions)
        record = CaseRecord(case, verdict, ev, time.perf_counter() - t0, compiled)
        self.budget.saw(r for o in ev.outcomes.values() for r in o.launches)
        if compiled and self.budget.active:
            reported = record.launch_keys
            if not reported and "compiled" in opinions.kinds:  # a backend that does not report its keys
                reported = list(self._keys.get(layout_of(case)) or self._predicted(case) or ())
            self.budget.ran(reported, tally.compiles - before, tally.compile_seconds - before_s)
        elif not compiled and not shrinking:
            self.budget.skip()
        if not shrinking:
            tally.add(record)
        return record

    def drawn(self, case: Case, shrinking: bool = False) -> CaseRecord:
        """A case hypothesis drew (the search's or a fuzz target's): judged, and its closeness and kernel lines
        reported to hypothesis (`guide`)."""
        record = self.judge_case(case, shrinking=shrinking)
        guide(record.evidence)
        return record
