"""Where a run's CPU time goes, by kind of process: samples /proc while a command runs, then adds up each
process's CPU time (user + system, its last sample) by role: the pytest controller, the xdist test processes,
tdiff's worker lanes (gpu, cpu, ref, compile; from their environment), the reproducers tdiff verifies, and
the rest (ptxas, ...). Linux only.

    python -m bench.speed.cpu_by_process [--interval 0.5] [--json out.json] -- python -m pytest --tdiff suites -n 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _descendants(root: int) -> dict[int, tuple[int, float, float]]:
    """pid -> (parent, CPU seconds, start tick) of `root` and every process under it."""
    procs: dict[int, tuple[int, float, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat")
        if not stat:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        procs[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, float(fields[19]))
    keep: dict[int, tuple[int, float, float]] = {}
    frontier = [root]
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _, _) in procs.items():
        children[ppid].append(pid)
    while frontier:
        pid = frontier.pop()
        if pid in procs:
            keep[pid] = procs[pid]
        frontier += children.get(pid, [])
    return keep


def _role(pid: int) -> str:
    """What a process is: a tdiff worker by its lane (its name `tdiff-<lane>`, `worker_main.name_process`, or
    TDIFF_WORKER in its environment: a worker forked from a zygote has the zygote's), else by command line."""
    comm = _read(f"/proc/{pid}/comm").strip()
    if comm.startswith("tdiff-"):
        return "tdiff lane " + comm[len("tdiff-"):].rstrip("0123456789")
    cmd = _read(f"/proc/{pid}/cmdline").split("\0")
    env = dict(kv.split("=", 1) for kv in _read(f"/proc/{pid}/environ").split("\0") if "=" in kv)
    work = env.get("TDIFF_WORKER")
    if work and "python" in os.path.basename(cmd[0]):  # (its children, ptxas and the C compiler, inherit it)
        return "tdiff lane " + work.rstrip("0123456789")
    text = " ".join(cmd)
    if "sys.stdin.readline" in text:
        return "xdist test process"
    if "pytest" in text:
        return "pytest controller"
    if len(cmd) > 1 and cmd[1].endswith(".py"):
        return "python " + os.path.basename(cmd[1])
    return os.path.basename(cmd[0]) if cmd[0] else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--json")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd)
    seen: dict[int, dict] = {}
    while proc.poll() is None:
        for pid, (ppid, cpu, start) in _descendants(proc.pid).items():
            key = pid * 10**9 + int(start)  # (a pid reused by a later process is another process)
            rec = seen.get(key)
            if rec is None:
                rec = seen[key] = {"pid": pid, "ppid": ppid, "role": _role(pid), "cpu": cpu,
                                   "first": time.perf_counter() - t0}
            elif not rec["role"].startswith("tdiff lane") or rec["role"] == "tdiff lane zygote":
                # (a process read before its exec, its environment or its name: a fork of a zygote names itself)
                rec["role"] = _role(pid) if _role(pid) != "?" else rec["role"]
            rec["cpu"] = cpu
            rec["last"] = time.perf_counter() - t0
        time.sleep(args.interval)
    wall = time.perf_counter() - t0
    by_role: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for rec in seen.values():
        by_role[rec["role"]][0] += 1
        by_role[rec["role"]][1] += rec["cpu"]
    total = sum(v[1] for v in by_role.values())
    lines = [f"exit {proc.returncode}, wall {wall:.1f} s; CPU seen {total:.0f} core-seconds in {len(seen)} processes "
             f"(sampled every {args.interval:g} s: a process's last interval is not counted)",
             "| processes | count | CPU s | share |", "|---|---:|---:|---:|"]
    for role, (n, cpu) in sorted(by_role.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {role} | {n} | {cpu:.0f} | {100 * cpu / max(total, 1e-9):.0f}% |")
    print("\n".join(lines), file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"wall": wall, "processes": list(seen.values())}, f)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
