"""Summaries of check results: the lines `pytest --tdiff` and `tdiff` print from each check's record
(`CheckRecord`, which travels from xdist workers in the test report; a record's dict is read back by
`CheckRecord.from_record`). Every case that was not compared, every caveat a pass carries and every shim the
interpreter needed is named and counted."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.backend_spec import COMPILE_ONLY_ARCH, COMPILE_ONLY_STAGE
from ..execute.interpreter.shim_names import DESCRIPTIONS as SHIMS
from .check_record import CheckRecord, DivergenceRecord, as_record


def record(result: Any) -> dict[str, Any]:
    """A check result as plain data (what travels from an xdist worker, what --tdiff-json holds)."""
    return CheckRecord.of(result).to_record()


def check_lines(record: CheckRecord | Mapping[str, Any], label: str | None = None) -> list[str]:
    """The summary of one check: a status line (labelled `label`, pytest's outcome where given, else tdiff's
    status), then its divergences, caveats and notes."""
    s = as_record(record)
    verdicts: dict[str, int] = defaultdict(int)
    for d in s.divergences:
        verdicts[d.verdict] += 1
    vtext = ", ".join(f"{n} {v}" for v, n in verdicts.items()) or "no divergence"
    times = ", ".join(f"{k} {v:.2f}s" for k, v in s.seconds.items())
    replay = f", replayed {len(s.replayed)}" if s.replayed else ""
    comp = f", {s.compiles} compiles ({s.compile_seconds:.1f}s)" if s.compiles else ""
    if s.cache_loads:
        comp += f", {s.cache_loads} loaded from Triton's cache"
    comp += compile_only_text(s.compile_only, ", ")
    judged = f"{s.judged} judged" + (f", {sum(s.discarded.values())} not judged" if s.discarded else "")
    label = label or s.status.upper()
    lines = [f"{label:7} {s.id}: {s.cases} cases ({judged}){replay}; compared: {s.compared}"
             f"{environments(s)}; {vtext}; {s.wall:.1f}s ({times}{comp})"]
    for d in s.divergences:
        if d.shrunk:
            lines.append(f"          shrunk: {d.shrunk}")
        lines += _written(d)
    for reason, n in s.discarded.items():
        lines.append(f"          not judged: {n} case(s): {reason}")
    for c in s.caveats:
        lines.append(f"          passed with a caveat: {c}")
    for name, n in s.shims.items():
        lines.append(f"          interpreter: worked around {name} in {n} case(s): {SHIMS.get(name, name)}")
    for why, n in s.unbatched.items():
        lines.append(f"          interpreter: ran programs one by one in {n} case(s): a batch stopped: {why}")
    for why, n in s.fresh_workers.items():
        lines.append(f"          workers: {n} started as fresh interpreters, not forked: {why}")
    for text in s.never_ran:
        lines.append(f"          kernel code no case ran: {text}")
    for text in s.spec_classes:
        lines.append(f"          specialization classes: {text}")
    for text in s.spec_unreachable:
        lines.append(f"          specialization classes: {text}")
    if s.plan_line:
        lines.append(f"          boundary plan: {s.plan_line}")
    if s.hang_timeout:
        lines.append(f"          after a hang, runs of this check waited at most {s.hang_timeout:.1f}s")
    for note in s.notes:
        lines.append(f"          note: {note}")
    return lines


def environments(record: CheckRecord | Mapping[str, Any]) -> str:
    """`; environments: interpreter@/venv/bin/python: triton 3.9.0, ...; here: triton 3.6.0, ...` where a
    backend ran in another environment, else ''."""
    s = as_record(record)
    if not s.environments:
        return ""
    return "; environments: " + "; ".join(f"{k}: {v}" for k, v in s.environments.items()) + f"; here: {s.here}"


def compile_only_text(done: Mapping[str, Any], sep: str) -> str:
    """What the compile-only opinion did, for a summary line ('' where it did nothing)."""
    if not any(done.get(k) for k in ("compiled", "marked", "skipped")):
        return ""
    text = f"{sep}compile-only: {done.get('compiled', 0)} specializations compiled for sm_{COMPILE_ONLY_ARCH} " \
           f"through {COMPILE_ONLY_STAGE.upper()} ({done.get('seconds', 0.0):.1f}s)"
    if done.get("marked"):
        text += f", {done['marked']} compiled by an earlier run"
    if done.get("skipped"):
        text += f", {done['skipped']} launches not compiled (their classes compiled in other combinations)"
    return text


def compile_only_total(records: Sequence[CheckRecord | Mapping[str, Any]]) -> dict[str, Any]:
    """The compile-only opinion's counts over checks."""
    out: dict[str, Any] = {"compiled": 0, "seconds": 0.0, "marked": 0, "skipped": 0}
    for s in map(as_record, records):
        for k, v in s.compile_only.items():
            out[k] = out.get(k, 0) + v
    out["seconds"] = round(out["seconds"], 3)
    return out


def waited(records: Sequence[CheckRecord | Mapping[str, Any]]) -> float:
    return sum(as_record(s).compile_wait for s in records)


def total_lines(records: Sequence[CheckRecord | Mapping[str, Any]], labels: list[str] | None = None,
                shims: bool = True) -> list[str]:
    """The run's totals: checks (with pytest's outcomes, where `labels` gives them), cases, time in each
    backend, compiles; the shims used (unless `shims` is False: the table counts them) and why these opinions."""
    summaries = [as_record(s) for s in records]
    totals: dict[str, float] = defaultdict(float)
    cases = judged = compiles = loads = replayed = 0
    compile_seconds = 0.0
    used: dict[str, int] = defaultdict(int)
    for s in summaries:
        cases += s.cases
        replayed += len(s.replayed)
        judged += s.judged
        compiles += s.compiles
        loads += s.cache_loads
        compile_seconds += s.compile_seconds
        for k, v in s.seconds.items():
            totals[k] += v
        for k, v in s.shims.items():
            used[k] += v
    t = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(totals.items()))
    comp = f"; {compiles} specializations compiled in {compile_seconds:.1f}s" if compiles else ""
    ahead = [s.ahead for s in summaries if s.ahead]
    if ahead:
        comp += (f"; {sum(a['compiles'] for a in ahead)} compiled ahead by compile workers in "
                 f"{sum(a['compile_seconds'] for a in ahead):.1f}s (the GPU workers waited {waited(summaries):.1f}s "
                 "for them)")
    if loads:
        comp += f", {loads} loaded from Triton's cache"
    comp += compile_only_text(compile_only_total(summaries), "; ")
    entries = f" and {replayed} corpus entries" if replayed else ""
    outcomes = f"; {outcome_counts(labels)}" if labels else ""
    red = [s for s, label in zip(summaries, labels or ()) if label in ("FAILED", "ERROR", "XPASS(strict)")]
    if red:
        found = sum(1 for s in red if s.is_finding)
        outcomes += f"; of those failed: {len(red) - found} bug(s) or error(s), {found} finding(s)"
    lines = [f"tdiff: {len({s.id for s in summaries})} checks, {cases} cases{entries} ({judged} judged){outcomes}; "
             f"time in backends: {t}{comp}"]
    if used and shims:
        lines.append("tdiff: stock TRITON_INTERPRET=1 would differ or fail where tdiff's interpreter used "
                     + ", ".join(f"{k} ({v} cases)" for k, v in sorted(used.items())))
    notes: dict[str, int] = defaultdict(int)
    for s in summaries:  # (those without a reference are a row of the table)
        if s.pair_note and (shims or "no reference" not in s.pair_note):
            notes[s.pair_note] += 1
    for note, n in sorted(notes.items()):
        lines.append(f"tdiff: {note}" + (f" ({n} of {len(summaries)} checks)" if n < len(summaries) else ""))
    for text in sorted({environments(s) for s in summaries} - {""}):
        lines.append(f"tdiff: {text.removeprefix('; ')}")
    return lines


# ---------------------------------------------------------------- the compact run summary

#: how long an example in the table, or a case in a one-line block, may be
EXAMPLE_CHARS = 200
#: how long a row of the table's text may be (kind and example)
ROW_CHARS = 150
#: a check's block lists at most this many notes
BLOCK_NOTES = 6


def _cut(text: str, limit: int = EXAMPLE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def problem_lines(record: CheckRecord | Mapping[str, Any], label: str, reason: str = "") -> list[str]:
    """The block of a check that did not pass, labelled as pytest labels it (FAILED, ERROR, XFAIL, XPASS,
    XPASS(strict)): its verdicts, shrunk case and reproducer; for an XFAIL one line. `reason` is the
    xfail mark's reason, where there is one."""
    s = as_record(record)
    failed = s.failed_divergences
    what = ", ".join(dict.fromkeys(d.verdict for d in failed))
    if not what:
        first = s.why or next((n for n in s.notes if n), "")
        what = "no divergence" if not s.status.bad else _cut(first) or s.status.value
    count = f"{s.cases} cases, {s.wall:.1f}s"
    head = f"{label:7} {s.id}: {what}"
    if s.is_finding:
        head += " (a finding: the kernel loses accuracy its problem does not, against torch's own computation)"
    if label == "XFAIL":
        d = failed[0] if failed else None
        line = head + (f" on {_cut(d.case, 80)}" if d else "") + f" ({count})"
        if d and d.repro:
            line += f"; reproducer: {d.repro}"
        return [line]
    lines = [f"{head} ({count})"]
    if reason:
        lines.append(f"          xfail: {_cut(reason)}")
    for d in failed:
        where = "" if d.source in ("search", "fuzz") else f", {d.source}"
        shrunk = f" (shrunk: {d.shrunk})" if d.shrunk else ""
        lines.append(f"          case: {d.case}{where}{shrunk}")
        lines += _written(d, run=True)
    notes = [n for n in s.notes if n != what]
    for n in notes[:BLOCK_NOTES]:
        lines.append(f"          note: {_cut(n, 400)}")
    if len(notes) > BLOCK_NOTES:
        lines.append(f"          ({len(notes) - BLOCK_NOTES} more notes: -v or --tdiff-json)")
    return lines


@dataclass
class Row:
    """One kind of thing worked around or caveated, across checks."""

    kind: str
    checks: list[str] = field(default_factory=list)  # the checks it concerns, in order
    cases: int | None = 0  # cases it concerns (None: not counted in cases)
    example: str = ""  # the first check's text, or the kind's description

    def add(self, check: str, cases: int | None, example: str) -> None:
        if check not in self.checks:
            self.checks.append(check)
        if self.cases is not None and cases is not None:
            self.cases += cases
        else:
            self.cases = None
        self.example = self.example or example

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "checks": len(self.checks), "cases": self.cases, "example": self.example,
                "check_ids": self.checks}


def aggregate(records: Sequence[CheckRecord | Mapping[str, Any]]) -> list[Row]:
    """What the run worked around or caveated, one row per kind: interpreter shims, caveats of passing
    cases, tolerances checks declare, cases not judged, kernel code no case ran, specialization classes never
    compiled (and those the compile budget skipped), shortened timeouts, corpus entries recorded under another
    Triton, checks with fewer opinions (no reference). Counted over checks and cases; never repeated per check."""
    rows: dict[str, Row] = {}

    def row(kind: str, cases: int | None = 0) -> Row:
        return rows.setdefault(kind, Row(kind, cases=cases))

    for s in sorted(map(as_record, records), key=lambda s: s.id):
        cid = s.id
        for name, n in sorted(s.shims.items()):
            row(f"interpreter shim {name}").add(cid, n, SHIMS.get(name, name))
        for kind, n in sorted(s.caveat_counts.items()):
            row(f"passed with a caveat ({kind})").add(cid, n, s.caveat_examples.get(kind, ""))
        if s.declared:
            row("tolerances the check declares (its own, not tdiff's)", None).add(cid, None, "; ".join(s.declared))
        for reason, n in sorted(s.discarded.items()):
            row(f"not judged: {reason}").add(cid, n, "")
        if s.never_ran:
            row("kernel code no case ran", None).add(cid, None, s.never_ran[0])
        if s.spec_skipped:
            row("specialization classes the compile budget skipped", None).add(cid, None, s.spec_skipped[0])
        if s.spec_classes:
            row("specialization classes no case compiled", None).add(cid, None, s.spec_classes[0])
        if s.plan.uncovered:
            row("boundary plan: triples or pairs of classes no planned case held", None).add(
                cid, None, s.plan_line)
        if s.hang_timeout:
            row("per-case timeout shortened after a hang", None).add(
                cid, None, f"runs waited at most {s.hang_timeout:.1f}s")
        for version, n in sorted(s.other_versions.items()):
            row(f"corpus entries recorded under {version}").add(cid, n, "replayed under this run's Triton")
        if s.pair_note and "no reference" in s.pair_note:
            row("compared without a reference", None).add(cid, None, s.pair_note)
        for why, n in sorted(s.unbatched.items()):
            row("interpreted program by program (the same result, slower): a batch stopped").add(cid, n, why)
        for why, n in sorted(s.fresh_workers.items()):
            row("workers started as fresh interpreters, not forked (the same result, slower)", None).add(
                cid, None, f"{why} ({n} workers)")
    order = ("interpreter shim", "passed with a caveat", "tolerances the check", "not judged", "kernel code",
             "specialization", "boundary plan",
             "per-case",
             "corpus entries", "compared without", "interpreted program by program", "workers started")
    return sorted(rows.values(), key=lambda r: (next(i for i, o in enumerate(order) if r.kind.startswith(o)),
                                                -len(r.checks), r.kind))


def table_lines(rows: list[Row]) -> list[str]:
    """The table of `aggregate`: how many checks and cases per kind, and one example (or the description)."""
    if not rows:
        return []
    lines = ["tdiff: worked around or caveated (checks, cases; each check's own lines: -v, or --tdiff-json):"]
    for r in rows:
        cases = "-" if r.cases is None else str(r.cases)
        text = _cut(f"{r.kind}: {r.example}" if r.example else r.kind, ROW_CHARS)
        where = f" ({r.checks[0]}" + (f" and {len(r.checks) - 1} more)" if len(r.checks) > 1 else ")")
        if r.kind.startswith("interpreter shim"):
            where = ""
        lines.append(f"  {len(r.checks):>5} {cases:>6}  {text}{where}")
    return lines


def outcome_counts(labels: list[str]) -> str:
    """`3 passed, 1 failed, 2 xfailed`, from pytest's labels of the checks, in pytest's order."""
    order = ["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
    names = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped", "XFAIL": "xfailed",
             "XPASS": "xpassed", "XPASS(strict)": "failed"}
    counts: dict[str, int] = defaultdict(int)
    for label in labels:
        counts[names.get(label, label.lower())] += 1
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k))


def is_finding(record: CheckRecord | Mapping[str, Any]) -> bool:
    """Whether a check failed on findings only (every divergence that fails it is one: judge.findings)."""
    return as_record(record).is_finding


def _written(d: DivergenceRecord, run: bool = False) -> list[str]:
    """A divergence's reproducer (or why none was written) and corpus entry, one line each."""
    lines = []
    if d.repro:
        lines.append(f"          reproducer: {d.repro}" + (f" (run: python {d.repro})" if run else ""))
    elif d.repro_note:
        lines.append(f"          reproducer: not written ({d.repro_note})")
    if d.corpus:
        lines.append(f"          corpus entry: {d.corpus}")
    return lines
