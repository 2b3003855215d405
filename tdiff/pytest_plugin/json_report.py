"""The --tdiff-json file: every check's record with its pytest outcome, the table of what was worked
around or caveated, and the run's totals."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..record.check_record import CheckRecord

#: the file's format; a reader checks it
FORMAT = 1
#: pytest's labels of a check that failed the run
RED = ("FAILED", "ERROR", "XPASS(strict)")


def payload(ran: list[Any]) -> dict[str, Any]:
    """What the file holds, from the checks that ran (`session.Ran`)."""
    from ..record.summary import aggregate, compile_only_total, outcome_counts

    records = [r.record for r in ran]
    totals = {
        "checks": len(ran),
        "outcomes": {label: sum(1 for r in ran if r.label == label) for label in sorted({r.label for r in ran})},
        "outcome_text": outcome_counts([r.label for r in ran]),
        "cases": sum(s.cases for s in records),
        "judged": sum(s.judged for s in records),
        "not_judged": sum(sum(s.discarded.values()) for s in records),
        "corpus_entries_replayed": sum(len(s.replayed) for s in records),
        "compiles": sum(s.compiles for s in records),
        "compile_seconds": round(sum(s.compile_seconds for s in records), 3),
        "compile_only": compile_only_total(records),
        # specializations compiled (on a GPU, and compile-only's) per case drawn
        "compiles_per_case": round((sum(s.compiles for s in records)
                                    + sum((s.compile_only or {}).get("compiled", 0) for s in records))
                                   / max(1, sum(s.cases for s in records)), 3),
        "plans": _plans(records),
        "seconds": _sum_seconds(records),
        "wall": round(sum(s.wall for s in records), 3),
        # failed checks whose every failing divergence is a finding (judge.findings), and the other failures
        "findings": sum(1 for r in ran if r.label in RED and r.record.is_finding),
        "bugs_or_errors": sum(1 for r in ran if r.label in RED and not r.record.is_finding),
    }
    return {"format": FORMAT, "totals": totals, "worked_around": [r.as_json() for r in aggregate(records)],
            "checks": [r.as_json() for r in sorted(ran, key=lambda r: r.record.id)]}


def _plans(records: list[CheckRecord]) -> dict:
    """The boundary plans: how many were built and how many loaded from an earlier run (`tdiff.drive.plan_cache`),
    and the seconds building or loading them took."""
    out: dict = {"built": 0, "loaded": 0, "seconds": 0.0}
    for s in records:
        if s.plan.cache in out:
            out[s.plan.cache] += 1
        out["seconds"] += s.plan.seconds
    out["seconds"] = round(out["seconds"], 3)
    return out


def _sum_seconds(records: list[CheckRecord]) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in records:
        for k, v in s.seconds.items():
            out[k] = round(out.get(k, 0.0) + v, 3)
    return dict(sorted(out.items()))


def write(path: Path, ran: list[Any]) -> None:
    """Write the file (through a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload(ran), indent=1) + "\n")
    os.replace(tmp, path)
