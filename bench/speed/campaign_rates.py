"""Cases per second of each process of a fuzz campaign, and in total, from its `--tdiff-campaign` folder.

    python -m bench.speed.campaign_rates campaign/ [--json out.json]

Per process (one `<host>-<pid>-<random>.jsonl` file): its slot and GPU, the cases it ran (the last
snapshot of each check, summed), the seconds spent in them, and its wall span (its first line to its
last snapshot). The total divides every process's cases by the campaign's wall span (the earliest start
to the latest snapshot). The processes' cases are added up against the checks' (both from
`tdiff.record.campaign.aggregate`, which reads each process's file once): a snapshot read twice or
dropped would show as a difference.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from tdiff.record.campaign import aggregate  # noqa: E402


def processes(folder: Path) -> list[dict]:
    """Each process of the campaign (tdiff.record.campaign.aggregate reads its file) with its rates."""
    out = []
    for head in aggregate(folder).processes:
        cases, busy = int(head.get("cases", 0)), float(head.get("busy_s", 0.0))
        started = float(head["started"])
        ended = float(head["last_t"]) if head.get("last_t") is not None else started
        out.append({"file": Path(head["file"]).name, "pid": head.get("pid"), "slot": head.get("slot"),
                    "gpu": head.get("gpu"), "checks": head.get("checks", 0), "cases": cases, "busy_s": round(busy, 3),
                    "wall_s": round(ended - started, 3), "started": started, "ended": ended,
                    "cases_per_busy_s": round(cases / busy, 3) if busy else 0.0,
                    "cases_per_wall_s": round(cases / (ended - started), 3) if ended > started else 0.0})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    procs = processes(folder)
    if not procs:
        print(f"{folder}: no campaign files")
        return 1
    start, end = min(p["started"] for p in procs), max(p["ended"] for p in procs)
    total = sum(p["cases"] for p in procs)
    agg = sum(c.cases for c in aggregate(folder).checks.values())
    print("process  slot  gpu   checks  cases  busy s  wall s  cases/busy s  cases/wall s")
    for p in procs:
        print(f"{p['pid']!s:8} {p['slot']!s:5} {p['gpu']!s:5} {p['checks']:6}  {p['cases']:5}  {p['busy_s']:6.1f}  "
              f"{p['wall_s']:6.1f}  {p['cases_per_busy_s']:12.2f}  {p['cases_per_wall_s']:12.2f}")
    span = end - start
    print(f"total: {len(procs)} process(es), {total} cases in {span:.1f} s of wall time: "
          f"{total / span if span > 0 else 0:.2f} cases/s; tdiff campaign's aggregate counts {agg} cases"
          f" ({'the same' if agg == total else 'DIFFERENT'})")
    if args.json:
        Path(args.json).write_text(json.dumps({"processes": procs, "cases": total, "wall_s": span,
                                               "aggregate_cases": agg}, indent=1))
    return 0 if agg == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
