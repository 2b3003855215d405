"""The seed soak: tdiff's main job at N random seeds, every failure listed once (grouped by check and verdict,
with its reproducer), and the false-alarm rate per seed.

A correct kernel red at any seed is a defect of tdiff; a kernel's real finding is red at some seeds and names the
torch behaviour it differs from. The soak is how we see which is which:

    python -m bench.trust.soak --seeds 10                     # CPU: the dev profile a new user gets, 10 OS-random seeds
    python -m bench.trust.soak --seeds 10 -n 8 --fresh-triton-cache   # GPU: a fresh Triton cache per seed
    python -m bench.trust.soak --seed 123 --seed 456 --paths suites/liger   # given seeds, some suites

Each seed runs `pytest --tdiff PATHS -n N` in a fresh process with its own hypothesis database and run directory
(so no seed replays another's failures) under OUT/seed<S>/, and writes the run's `--tdiff-json`. The report
(OUT/soak.md, OUT/soak.json) lists every failed check once per (check, verdict) with the seeds it failed at, its
first reason and a reproducer; a failure counts as a false-alarm candidate unless its verdict is a finding
(`numerically unstable`, an intermediate overflow: the check's summary says which torch behaviour it differs from)
or it is a strict xfail that passed. Triage each candidate by hand: a FINDINGS entry, a precision the check
declares (with the reason in the suite), or a fix in tdiff; `bench/trust/soak.md` holds the table of what was seen.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: verdicts that report a finding (the kernel loses accuracy the problem does not): not false alarms by themselves
FINDING_VERDICTS = ("numerically unstable", "intermediate overflow")


@dataclass
class Failure:
    nodeid: str
    verdict: str
    seeds: list[int] = field(default_factory=list)
    reason: str = ""
    case: str = ""
    repro: str | None = None
    finding: bool = False
    xpass_strict: bool = False


def run_seed(seed: int, args: argparse.Namespace, out: Path) -> tuple[dict | None, float, int]:
    """One main job at `seed`; its JSON payload (None if the run wrote none), wall seconds and exit status."""
    here = out / f"seed{seed}"
    shutil.rmtree(here, ignore_errors=True)
    here.mkdir(parents=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(ROOT)
    if args.profile == "ci":
        env["CI"] = "true"
    else:
        env.pop("CI", None)
    if args.fresh_triton_cache:
        env["TRITON_CACHE_DIR"] = str(here / "triton-cache")
    json_path = here / "run.json"
    plugin = [] if _installed() else ["-p", "tdiff.plugin"]  # (a checkout used without installing it)
    cmd = [sys.executable, "-m", "pytest", *plugin, "--tdiff", *args.paths, "-n", str(args.workers), "-q",
           "-p", "no:cacheprovider", "--tdiff-seed", str(seed), "--tdiff-json", str(json_path),
           "--tdiff-run-dir", str(here / "run"), "--tdiff-database", str(here / "db"), *args.pytest_args]
    t0 = time.perf_counter()
    with open(here / "log.txt", "w") as log:
        code = subprocess.call(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if args.fresh_triton_cache:
        shutil.rmtree(here / "triton-cache", ignore_errors=True)
    payload = json.loads(json_path.read_text()) if json_path.exists() else None
    return payload, wall, code


def _installed() -> bool:
    """Whether tdiff's pytest plugin is registered by its entry point (tdiff installed)."""
    from importlib.metadata import entry_points

    return any(e.value == "tdiff.plugin" for e in entry_points(group="pytest11"))


def failures_of(payload: dict) -> list[tuple[str, str, dict, bool]]:
    """(nodeid, verdict, divergence, strict xpass) for every check of a run that pytest failed."""
    out = []
    for c in payload["checks"]:
        if c.get("outcome") == "XPASS(strict)":  # a strict xfail whose finding was not reached
            out.append((c["nodeid"], "XPASS(strict)", {"reasons": [c.get("xfail_reason") or ""]}, True))
            continue
        if c.get("outcome") not in ("FAILED", "ERROR"):
            continue
        failed = [d for d in c["divergences"] if d["failed"]] or [{"verdict": c["status"], "reasons": [c["why"]]}]
        for d in failed[:1]:
            out.append((c["nodeid"], d["verdict"], d, False))
    return out


def report(seeds: list[int], runs: dict[int, tuple[dict | None, float, int]], out: Path) -> str:
    grouped: dict[tuple[str, str], Failure] = {}
    alarms_by_seed: dict[int, int] = defaultdict(int)
    for seed in seeds:
        payload, _, _ = runs[seed]
        if payload is None:
            continue
        for nodeid, verdict, d, xpass in failures_of(payload):
            f = grouped.setdefault((nodeid, verdict), Failure(nodeid, verdict, xpass_strict=xpass))
            f.seeds.append(seed)
            f.finding = verdict in FINDING_VERDICTS
            if not f.reason:
                f.reason = (d.get("reasons") or [""])[0][:300]
                f.case = d.get("shrunk") or d.get("case") or ""
                f.repro = d.get("repro")
            if not f.finding:  # (a strict xfail that passed is red too: its finding was not reached)
                alarms_by_seed[seed] += 1
    lines = ["# Seed soak", "", f"{len(seeds)} seed(s): {', '.join(map(str, seeds))}", "",
             "| seed | exit | wall s | checks | passed | red | xfailed | xpassed | red, not a finding |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for seed in seeds:
        payload, wall, code = runs[seed]
        if payload is None:
            lines.append(f"| {seed} | {code} | {wall:.0f} | (no JSON: see seed{seed}/log.txt) | | | | | |")
            continue
        o = payload["totals"]["outcomes"]
        red = o.get("FAILED", 0) + o.get("ERROR", 0) + o.get("XPASS(strict)", 0)
        lines.append(f"| {seed} | {code} | {wall:.0f} | {payload['totals']['checks']} | {o.get('PASSED', 0)} | "
                     f"{red} | {o.get('XFAIL', 0)} | {o.get('XPASS', 0)} | {alarms_by_seed[seed]} |")
    red = sum(1 for s in seeds if alarms_by_seed[s])
    lines += ["", f"Red checks that are not findings (false-alarm candidates, or a strict xfail that passed): "
                  f"{sum(alarms_by_seed.values())} over {len(seeds)} seed(s); seeds with at least one: {red} of "
                  f"{len(seeds)} ({red / max(1, len(seeds)):.0%}).", ""]
    if grouped:
        lines += ["| check | verdict | kind | seeds | first reason | case | reproducer |",
                  "|---|---|---|---|---|---|---|"]
        for f in sorted(grouped.values(), key=lambda f: (-len(f.seeds), f.nodeid)):
            kind = "strict xfail passed" if f.xpass_strict else "finding" if f.finding else "false-alarm candidate"
            # (triage each by hand: a FINDINGS entry, a precision the check declares, or a fix in tdiff)
            cell = f.reason.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{f.nodeid}` | {f.verdict} | {kind} | {', '.join(map(str, f.seeds))} | {cell} | "
                         f"{f.case.replace('|', '/')[:120]} | {f.repro or ''} |")
    else:
        lines.append("No check failed at any seed.")
    text = "\n".join(lines) + "\n"
    (out / "soak.md").write_text(text)
    (out / "soak.json").write_text(json.dumps({
        "seeds": seeds,
        "runs": {str(s): {"wall": round(runs[s][1], 1), "exit": runs[s][2],
                          "totals": runs[s][0]["totals"] if runs[s][0] else None} for s in seeds},
        "failures": [f.__dict__ for f in grouped.values()],
        "false_alarm_seeds": red}, indent=1) + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=10, help="how many OS-random seeds (default 10)")
    p.add_argument("--seed", type=int, action="append", default=[], help="a given seed (repeatable); replaces --seeds")
    p.add_argument("--paths", nargs="+", default=["suites"], help="what pytest collects (default: suites)")
    p.add_argument("-n", dest="workers", type=int, default=2, help="xdist workers (default 2)")
    p.add_argument("--profile", choices=("dev", "ci"), default="dev",
                   help="dev: what a new user gets (default); ci: CI=true (derandomized: the seed matters less)")
    p.add_argument("--fresh-triton-cache", action="store_true", help="a new Triton cache per seed (GPU runs)")
    p.add_argument("--out", type=Path, default=ROOT / "tdiff-out" / "soak", help="where logs and the report go")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds: start no seed that would end past this (judged by the slowest seed so far)")
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = p.parse_args(argv)
    seeds = args.seed or [secrets.randbits(31) for _ in range(args.seeds)]
    args.out.mkdir(parents=True, exist_ok=True)
    runs: dict[int, tuple[dict | None, float, int]] = {}
    start = time.monotonic()
    for i, seed in enumerate(seeds, 1):
        slowest = max((w for _, w, _ in runs.values()), default=0.0)
        if args.budget is not None and runs and time.monotonic() - start + slowest > args.budget:
            print(f"budget of {args.budget:.0f} s: {len(seeds) - len(runs)} seed(s) not run", flush=True)
            break
        runs[seed] = run_seed(seed, args, args.out)
        payload, wall, code = runs[seed]
        totals = payload["totals"]["outcome_text"] if payload else "no JSON"
        print(f"[{i}/{len(seeds)}] seed {seed}: exit {code}, {wall:.0f} s: {totals}", flush=True)
        text = report(list(runs), runs, args.out)  # after every seed: a run cut short keeps what it did
    print(text if runs else "no seed run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
