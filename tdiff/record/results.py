"""What a check's run produced: counts, caveats, divergences. Plain data, assembled once by the runner and
read by the plugin, the CLI and `tdiff.verify`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.case import Case
from ..judge.evidence import Evidence
from ..judge.verdict import Verdict
from .check_record import CheckRecord
from .status import Status

__all__ = ["CheckRecord", "CheckResult", "Divergence", "Status"]


@dataclass
class Divergence:
    """A shrunk, judged divergence and where it was written."""

    check_id: str
    case: Case
    verdict: Verdict
    evidence: Evidence
    report: str = ""
    shrink: Any = None  # ShrinkInfo
    repro_path: Path | None = None
    corpus_path: Path | None = None
    pictures: list[Path] = field(default_factory=list)
    source: str = "search"  # "search" or "corpus entry <path>"
    repro_note: str = ""
    kernel_reduced: str = ""  # what kernel reduction did for the reproducer, or why it did not


@dataclass(frozen=True)
class CheckResult:
    """What a check's run produced, assembled once at its end (`tdiff.drive.runner.Runner.run_check`) from its
    `Tally`, its search's report, its replays and its status; `to_record()` gives its record (`CheckRecord`)."""

    check_id: str
    item_name: str
    opinions: tuple[str, ...]  # backend specs run on every case
    status: Status = Status.PASSED
    cases: int = 0  # cases run
    judged: int = 0  # cases with at least one pair of outcomes compared
    discarded: Counter[str] = field(default_factory=Counter)  # not judged at all, by reason
    caveats: Counter[str] = field(default_factory=Counter)  # cases that passed with a caveat, by kind
    caveat_examples: dict[str, str] = field(default_factory=dict)
    shims: Counter[str] = field(default_factory=Counter)  # cases that needed each interpreter shim
    # cases whose launches the interpreter ran program by program, by why a batch stopped ("reason at line")
    unbatched: Counter[str] = field(default_factory=Counter)
    fresh_workers: Counter[str] = field(default_factory=Counter)  # workers started fresh, not forked, by why
    divergences: tuple[Divergence, ...] = ()
    notes: tuple[str, ...] = ()
    why: str = ""  # the note that failed (or errored) the check where no divergence did, e.g. a stale entry
    seconds: dict[str, float] = field(default_factory=dict)
    compiles: int = 0
    compile_seconds: float = 0.0
    cache_loads: int = 0  # specializations loaded from Triton's on-disk cache
    compile_wait: float = 0.0  # seconds the GPU worker waited for a compile worker's compile (compile_claims)
    ahead: dict[str, Any] = field(default_factory=dict)  # what the compile workers did (tdiff.execute.ahead)
    # what the compile-only opinion did (no GPU): specializations compiled for sm_90 (through TTGIR), their
    # seconds, those found compiled by an earlier run, and launches not compiled (their classes compiled before)
    compile_only: dict[str, Any] = field(
        default_factory=lambda: {"compiled": 0, "seconds": 0.0, "marked": 0, "skipped": 0})
    replayed: tuple[tuple[str, str], ...] = ()  # (entry id, "passed"/"failed"/...)
    known: tuple[tuple[Any, dict[str, Any]], ...] = ()  # (entry path, recorded divergence) still showing
    wall: float = 0.0
    started: float | None = None  # when the check began, wall clock (time.time()): a run's timeline
    pid: int | None = None  # the process that ran it
    # where the wall time went: seconds per phase the progress line shows ("searching", "shrinking", ...), and
    # within cases, the test process waiting on opinions and on reruns, and judging (`CaseJudge`)
    phases: dict[str, float] = field(default_factory=dict)
    spent: dict[str, float] = field(default_factory=dict)
    pair_note: str | None = None  # why these opinions (e.g. no GPU)
    # the tolerances the check declares (its own, not tdiff's: loosened or not), as the summary shows them
    declared: tuple[str, ...] = ()
    compared: str = ""  # what a pass means: the opinions compared on every case
    budget_skipped: int = 0  # drawn cases run without the compiled backend (compile budget)
    budget_beyond: int = 0  # compiles past the budget
    hang_timeout: float | None = None  # the shortened per-case timeout after a hang
    first_failure: int | None = None  # which searched case failed first (1: the first one drawn)
    max_examples: int | None = None  # the most cases the search may draw (judged or not): the planned ones and more
    stopped: str = ""  # why the search stopped before drawing its cases, if it did
    search_shrinks: int = 0  # runs of hypothesis's shrinking of the first failing case (not counted as cases)
    # specialization classes of kernel arguments no case compiled ("k argument 0: never compiled ..."), and
    # those the compile budget skipped although drawn cases brought them
    spec_classes: tuple[str, ...] = ()
    spec_skipped: tuple[str, ...] = ()
    spec_unreachable: tuple[str, ...] = ()  # classes no case can reach, and why
    # the boundary plan's pairs of classes (tdiff.generate.plan.Coverage.as_dict), and its line
    plan: dict[str, Any] = field(default_factory=dict)
    plan_line: str = ""
    environments: dict[str, str] = field(default_factory=dict)  # backend in another environment -> its versions
    here: str = ""  # this environment's versions, where another environment ran
    other_versions: Counter[str] = field(default_factory=Counter)  # replayed entries recorded under another Triton
    # kernel coverage over the interpreter's runs: "file:line:function" -> lines run / lines with code
    lines_run: dict[str, set[int]] = field(default_factory=dict)
    lines_executable: dict[str, frozenset[int]] = field(default_factory=dict)

    @property
    def backends(self) -> tuple[str, ...]:
        return self.opinions

    @property
    def failures(self) -> list[Divergence]:
        return [d for d in self.divergences if d.verdict.failed]

    def record(self) -> CheckRecord:
        """Its record: what travels from an xdist worker and what --tdiff-json holds."""
        return CheckRecord.of(self)

    def to_record(self) -> dict[str, Any]:
        """Its record as JSON-able data (`CheckRecord.from_record` reads it back)."""
        return self.record().to_record()

    def report(self, notes: bool | None = None) -> str:
        """The failures' reports, then the notes where `notes` says (by default: where the check failed or
        errored)."""
        parts = [d.report for d in self.failures]
        if Status(self.status).bad if notes is None else notes:
            parts += [f"tdiff: {n}" for n in self.notes]
        return "\n\n".join(parts)

    def uncovered(self) -> list[str]:
        """The kernel lines no interpreter run of this check executed, one description per function."""
        return uncovered(self.lines_run, self.lines_executable)

    def caveat_lines(self) -> list[str]:
        """One line per kind of caveat: how many cases, and the first example."""
        out = []
        for kind, n in sorted(self.caveats.items()):
            out.append(f"{n} case(s): {self.caveat_examples[kind]}")
        return out


def uncovered(lines_run: Mapping[str, set[int]], lines_executable: Mapping[str, frozenset[int]]) -> list[str]:
    """The kernel lines of `lines_executable` (function key -> lines with code) not in `lines_run`, one
    description per function."""
    from ..execute.interpreter.coverage import describe, ranges

    out = []
    for key in sorted(lines_executable):
        code = lines_executable[key]
        missed = ranges(code - lines_run.get(key, set()), code)
        if missed:
            out.append(describe(key, missed))
    return out
