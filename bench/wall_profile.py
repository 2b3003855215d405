"""Where a `pytest --tdiff` run's time went, from its `--tdiff-json` file (and, optionally, a `vmstat 1` log of
the same run): the checks' wall time by phase (planning, searching, shrinking, reducing, ...), the test
processes' time within cases (waiting on opinions, waiting on reruns, judging), the backends' time (summed
over workers) and the compiles; then the checks that took longest.

    python bench/wall_profile.py run.json [--vmstat vmstat.log] [--top 15] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import statistics


def cpu_busy(path: str) -> str:
    """The CPU's busy share over a `vmstat N` log: mean, and the share of samples above 90%."""
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
    return (f"CPU busy {statistics.mean(busy):.0f}% on average over {len(busy)} samples (median "
            f"{statistics.median(busy):.0f}%); above 90% in {100 * high:.0f}% of them")


def profile(data: dict, top: int = 15, only: tuple[str, ...] = ()) -> list[str]:
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
    out = [f"{len(checks)} checks, {t['cases']} cases; checks' wall summed over workers: {wall:.1f} s",
           "phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])),
           "within cases (test processes): " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(spent.items())),
           f"backends: {all_backends:.1f} s summed (compiled {compiled:.1f} s, interpreter "
           f"{sum(v for k, v in backends.items() if k.startswith('interpreter')):.1f} s, reference "
           f"{sum(v for k, v in backends.items() if k.startswith('reference')):.1f} s)",
           f"compiles: {t['compiles']} specializations in {t['compile_seconds']:.1f} s "
           f"({100 * t['compile_seconds'] / max(all_backends, 1e-9):.0f}% of backend time, "
           f"{1e3 * t['compile_seconds'] / max(t['compiles'], 1):.0f} ms each), {loads} loaded from Triton's cache"]
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
    args = ap.parse_args()
    with open(args.json) as f:
        lines = profile(json.load(f), args.top, tuple(p for p in args.only.split(",") if p))
    if args.vmstat:
        lines.insert(1, cpu_busy(args.vmstat))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
