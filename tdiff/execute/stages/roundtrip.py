"""Round trips: recompiling a kernel from one of its own stages must give the kernel compiled from source.

A stage opinion (`compiled[from=ttgir]`) is only an opinion about the kernel if its round trip is exact:
the same cubin bytes as the compile from source, or, where the bytes differ, the same results bit for bit
on the case. A round trip that is neither is a problem of the lane on this Triton, never a finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...core.limitations import IR_COMPILE, IR_SPECIALIZATION, LANE_PROBLEMS, ROUNDTRIP, STAGE_COMPILE
from .ir_override import pinned, store
from .support import first_line
from .toolchain import CompileJob

LANE_REASONS = LANE_PROBLEMS  # (the one table lives in tdiff.core.limitations)
__all__ = ["IR_COMPILE", "IR_SPECIALIZATION", "LANE_REASONS", "ROUNDTRIP", "STAGE_COMPILE", "LaneError", "RoundTrip",
           "round_trip", "same_results", "stage_file"]


class LaneError(RuntimeError):
    """A stage lane could not give its opinion on a case (`reason`: one of LANE_REASONS)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class RoundTrip:
    stage: str
    exact: bool  # the same cubin bytes
    path: Path | None  # the stage file compiled back
    detail: str = ""


def stage_file(kernel: Any, stage: str, spec: str, about: str = "") -> Path:
    """A kernel's own `stage` text (or cubin), pinned to its specialization, as a content-hashed file."""
    text = kernel.asm[stage]
    return store(pinned(text, spec, stage, about), stage, kernel.metadata.name, spec)


def round_trip(job: CompileJob, stage: str) -> RoundTrip:
    """Compile `job` from its own `stage` through `ir_override` (no GPU needed) and compare the cubins."""
    reference = job.reference if job.reference is not None else job.compile()
    path = stage_file(reference, stage, job.spec, job.label)
    try:
        again = job.compile(ir_override=str(path))
    except Exception as exc:  # noqa: BLE001 - any compiler failure means no round trip
        return RoundTrip(stage, False, path, first_line(exc))
    same = again.asm["cubin"] == reference.asm["cubin"]
    return RoundTrip(stage, same, path, "" if same else "the cubin bytes differ")


def same_results(a: Any, b: Any) -> str | None:
    """None when two outcomes hold the same bytes in every storage and every returned value; else where not."""
    if (a.error is None) != (b.error is None):
        return f"one run failed: {(a.error or b.error).summary()}"
    if set(a.storages) != set(b.storages):
        return "they hold different storages"
    for name, s in a.storages.items():
        if s.data != b.storages[name].data:
            return f"the storage of `{name}` differs"
    if not _same(a.returned, b.returned):
        return "the returned values differ"
    return None


def _same(x: Any, y: Any) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    values = getattr(x, "values", None)
    if isinstance(values, np.ndarray):
        return x.dtype == y.dtype and tuple(x.shape) == tuple(y.shape) and values.tobytes() == y.values.tobytes()
    if isinstance(x, float):
        return np.float64(x).tobytes() == np.float64(y).tobytes()
    return x == y
