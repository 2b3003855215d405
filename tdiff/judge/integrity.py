"""What one outcome broke or left unobserved on its own, whatever the other backends did.

- out of bounds: an access outside every allocation (seen by the interpreter), or a guard band
  overwritten (seen in the bytes around each allocation);
- outside its view: bytes of an input's storage that belong to no view changed (gaps, padding,
  the other half of a split), or the kernel loaded such bytes (seen by the interpreter): memory that
  is not its input, which for a packed tensor of the same shape lies past the allocation or on
  other elements;
- undefined behaviour (e.g. a float-to-int cast out of range) and data races between programs,
  from the interpreter's trace;
- unobserved results: the declared kernel never launched; a returned tensor the kernel was given
  but never wrote; work written only into tensors nobody compares.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..core import dtypes
from ..core.case import Case, TensorArg
from ..core.outcome import Outcome, StorageOutcome
from .targets import guard_pattern, is_fill, storage_bytes, storage_values, unchanged, view

OOB, GUARD, GAP, GAP_READ, UB, RACE = "oob", "guard", "gap", "gap-read", "ub", "race"
UNLAUNCHED, UNWRITTEN, UNOBSERVED = "unlaunched", "unwritten", "unobserved"


@dataclass
class Finding:
    """One thing an outcome did wrong on its own."""

    kind: str
    backend: str
    message: str
    target: str = ""
    count: int = 0
    programs: tuple[int, ...] = ()
    detail: Any = None  # the Violation, Race or UBEvent behind it


@dataclass
class Report:
    findings: list[Finding]
    notes: list[tuple[str, str]]  # (kind, text): what was seen and not judged


@lru_cache(maxsize=8)
def _pattern(size: int) -> bytes:
    return guard_pattern(size)


def guard_damage(s: StorageOutcome) -> list[str]:
    """Descriptions of guard-band bytes that no longer hold the canary."""
    out = []
    before, after = s.guards()
    pattern = _pattern(s.guard)
    for label, band in (("before", before), ("after", after)):
        if band == pattern:
            continue
        diff = [i for i in range(len(band)) if band[i] != pattern[i]]
        if label == "before":
            dist = [s.guard - i for i in diff]
            out.append(f"{len(diff)} byte(s) overwritten {min(dist)} to {max(dist)} bytes before the storage")
        else:
            out.append(f"{len(diff)} byte(s) overwritten {min(diff)} to {max(diff)} bytes after the end of "
                       f"the storage")
    return out


def gap_damage(s: StorageOutcome, arg: TensorArg) -> tuple[int, list[int]]:
    """(count, first indices) of storage elements outside the view whose bytes changed."""
    dt = dtypes.dtype(s.dtype)
    if dt.name == arg.dtype and unchanged(s, arg):
        return 0, []  # the storage is byte for byte what went in
    mask = ~arg.in_view()
    if not mask.any():
        return 0, []
    if dt.name != arg.dtype:  # an upcast run: compare values, not bytes
        now = dtypes.as_float64(storage_values(s), dt)
        before = dtypes.as_float64(arg.storage, arg.dt)
        changed = mask & ~((now == before) | (np.isnan(now) & np.isnan(before)))
    else:
        n = arg.storage.size
        now = storage_bytes(s)
        before = np.ascontiguousarray(arg.storage).view(np.uint8).reshape(-1)
        changed = mask & (now.reshape(n, -1) != before.reshape(n, -1)).any(axis=1)
    idx = np.nonzero(changed)[0]
    return int(idx.size), [int(i) for i in idx[:5]]


def _memory(outcome: Outcome, case: Case) -> list[Finding]:
    out = []
    for v in (outcome.trace.violations if outcome.trace else []):
        line = f" ({v.line})" if v.line else ""
        out.append(Finding(OOB, outcome.backend, f"{outcome.backend}: program {v.program} tried to {v.op} "
                           f"{v.count} element(s) outside every allocation, first at {v.where}{line}",
                           count=v.count, detail=v))
    for name, arg in case.tensors().items():
        s = outcome.storages.get(name)
        if s is None:
            continue
        for text in guard_damage(s):
            out.append(Finding(GUARD, outcome.backend, f"{outcome.backend}: allocation `{name}`: {text}", name))
        count, first = gap_damage(s, arg)
        writers = outcome.trace.writers.get(name) if outcome.trace is not None else None
        if writers is not None and writers.shape == (arg.storage.size,):
            # a store the bytes do not show (e.g. NaN poison read, doubled and written back)
            stored = np.nonzero((writers >= 0) & ~arg.in_view())[0]
            if stored.size > count:
                count, first = int(stored.size), [int(i) for i in stored[:5]]
        if count:
            out.append(Finding(GAP, outcome.backend, f"{outcome.backend}: {count} element(s) of the storage of "
                               f"`{name}` outside its view ({arg.layout}) changed, first at storage index {first}",
                               name, count))
        read = outcome.trace.outside_reads.get(name) if outcome.trace is not None else None
        if read is not None:
            n, index, program, line = read
            out.append(Finding(GAP_READ, outcome.backend, f"{outcome.backend}: program {program} loaded {n} "
                               f"element(s) of the storage of `{name}` outside its view ({arg.layout}), first at "
                               f"storage index {index}" + (f" ({line})" if line else "") + ": memory that is not the "
                               "kernel's input (with a packed tensor of this shape, such loads read past the "
                               "allocation or other elements)", name, n))
    return out


def _program(pid: int, grid: tuple[int, int, int] | None) -> str:
    if grid is None or (grid[1] == 1 and grid[2] == 1):
        return f"program {pid}"
    x, y, z = pid % grid[0], (pid // grid[0]) % grid[1], pid // (grid[0] * grid[1])
    return f"program ({x}, {y}, {z})"


def _trace(outcome: Outcome, report: Report) -> None:
    t = outcome.trace
    if t is None:
        return
    for e in t.ub:
        report.findings.append(Finding(
            UB, outcome.backend, f"{e.what}: {e.count} value(s), e.g. {e.example}, in program {e.program}"
            + (f" ({e.line})" if e.line else ""), count=e.count, detail=e))
    grid = outcome.launches[0].grid if outcome.launches else None
    for r in t.races:
        g = outcome.launches[r.launch].grid if r.launch < len(outcome.launches) else grid
        text = (f"{r.kind}: {_program(r.first, g)} and {_program(r.second, g)} both access element {r.index} of "
                f"the storage of `{r.target}` in launch {r.launch} without atomics ({r.count} such element "
                f"access(es)); programs run in any order and at the same time on a GPU"
                + (f" ({r.line})" if r.line else ""))
        if t.sync:
            report.notes.append(("sync", f"{outcome.backend}: programs synchronize through {', '.join(t.sync)}; "
                                         f"a cross-program dependency was not judged as a race: {text}"))
        else:
            report.findings.append(Finding(RACE, outcome.backend, text, r.target, r.count, (r.first, r.second), r))
    if t.empty_launches:
        report.notes.append(("empty-grid", f"{outcome.backend}: {t.empty_launches} launch(es) had an empty grid "
                                           "(no program ran)"))


def _unobserved(outcome: Outcome, case: Case, kernel: str, report: Report) -> None:
    if not any(rec.kernel == kernel for rec in outcome.launches):
        report.findings.append(Finding(
            UNLAUNCHED, outcome.backend, f"{outcome.backend}: `launch` never launched the declared kernel `{kernel}`"
            + (f" (it launched {', '.join(sorted({r.kernel for r in outcome.launches}))})" if outcome.launches
               else "") + ": nothing of the kernel was compared"))
        return
    v = view(outcome, case)
    t = outcome.trace
    for path, target in v.targets.items():
        if path in case.tensors() or path in v.input_views or (t is not None and t.sampled):
            continue  # (a sample of programs leaves most elements unwritten by design)
        where = outcome.returned_args.get(path, {})
        if t is not None and target.writers is not None:
            never = (target.writers < 0) & is_fill(target)
        elif "launch" in where and t is not None:
            never = is_fill(target)  # passed to the kernel, never stored into
        elif "launch" in where and t is None and target.dtype.is_float and is_fill(target).all() and target.values.size:
            never = is_fill(target)  # compiled: still all tdiff's fill NaN (an integer fill is a legitimate value)
        else:
            continue
        if never.any():
            j = tuple(int(i) for i in np.argwhere(never)[0]) if never.ndim else ()
            report.findings.append(Finding(
                UNWRITTEN, outcome.backend, f"{outcome.backend}: {int(never.sum())} of {never.size} element(s) of "
                f"`{path}` were never written (they hold torch.empty's fill), first at {j}", path,
                int(never.sum())))
    if t is None:
        return
    hidden = [(label, n) for label, n, seen in t.scratch if not seen]
    if not hidden:
        return
    inputs_same = all(unchanged(outcome.storages[n], a) for n, a in case.tensors().items() if n in outcome.storages)
    returns_new = any(p not in case.tensors() and p not in v.input_views for p in v.targets) or bool(
        [x for x in v.leaves.values() if x is not None and not _opaque(x)])
    if inputs_same and not returns_new:
        parts = ", ".join(f"{n} element(s) of {label}" for label, n in hidden)
        report.findings.append(Finding(
            UNOBSERVED, outcome.backend, f"{outcome.backend}: the kernel wrote {parts}, a tensor `launch` made and "
            "did not return, and changed nothing `launch` was given or returned: its results were never "
            "compared (return the output from `launch`)"))


def _opaque(x: Any) -> bool:
    from ..core.outcome import Opaque

    return isinstance(x, Opaque)


def check(outcome: Outcome, case: Case, kernel: str, runs_kernel: bool) -> Report:
    """What one successful outcome broke on its own. `runs_kernel`: the backend runs the kernel
    (compiled, interpreter), as opposed to the reference."""
    report = Report([], [])
    if outcome.error is not None or not runs_kernel:
        return report
    report.findings += _memory(outcome, case)
    _trace(outcome, report)
    _unobserved(outcome, case, kernel, report)
    return report


__all__ = ["Finding", "Report", "check", "guard_damage", "gap_damage", "storage_values"]
