"""What a check's cases add up to while it runs (`Tally`): each judged case (`CaseRecord`) folded in by
`Tally.add`, each run of the backends by `Tally.ran`, and the time spent in each phase. The check's result
(`CheckResult`) is assembled once from it at the end of the run; a running check's progress reads it."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.backend_spec import COMPILE_ONLY
from ..core.case import Case
from ..core.outcome import Outcome
from ..judge.evidence import Evidence
from ..judge.verdict import NOT_JUDGED, Verdict

#: the caveat of a case judged without the compiled backend
PAST_BUDGET = "past the compile budget: compared without the compiled backend"


@dataclass
class CaseRecord:
    """A judged case: its verdict and evidence, the seconds judging it took, and whether the opinions that
    compile ran (False: the compile budget left them out)."""

    case: Case
    verdict: Verdict
    evidence: Evidence
    seconds: float = 0.0
    compiled: bool = True

    @property
    def judged(self) -> bool:
        return self.verdict.label != NOT_JUDGED

    @property
    def failed(self) -> bool:
        return self.verdict.failed

    @property
    def launch_keys(self) -> list[tuple[Any, ...]]:
        """The specializations the backends reported launching (empty where none reports them)."""
        return [k for o in self.evidence.outcomes.values() if o.launch_keys for k in o.launch_keys]


def _compile_only() -> dict[str, Any]:
    return {"compiled": 0, "seconds": 0.0, "marked": 0, "skipped": 0}


@dataclass
class Tally:
    """A check's counts while it runs: cases drawn and judged, why others were not, caveats, shims, kernel lines
    run, time in each backend and phase, compiles."""

    cases: int = 0  # searched cases run (hypothesis's shrinking runs apart: `search_shrinks`)
    judged: int = 0  # cases (searched or replayed) with at least one pair of outcomes compared
    discarded: Counter[str] = field(default_factory=Counter)  # searched cases not judged, by reason
    max_examples: int | None = None  # the most cases the search may draw (judged or not)
    search_shrinks: int = 0  # runs of hypothesis's shrinking of the first failing case
    caveats: Counter[str] = field(default_factory=Counter)  # cases that passed with a caveat, by kind
    caveat_examples: dict[str, str] = field(default_factory=dict)
    shims: Counter[str] = field(default_factory=Counter)  # cases that needed each interpreter shim
    unbatched: Counter[str] = field(default_factory=Counter)  # cases run program by program, by why
    seconds: dict[str, float] = field(default_factory=dict)  # backend label -> seconds
    compiles: int = 0
    compile_seconds: float = 0.0
    cache_loads: int = 0
    compile_wait: float = 0.0
    compile_only: dict[str, Any] = field(default_factory=_compile_only)
    hang_timeout: float | None = None  # the shortened per-case timeout after a hang
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase the progress line shows
    # seconds waiting on opinions, on reruns, judging
    spent: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    lines_run: dict[str, set[int]] = field(default_factory=dict)  # "file:line:function" -> lines run
    lines_executable: dict[str, frozenset[int]] = field(default_factory=dict)  # ... -> lines with code
    _phase: tuple[str, float] | None = field(default=None, repr=False, compare=False)

    def enter(self, phase: str | None) -> None:
        """Start timing `phase` (None: stop), adding the time since the last call to the phase it ends."""
        now = time.perf_counter()
        if self._phase is not None:
            name, t0 = self._phase
            self.phases[name] = self.phases.get(name, 0.0) + now - t0
        self._phase = (phase, now) if phase is not None else None

    def caveat(self, kind: str, text: str) -> None:
        self.caveats[kind] += 1
        self.caveat_examples.setdefault(kind, text)

    def ran(self, outcomes: Iterable[Outcome]) -> None:
        """Count the time and compiles of one run of backends."""
        for o in outcomes:
            self.seconds[o.backend] = self.seconds.get(o.backend, 0.0) + o.seconds
            if o.role.kind == COMPILE_ONLY:  # (compiled without a GPU, apart from the compiled backend's compiles)
                done = self.compile_only
                done["compiled"] += o.compiles
                done["seconds"] += o.compile_seconds
                done["marked"] += o.cache_loads
                done["skipped"] += o.compile_skipped
                continue
            self.compiles += o.compiles
            self.compile_seconds += o.compile_seconds
            self.cache_loads += o.cache_loads
            self.compile_wait += o.compile_wait

    def add(self, record: CaseRecord) -> None:
        """Count a searched or replayed case: past the compile budget or not, judged or not, its caveats, the
        shims it needed, the kernel lines it ran."""
        v, ev = record.verdict, record.evidence
        if not record.compiled:
            self.caveat("budget", PAST_BUDGET)
        if record.judged:
            self.judged += 1
        used = {name for o in ev.outcomes.values() if o.trace is not None for name in o.trace.shims}
        for o in (*ev.outcomes.values(), *ev.extra.values()):
            t = o.trace
            if t is None:
                continue
            for key, lines in t.lines.items():
                self.lines_run.setdefault(key, set()).update(lines)
                self.lines_executable.setdefault(key, t.executable.get(key, frozenset()))
        for name in used:
            self.shims[name] += 1
        for why in {w for o in ev.outcomes.values() if o.trace is not None for w in o.trace.unbatched}:
            self.unbatched[why] += 1
        unpoisoned = [line for o in ev.outcomes.values() if o.trace is not None and not o.trace.poisoned
                      for line in o.trace.undefined]
        if unpoisoned and record.judged:
            self.caveat("masked-loads", f"masked-out lanes of `tl.load` without other= were zero-filled "
                                        f"(masked_loads='zero'), not checked for undefined reads: {unpoisoned[0]}")
        if not v.failed and record.judged:
            for kind, text in dict(v.notes).items():
                self.caveat(kind, text)
            computed = [k for o in ev.outcomes.values() if o.trace is not None for k in o.trace.unspecified]
            if computed:
                self.caveat("unspecified", f"results Triton leaves unspecified were computed and compared as the "
                                           f"backends gave them: {computed[0]}")
