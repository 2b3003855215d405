"""The reference backend: the user's torch/numpy function with the launch's inputs, minus the kernel."""

from __future__ import annotations

import time

from ...core.backend_spec import BackendSpec
from ...core.case import Case
from ...core.outcome import ErrorInfo, Outcome
from ..plan import LaunchPlan, LiveArgs, capture_returned, deterministic_empty
from .base import Target, error_info


class ReferenceBackend:
    """Runs `reference(**inputs)` on CPU (default) or on a GPU (`reference:cuda`)."""

    def __init__(self, spec: BackendSpec | None = None) -> None:
        self.spec = spec or BackendSpec("reference")
        self.name = self.spec.label
        self.device = self.spec.device or "cpu"

    def run(self, target: Target, case: Case) -> Outcome:
        t0 = time.perf_counter()
        outcome = Outcome(self.name)
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
            with deterministic_empty():
                returned = target.reference(**plan.inputs)
        except Exception as exc:
            outcome.error = error_info(exc)
        outcome.returned_args = LiveArgs().locate(returned, plan)
        outcome.storages = plan.snapshot()
        outcome.returned = capture_returned(returned)
        outcome.seconds = time.perf_counter() - t0
        return outcome
