"""Dry launches in a worker: which specializations a case's launches would compile, found without
compiling (see `tdiff.execute.launch_keys`). The launch function is user code, so it runs isolated
like every backend, in a CPU worker."""

from __future__ import annotations

from ...core.backend_spec import BackendSpec
from ...core.case import Case
from ...core.outcome import Outcome
from ..launch_keys import dry_launches
from .base import Target

SPEC = BackendSpec("specialize")


class SpecializeBackend:
    """Reports the launches `launch` makes and their keys (None when they cannot be told); runs no
    kernel."""

    def __init__(self, spec: BackendSpec | None = None) -> None:
        self.spec = spec or SPEC
        self.name = SPEC.label
        self.role = SPEC.role  # what its outcomes play

    def run(self, target: Target, case: Case) -> Outcome:
        outcome = Outcome(self.name, role=self.role)
        outcome.launch_keys, outcome.launches = dry_launches(target, case)
        return outcome
