"""What pytest prints for tdiff: each check's outcome word, labels as pytest's, and the run's summary.

By default the summary holds one table of what was worked around or caveated, counted per kind over the
checks, one block per check that did not pass (XFAIL, XPASS, then FAILED and ERROR, nearest the end), and
the totals; every check's own lines come first with -v (or --tdiff-summary full)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import pytest

if TYPE_CHECKING:
    from ..record.check_record import CheckRecord

XPASS_STRICT = "[XPASS(strict)]"


def label_of(report: pytest.TestReport) -> str:
    """The check's outcome as pytest labels it: PASSED, FAILED, ERROR, SKIPPED, XFAIL, XPASS, XPASS(strict)."""
    if hasattr(report, "wasxfail"):
        return "XFAIL" if report.skipped else "XPASS"
    if report.failed:
        if isinstance(report.longrepr, str) and report.longrepr.startswith(XPASS_STRICT):
            return "XPASS(strict)"
        return "FAILED" if report.when == "call" else "ERROR"
    return "SKIPPED" if report.skipped else "PASSED"


def xfail_reason(report: pytest.TestReport) -> str:
    """The xfail mark's reason behind an XFAIL or XPASS, else ''."""
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    if isinstance(report.longrepr, str) and report.longrepr.startswith(XPASS_STRICT):
        return report.longrepr[len(XPASS_STRICT):].strip()
    return ""


def teststatus(report: pytest.TestReport, results_key: str) -> tuple[str, str, Any] | None:
    """A check's word with its cases and time (`PASSED (20 cases, 1.2s)`); xfail and xpass are left to
    pytest's own words."""
    if report.when != "call" or hasattr(report, "wasxfail"):
        return None
    blob = dict(report.user_properties).get(results_key)
    if blob is None:
        return None
    from ..record.check_record import CheckRecord

    s = CheckRecord.from_record(json.loads(cast(str, blob)))  # (items.properties stores it as a JSON string)
    word = f"{report.outcome.upper()} ({s.cases} cases, {s.wall:.1f}s)"
    if report.passed:
        return "passed", ".", (word, {"green": True})
    if report.failed:
        return "failed", "F", (word, {"red": True})
    return None


def relative(record: CheckRecord, start: str) -> CheckRecord:
    """The record with its reproducer and corpus paths relative to `start` (where pytest was started)."""
    def rel(p: str | None) -> str | None:
        if not p:
            return p
        try:
            r = os.path.relpath(p, start)
        except ValueError:  # pragma: no cover (another drive)
            return p
        return p if r.startswith("..") else r

    divergences = tuple(replace(d, repro=rel(d.repro), corpus=rel(d.corpus)) for d in record.divergences)
    return replace(record, divergences=divergences)


#: the order of the blocks: the expected first, what failed last (just above the totals and pytest's summary)
BLOCK_ORDER = {"XFAIL": 0, "XPASS": 1, "ERROR": 2, "FAILED": 2, "XPASS(strict)": 2}


def summary_lines(ran: list[Any], full: bool, start: str = ".") -> list[str]:
    """The tdiff summary section: every check's lines when `full`; the table of what was worked around or
    caveated; a block per check that did not pass (what failed last); the totals. Paths are relative to
    `start`."""
    from ..record.summary import aggregate, check_lines, problem_lines, table_lines, total_lines

    lines: list[str] = []
    ordered = [replace(r, record=relative(r.record, start)) for r in sorted(ran, key=lambda r: r.record.id)]
    records = [r.record for r in ordered]
    if full:
        for r in ordered:
            lines += check_lines(r.record, r.label)
    lines += table_lines(aggregate(records))
    for r in sorted((r for r in ordered if r.label in BLOCK_ORDER), key=lambda r: BLOCK_ORDER[r.label]):
        lines += problem_lines(r.record, r.label, "" if r.label == "XFAIL" else r.reason)
    lines += total_lines(records, [r.label for r in ordered], shims=False)
    return lines


def write_summary(tr: Any, ran: list[Any], full: bool) -> None:
    if not ran:
        return
    tr.section("tdiff summary")
    tr.currentfspath = None  # (the section's line is ended: no newline is owed to pytest's last path)
    for line in summary_lines(ran, full, str(tr.config.invocation_params.dir)):
        tr.write_line(line)


def shorten_crash(report: pytest.TestReport, exc: BaseException | None) -> None:
    """A `tdiff.verify` failure's report is the exception's message: the traceback shows it whole, and
    pytest's short summary (which in CI repeats a message whole) gets its first line only."""
    from ..errors import DivergenceError

    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if not isinstance(exc, DivergenceError) or crash is None:
        return
    first = crash.message.split("\n", 1)[0]
    if first != crash.message:
        crash.message = first + " (the report above)"
