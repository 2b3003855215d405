"""A fuzz campaign's record (`--tdiff-campaign DIR`) and the table `tdiff campaign DIR` makes of it.

Every process running fuzz targets (HypoFuzz's, on any machine) appends to its own file,
`DIR/<host>-<pid>-<random>.jsonl`: a first line about the process (host, pid, slot, GPU), then for
each check a snapshot of its counts so far (cases run, seconds in them, divergences, the first
divergence's time and case count, the specializations and argument classes its cases' launches
reached, the layouts and special values its tensors were drawn with). A check's snapshot is written
at its first case and its first divergence, then every `interval` seconds while it changes (a thread
writes them), and at exit; snapshots are cumulative, so the last of each (file, check) stands for that
process, and a process killed at any moment loses at most its last `interval` seconds. `aggregate`
adds up the files of every process.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing.util
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.case import Case
from ..execute.compile_budget import INT_CLASSES, POINTER_CLASSES, features, layout_of

SUFFIX = ".jsonl"


def class_text(feature: tuple[Any, ...]) -> str:
    """An argument class of a launch key, for people: `kernel arg 1: *fp32 16-byte aligned`."""
    name, index, cls = feature
    if index == "options":
        return f"{name} options: {', '.join(f'{k}={v}' for k, v in cls) or 'default'}"
    if isinstance(cls, (tuple, list)) and len(cls) == 2:
        kind, flag = str(cls[0]), str(cls[1])
        if kind == "constexpr":
            text = f"constexpr {flag}"
        elif kind.startswith("*"):
            text = f"{kind} {POINTER_CLASSES.get(flag, flag)}"
        else:
            text = f"{kind} {INT_CLASSES.get(flag, flag)}"
    else:
        text = str(cls)
    return f"{name} arg {index}: {text}"


def value_classes(case: Case) -> set[str]:
    """What each tensor input was drawn with (`input: tag`: layout, alignment, dtype, special values)."""
    return {f"{name}: {tag}" for name, t in case.tensors().items() for tag in t.tags}


@dataclass
class _Check:
    t0: float  # wall clock of this process's first case of the check
    cases: int = 0
    judged: int = 0
    divergences: int = 0
    busy: float = 0.0  # seconds in its cases
    first_divergence: dict[str, Any] | None = None  # {"after_s": ..., "cases": ...}
    specializations: set[str] = field(default_factory=set)
    classes: set[str] = field(default_factory=set)
    values: set[str] = field(default_factory=set)
    dirty: bool = False


class Recorder:
    """One process's campaign file; `case(...)` records a case a fuzz target ran."""

    def __init__(self, directory: Path, process: dict[str, Any], interval: float = 2.0) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        self.path = self.directory / name
        self.interval = interval
        self.checks: dict[str, _Check] = {}
        self._keys: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (open for the process's life)
        self._line({"process": {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(),
                                **process}})
        atexit.register(self.close)
        # (a multiprocessing child, such as HypoFuzz's fuzz processes, runs these at exit, not atexit's)
        multiprocessing.util.Finalize(self, self.close, exitpriority=10)
        # and a thread writes what changed every `interval` seconds, for a process that is killed
        threading.Thread(target=self._flush_every, name="tdiff-campaign", daemon=True).start()

    def _flush_every(self) -> None:
        while not self._file.closed:
            time.sleep(self.interval)
            self.flush()

    def flush(self) -> None:
        """Write the snapshot of every check that changed since its last one."""
        with self._lock:
            if self._file.closed:
                return
            now = time.time()
            for check_id, rec in self.checks.items():
                if rec.dirty:
                    self._write(check_id, rec, now)

    def _line(self, obj: dict[str, Any]) -> None:
        self._file.write(json.dumps(obj, sort_keys=True) + "\n")
        self._file.flush()

    def case(self, check_id: str, case: Case, seconds: float, judged: bool, failed: bool,
             launch_keys: Iterable[tuple[Any, ...]] | None, predict: Callable[[Case], Any] | None = None) -> None:
        """Record one case: its time, whether it was judged and diverged, and what it reached.
        `launch_keys` are its launches' specializations where a backend reported them; otherwise
        `predict(case)` is asked, once per layout (the keys depend on nothing else)."""
        keys = tuple(launch_keys) if launch_keys else None
        if keys is None and predict is not None:
            layout = (check_id, layout_of(case))
            if layout not in self._keys:
                self._keys[layout] = predict(case)
            keys = self._keys[layout]
        with self._lock:
            self._case(check_id, case, seconds, judged, failed, keys)

    def _case(self, check_id: str, case: Case, seconds: float, judged: bool, failed: bool,
              keys: tuple[tuple[Any, ...], ...] | None) -> None:
        now = time.time()
        rec = self.checks.get(check_id)
        if rec is None:
            rec = self.checks[check_id] = _Check(t0=now - seconds)
        rec.cases += 1
        rec.judged += bool(judged)
        rec.busy += seconds
        for key in keys or ():
            rec.specializations.add(json.dumps(key, default=repr))
        rec.classes |= {class_text(f) for f in features(keys or ())}
        rec.values |= value_classes(case)
        first = failed and rec.first_divergence is None
        if failed:
            rec.divergences += 1
            if first:
                rec.first_divergence = {"after_s": round(now - rec.t0, 3), "cases": rec.cases, "case": case.digest()}
        rec.dirty = True
        if first or rec.cases == 1:
            self._write(check_id, rec, now)

    def _write(self, check_id: str, rec: _Check, now: float) -> None:
        self._line({"check": check_id, "t0": rec.t0, "t": now, "cases": rec.cases, "judged": rec.judged,
                    "divergences": rec.divergences, "busy_s": round(rec.busy, 6),
                    "first_divergence": rec.first_divergence, "specializations": sorted(rec.specializations),
                    "classes": sorted(rec.classes), "values": sorted(rec.values)})
        rec.dirty = False

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._file.close()


# ---------------------------------------------------------------- the report

SPECIALS = ("nan", "inf", "-inf", "-0.0", "subnormal", "max", "lowest", "tiny",
            "int-min", "int-max", "zero", "minus-one")


@dataclass
class CheckCampaign:
    """One check over every process of a campaign."""

    check: str
    processes: int = 0
    cases: int = 0
    judged: int = 0
    divergences: int = 0
    busy: float = 0.0
    start: float | None = None  # the earliest first case, wall clock
    first_divergence_at: float | None = None  # the earliest divergence, wall clock
    first_divergence_cases: int | None = None  # cases its process had run by then
    first_divergence_case: str | None = None  # its case id (the corpus entry's, before shrinking)
    specializations: set[str] = field(default_factory=set)
    classes: set[str] = field(default_factory=set)
    values: set[str] = field(default_factory=set)

    @property
    def rate(self) -> float:
        """Cases per second of a process fuzzing this check."""
        return self.cases / self.busy if self.busy > 0 else 0.0

    @property
    def time_to_first_divergence(self) -> float | None:
        if self.first_divergence_at is None or self.start is None:
            return None
        return self.first_divergence_at - self.start

    def specials(self) -> list[str]:
        found = {v.split(": ", 1)[-1] for v in self.values}
        return [s for s in SPECIALS if s in found]

    def as_json(self) -> dict[str, Any]:
        return {"check": self.check, "processes": self.processes, "cases": self.cases, "judged": self.judged,
                "divergences": self.divergences, "busy_s": self.busy, "cases_per_s": self.rate,
                "time_to_first_divergence_s": self.time_to_first_divergence,
                "cases_to_first_divergence": self.first_divergence_cases,
                "first_divergence_case": self.first_divergence_case,
                "specializations": sorted(self.specializations), "classes": sorted(self.classes),
                "values": sorted(self.values)}


@dataclass
class Campaign:
    checks: dict[str, CheckCampaign] = field(default_factory=dict)
    processes: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # lines that could not be read (a process killed mid-write)


def aggregate(directory: Path) -> Campaign:
    """Every process's file under `directory`, added up per check; each process's entry also gets its own
    totals (checks, cases, seconds in cases, its last snapshot's time)."""
    out = Campaign()
    for path in sorted(Path(directory).rglob(f"*{SUFFIX}")):
        last: dict[str, dict[str, Any]] = {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            out.problems.append(f"{path}: cannot be read ({exc})")
            continue
        for n, line in enumerate(lines, 1):
            try:
                obj = json.loads(line)
            except ValueError:
                out.problems.append(f"{path}:{n}: not a JSON line (skipped)")
                continue
            if "process" in obj:
                out.processes.append({**obj["process"], "file": str(path)})
            elif "check" in obj:
                last[obj["check"]] = obj
        for check_id, snap in last.items():
            _add(out.checks.setdefault(check_id, CheckCampaign(check_id)), snap)
        for proc in (p for p in out.processes if p["file"] == str(path)):  # the process this file is about
            proc.update(checks=len(last), cases=sum(int(x.get("cases", 0)) for x in last.values()),
                        busy_s=sum(float(x.get("busy_s", 0.0)) for x in last.values()),
                        last_t=max((float(x["t"]) for x in last.values()), default=None))
    return out


def _add(c: CheckCampaign, s: dict[str, Any]) -> None:
    c.processes += 1
    c.cases += int(s.get("cases", 0))
    c.judged += int(s.get("judged", 0))
    c.divergences += int(s.get("divergences", 0))
    c.busy += float(s.get("busy_s", 0.0))
    t0 = float(s["t0"])
    c.start = t0 if c.start is None else min(c.start, t0)
    first = s.get("first_divergence")
    if first:
        at = t0 + float(first["after_s"])
        if c.first_divergence_at is None or at < c.first_divergence_at:
            c.first_divergence_at, c.first_divergence_cases = at, int(first["cases"])
            c.first_divergence_case = first.get("case")
    c.specializations |= set(s.get("specializations") or ())
    c.classes |= set(s.get("classes") or ())
    c.values |= set(s.get("values") or ())


def table(campaign: Campaign) -> list[str]:
    """The campaign as a table, one row per check."""
    head = ("check", "procs", "cases", "cases/s", "first divergence", "specializations", "arg classes",
            "special values")
    rows = [head]
    for c in sorted(campaign.checks.values(), key=lambda c: c.check):
        ttf = c.time_to_first_divergence
        first = "-" if ttf is None else f"{ttf:.1f}s (case {c.first_divergence_cases})"
        rows.append((c.check, str(c.processes), str(c.cases), f"{c.rate:.1f}", first, str(len(c.specializations)),
                     str(len(c.classes)), " ".join(c.specials()) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def details(campaign: Campaign) -> list[str]:
    """Per check, every argument class and value class reached."""
    out = []
    for c in sorted(campaign.checks.values(), key=lambda c: c.check):
        out.append(f"{c.check}:")
        if c.first_divergence_case:
            out.append(f"  first divergence: case {c.first_divergence_case}")
        out += [f"  class  {x}" for x in sorted(c.classes)]
        out += [f"  values {x}" for x in sorted(c.values)]
    return out
