"""The reference backend: the user's torch/numpy function with the launch's inputs, minus the kernel."""

from __future__ import annotations

import contextlib
import time

from ...core.backend_spec import BackendSpec
from ...core.case import Case
from ...core.outcome import ErrorInfo, Outcome
from ..plan import LaunchPlan, LiveArgs, capture_returned, deterministic_empty
from .base import Target, error_info
from .float32_arithmetic import float32_arithmetic


class ReferenceBackend:
    """Runs `reference(**inputs)` on CPU (default) or on a GPU (`reference:cuda`)."""

    def __init__(self, spec: BackendSpec | None = None) -> None:
        self.spec = spec or BackendSpec("reference")
        self.name = self.spec.label
        self.role = self.spec.role  # what its outcomes play
        self.device = self.spec.device or "cpu"

    def run(self, target: Target, case: Case) -> Outcome:
        t0 = time.perf_counter()
        outcome = Outcome(self.name, role=self.role)
        if target.reference is None:
            outcome.error = ErrorInfo("setup", f"check {target.name!r} declares no reference")
            return outcome
        try:
            plan = LaunchPlan(case, self.device, upcast=self.spec.upcast)
        except Exception as exc:
            outcome.error = error_info(exc, "setup")
            return outcome
        returned = None
        try:
            with deterministic_empty(), _arithmetic(self.spec, case):
                returned = target.reference(**plan.inputs)
        except Exception as exc:
            outcome.error = error_info(exc)
        outcome.returned_args = LiveArgs().locate(returned, plan)
        outcome.storages = plan.snapshot()
        outcome.returned = capture_returned(returned)
        outcome.seconds = time.perf_counter() - t0
        return outcome


def _arithmetic(spec: BackendSpec, case: Case) -> contextlib.AbstractContextManager:
    """`reference:fp32`: the reference's float64 arithmetic in float32 (`:faithful<k>`: rounded faithfully, `:ftz`:
    its math functions' subnormals flushed), unless the case itself holds float64 tensors (then float64 is its
    precision)."""
    if spec.demote and not any(_holds_float64(v) for v in case.inputs.values()):
        return float32_arithmetic(spec.faithful, flush=spec.flushed)
    return contextlib.nullcontext()


def _holds_float64(value: object) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_holds_float64(v) for v in value)
    return getattr(value, "dtype", None) == "float64"
