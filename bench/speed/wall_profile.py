"""Where a `pytest --tdiff` run's time went, from its `--tdiff-json` file (and, optionally, a `vmstat 1` log of
the same run): the checks' wall time by phase (planning, searching, shrinking, reducing, ...), the test
processes' time within cases (waiting on opinions, waiting on reruns, judging), the backends' time (summed
over workers) and the compiles; then the checks that took longest.

    python -m bench.speed.wall_profile run.json [--vmstat vmstat.log] [--top 15] [--only PREFIXES] [--workers 8]
                                          [--run-start EPOCH_SECONDS]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import statistics


def cpu_busy(path: str, cores: int) -> str:
    """The CPU's busy share over a `vmstat 1` log: mean, the share of samples above 90%, and the CPU work it
    adds up to (busy share times `cores` times seconds), with the wall that work needs at 100% of the cores."""
    busy = []
    with open(path) as f:
        header: list[str] | None = None
        for line in f:
            parts = line.split()
            if "us" in parts and "id" in parts:
                header = parts
                continue
            if header is None or len(parts) != len(header) or not parts[0].isdigit():
                continue
            row = dict(zip(header, map(int, parts)))
            busy.append(100 - row["id"] - row.get("wa", 0))
    if not busy:
        return "no samples"
    high = sum(b > 90 for b in busy) / len(busy)
    work = sum(busy) / 100 * cores
    return (f"CPU busy {statistics.mean(busy):.0f}% on average over {len(busy)} samples (median "
            f"{statistics.median(busy):.0f}%); above 90% in {100 * high:.0f}% of them; {work:.0f} core-seconds of "
            f"work, {work / cores:.0f} s at 100% of {cores} cores")


def makespan(walls: list[float], workers: int) -> float:
    """The checks' walls scheduled longest first on `workers` workers: the wall they need without start-up."""
    load = [0.0] * workers
    for w in sorted(walls, reverse=True):
        heapq.heapreplace(load, load[0] + w)
    return max(load)


def profile(data: dict, top: int = 15, only: tuple[str, ...] = (), workers: int = 8) -> list[str]:
    checks = [c.get("record", c) for c in data["checks"]]
    if only:
        checks = [c for c in checks if c["id"].startswith(only)]
    t = _totals(checks)
    wall = sum(c["wall"] for c in checks)
    phases: dict[str, float] = {}
    spent: dict[str, float] = {}
    for c in checks:
        for k, v in (c.get("phases") or {}).items():
            phases[k] = phases.get(k, 0.0) + v
        for k, v in (c.get("spent") or {}).items():
            spent[k] = spent.get(k, 0.0) + v
    backends = t["seconds"]
    compiled = sum(v for k, v in backends.items() if k.startswith("compiled"))
    all_backends = sum(backends.values())
    loads = sum(c.get("cache_loads") or 0 for c in checks)
    ahead = [c.get("ahead") or {} for c in checks]
    longest = max(checks, key=lambda c: c["wall"])
    out = [f"{len(checks)} checks, {t['cases']} cases; checks' wall summed over workers: {wall:.1f} s; longest first "
           f"on {workers} workers: {makespan([c['wall'] for c in checks], workers):.1f} s; the longest check "
           f"{longest['wall']:.1f} s ({longest['id']})",
           "phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])),
           "within cases (test processes): " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(spent.items())),
           f"backends: {all_backends:.1f} s summed (compiled {compiled:.1f} s, interpreter "
           f"{sum(v for k, v in backends.items() if k.startswith('interpreter')):.1f} s, reference "
           f"{sum(v for k, v in backends.items() if k.startswith('reference')):.1f} s)",
           f"compiles: {t['compiles']} specializations in {t['compile_seconds']:.1f} s "
           f"({100 * t['compile_seconds'] / max(all_backends, 1e-9):.0f}% of backend time, "
           f"{1e3 * t['compile_seconds'] / max(t['compiles'], 1):.0f} ms each), {loads} loaded from Triton's cache",
           f"compile workers: {sum(a.get('compiles', 0) for a in ahead)} specializations in "
           f"{sum(a.get('compile_seconds', 0.0) for a in ahead):.1f} s for {sum(bool(a) for a in ahead)} checks, "
           f"{sum(a.get('launchers', 0) for a in ahead)} launchers built in "
           f"{sum(a.get('launcher_seconds', 0.0) for a in ahead):.1f} s, "
           f"{sum(a.get('taken', 0) for a in ahead)} skipped as taken, {sum(a.get('done', 0) for a in ahead)} of "
           f"{sum(a.get('cases', 0) for a in ahead)} planned layouts gone through"]
    if top <= 0:
        return out
    out.append("")
    out.append("| check | wall s | planning | searching | shrinking | reducing | waiting (opinions / reruns) | "
               "judging | compiles (s) | interpreter s |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in sorted(checks, key=lambda c: -c["wall"])[:top]:
        p = c.get("phases") or {}
        s = c.get("spent") or {}
        shrink = sum(v for k, v in p.items() if k.startswith("shrinking"))
        interp = sum(v for k, v in c["seconds"].items() if k.startswith("interpreter"))
        out.append(f"| {c['id']} | {c['wall']:.1f} | {p.get('planning the boundaries', 0):.1f} | "
                   f"{p.get('searching', 0):.1f} | {shrink:.1f} | {p.get('reducing the kernel', 0):.1f} | "
                   f"{s.get('waiting on opinions', 0):.1f} / {s.get('waiting on reruns', 0):.1f} | "
                   f"{s.get('judging', 0):.1f} | {c['compiles']} ({c['compile_seconds']:.1f}) | {interp:.1f} |")
    return out


def timeline(checks: list[dict], run_start: float | None = None) -> list[str]:
    """When each test process began its first check and ended its last, and how long it sat between checks:
    start-up (before the first check) and the tail (after a process's last check, while others still run)."""
    timed = [c for c in checks if c.get("started") is not None and c.get("pid") is not None]
    if not timed:
        return ["timeline: the records have no start times (a tdiff before `started`)"]
    t0 = run_start if run_start is not None else min(c["started"] for c in timed)
    end = max(c["started"] + c["wall"] for c in timed)
    per: dict[int, list[dict]] = {}
    for c in timed:
        per.setdefault(c["pid"], []).append(c)
    firsts, lasts, gaps = [], [], []
    for cs in per.values():
        cs.sort(key=lambda c: c["started"])
        firsts.append(cs[0]["started"] - t0)
        lasts.append(cs[-1]["started"] + cs[-1]["wall"] - t0)
        gaps.append(sum(b["started"] - (a["started"] + a["wall"]) for a, b in zip(cs, cs[1:])))
    since = "the run's start" if run_start is not None else "the first check's start"
    return [f"timeline ({len(per)} test processes, seconds since {since}): first checks began at "
            f"{min(firsts):.1f}-{max(firsts):.1f} s; last checks ended at {min(lasts):.1f}-{max(lasts):.1f} s "
            f"(the last at {end - t0:.1f} s); between checks {sum(gaps):.1f} s summed"]


def _totals(checks: list[dict]) -> dict:
    seconds: dict[str, float] = {}
    for c in checks:
        for k, v in c["seconds"].items():
            seconds[k] = seconds.get(k, 0.0) + v
    return {"cases": sum(c["cases"] for c in checks), "compiles": sum(c["compiles"] for c in checks),
            "compile_seconds": sum(c["compile_seconds"] for c in checks), "seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("--vmstat", help="a `vmstat 1` log of the same run")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--only", default="", help="comma-separated prefixes of the check ids to count")
    ap.add_argument("--workers", type=int, default=8, help="xdist workers of the run (for the schedule)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="the run's machine's cores")
    ap.add_argument("--run-start", type=float, help="when the run began, seconds since the epoch")
    args = ap.parse_args()
    with open(args.json) as f:
        data = json.load(f)
    only = tuple(p for p in args.only.split(",") if p)
    lines = profile(data, args.top, only, args.workers)
    checks = [c.get("record", c) for c in data["checks"]]
    lines.insert(1, timeline([c for c in checks if not only or c["id"].startswith(only)], args.run_start)[0])
    if args.vmstat:
        lines.insert(1, cpu_busy(args.vmstat, args.cores))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
