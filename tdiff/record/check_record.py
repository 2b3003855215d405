"""A check's record: its result as plain, typed data (`CheckRecord`, each divergence a `DivergenceRecord`), what
travels from an xdist worker in the test report and what `--tdiff-json` holds. `to_record()` gives the JSON-able
dict and `from_record()` reads one back; nothing else reads a record by its keys. Without torch or Triton: an
xdist controller prints the run's summary from its workers' records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .status import Status

if TYPE_CHECKING:
    from .results import CheckResult, Divergence


def _round(values: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in values.items()}


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(value or ())


@dataclass(frozen=True)
class DivergenceRecord:
    """One divergence of a check, as its record holds it."""

    verdict: str
    failed: bool = True
    finding: bool = False  # a finding (judge.findings), not a bug
    reasons: tuple[str, ...] = ()  # the verdict's first four reasons
    case: str = ""
    shrunk: str | None = None  # what shrinking did
    repro: str | None = None  # the reproducer's path
    repro_note: str | None = None  # why no reproducer was written
    kernel_reduced: str | None = None  # what kernel reduction did for the reproducer, or why it did not
    corpus: str | None = None  # the corpus entry's path
    source: str = "search"  # "search", "fuzz" or "corpus entry <path>"

    @classmethod
    def of(cls, d: Divergence) -> DivergenceRecord:
        return cls(verdict=d.verdict.label, failed=d.verdict.failed, finding=d.verdict.finding,
                   reasons=tuple(d.verdict.reasons[:4]), case=d.case.describe(),
                   shrunk=d.shrink.describe() if d.shrink else None,
                   repro=str(d.repro_path) if d.repro_path else None, repro_note=d.repro_note or None,
                   kernel_reduced=d.kernel_reduced or None, corpus=str(d.corpus_path) if d.corpus_path else None,
                   source=d.source)

    def to_record(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    @classmethod
    def from_record(cls, d: Mapping[str, Any]) -> DivergenceRecord:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        return cls(**{**values, "reasons": _strings(values.get("reasons"))})


@dataclass(frozen=True)
class PlanRecord:
    """A check's boundary plan as its record holds it: `tdiff.generate.plan.Coverage.as_dict()` with the seconds
    building or loading it took and where it came from (`cache`: "built" or "loaded"); every key kept as written
    (`data`), the ones tdiff reads typed."""

    pairs: int = 0
    covered: int = 0
    triples: int = 0
    triples_covered: int = 0
    seconds: float = 0.0
    cache: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uncovered(self) -> bool:
        """Whether the plan left pairs or triples of classes that no planned case held."""
        return bool(self.pairs) and (self.covered < self.pairs or self.triples_covered < self.triples)

    def to_record(self) -> dict[str, Any]:
        return dict(self.data)

    @classmethod
    def from_record(cls, d: Mapping[str, Any] | None) -> PlanRecord:
        d = d or {}
        return cls(pairs=int(d.get("pairs") or 0), covered=int(d.get("covered") or 0),
                   triples=int(d.get("triples") or 0), triples_covered=int(d.get("triples_covered") or 0),
                   seconds=float(d.get("seconds") or 0.0), cache=str(d.get("cache") or ""), data=dict(d))


@dataclass(frozen=True)
class CheckRecord:
    """A check's result as its record holds it (the fields in the record's order; docs/reference/json.md names
    each)."""

    id: str
    status: Status = Status.PASSED
    opinions: tuple[str, ...] = ()
    compared: str = ""
    environments: dict[str, str] = field(default_factory=dict)  # a backend in another environment -> its versions
    here: str = ""  # this environment's versions, where another one ran
    cases: int = 0
    max_examples: int | None = None
    judged: int = 0
    discarded: dict[str, int] = field(default_factory=dict)
    stopped: str | None = None
    caveats: tuple[str, ...] = ()
    caveat_counts: dict[str, int] = field(default_factory=dict)
    caveat_examples: dict[str, str] = field(default_factory=dict)
    shims: dict[str, int] = field(default_factory=dict)
    unbatched: dict[str, int] = field(default_factory=dict)
    fresh_workers: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    compiles: int = 0
    compile_seconds: float = 0.0
    cache_loads: int = 0
    compile_wait: float = 0.0
    compile_only: dict[str, Any] = field(default_factory=dict)
    ahead: dict[str, Any] = field(default_factory=dict)
    budget_skipped: int = 0
    budget_beyond: int = 0
    spec_classes: tuple[str, ...] = ()
    spec_skipped: tuple[str, ...] = ()
    spec_unreachable: tuple[str, ...] = ()
    plan: PlanRecord = field(default_factory=PlanRecord)
    plan_line: str = ""
    hang_timeout: float | None = None
    wall: float = 0.0
    started: float | None = None
    pid: int | None = None
    phases: dict[str, float] = field(default_factory=dict)
    spent: dict[str, float] = field(default_factory=dict)
    replayed: tuple[tuple[str, str], ...] = ()
    other_versions: dict[str, int] = field(default_factory=dict)
    search_shrinks: int = 0
    divergences: tuple[DivergenceRecord, ...] = ()
    notes: tuple[str, ...] = ()
    why: str = ""
    pair_note: str | None = None
    declared: tuple[str, ...] = ()
    never_ran: tuple[str, ...] = ()

    @classmethod
    def of(cls, r: CheckResult) -> CheckRecord:
        """The record of a check's result (times rounded to the millisecond)."""
        return cls(
            id=r.check_id, status=Status(r.status), opinions=tuple(r.opinions), compared=r.compared,
            environments=dict(r.environments), here=r.here, cases=r.cases, max_examples=r.max_examples,
            judged=r.judged, discarded=dict(r.discarded), stopped=r.stopped or None, caveats=tuple(r.caveat_lines()),
            caveat_counts=dict(r.caveats), caveat_examples=dict(r.caveat_examples), shims=dict(r.shims),
            unbatched=dict(r.unbatched), fresh_workers=dict(r.fresh_workers), seconds=_round(r.seconds),
            compiles=r.compiles,
            compile_seconds=round(r.compile_seconds, 3), cache_loads=r.cache_loads,
            compile_wait=round(r.compile_wait, 3),
            compile_only={k: round(v, 3) if isinstance(v, float) else v for k, v in r.compile_only.items()},
            ahead=dict(r.ahead), budget_skipped=r.budget_skipped, budget_beyond=r.budget_beyond,
            spec_classes=tuple(r.spec_classes), spec_skipped=tuple(r.spec_skipped),
            spec_unreachable=tuple(r.spec_unreachable), plan=PlanRecord.from_record(r.plan), plan_line=r.plan_line,
            hang_timeout=r.hang_timeout, wall=round(r.wall, 3), started=r.started, pid=r.pid,
            phases=_round(r.phases), spent=_round(r.spent), replayed=tuple((a, b) for a, b in r.replayed),
            other_versions=dict(r.other_versions), search_shrinks=r.search_shrinks,
            divergences=tuple(DivergenceRecord.of(d) for d in r.divergences), notes=tuple(r.notes), why=r.why,
            pair_note=r.pair_note, declared=tuple(r.declared), never_ran=tuple(r.uncovered()))

    def to_record(self) -> dict[str, Any]:
        """The record as JSON-able data: tuples as lists, the status as its string."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "status":
                value = Status(value).value
            elif f.name == "divergences":
                value = [d.to_record() for d in value]
            elif f.name == "replayed":
                value = [list(x) for x in value]
            elif f.name == "plan":
                value = value.to_record()
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_record(cls, d: Mapping[str, Any]) -> CheckRecord:
        """A record read back (a key a record lacks, from an older tdiff or a test, takes its default)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in d:
                continue
            value = d[f.name]
            if f.name == "status":
                value = Status(value)
            elif f.name == "divergences":
                value = tuple(DivergenceRecord.from_record(x) for x in value or ())
            elif f.name == "replayed":
                value = tuple((str(a), str(b)) for a, b in value or ())
            elif f.name == "plan":
                value = PlanRecord.from_record(value)
            elif isinstance(value, list):
                value = tuple(value)
            values[f.name] = value
        return cls(**values)

    @property
    def failed_divergences(self) -> list[DivergenceRecord]:
        """The divergences that fail the check."""
        return [d for d in self.divergences if d.failed]

    @property
    def is_finding(self) -> bool:
        """Whether the check failed on findings only (every divergence that fails it is one: judge.findings)."""
        failed = self.failed_divergences
        return self.status == Status.FAILED and bool(failed) and all(d.finding for d in failed)


def as_record(s: CheckRecord | Mapping[str, Any]) -> CheckRecord:
    """`s` as a `CheckRecord` (a record's dict read back by `from_record`)."""
    return s if isinstance(s, CheckRecord) else CheckRecord.from_record(s)
