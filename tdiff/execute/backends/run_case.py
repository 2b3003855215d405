"""Run one case on one backend in this process, reusing backends (and their compile caches)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.backend_spec import BackendSpec
from ...core.outcome import Outcome
from .base import Backend, error_info
from .registry import make_backend

if TYPE_CHECKING:
    from ...core.case import Case

_backends: dict[BackendSpec, Backend] = {}
_targets: dict[Any, Any] = {}  # resolved check references (workers see the same few over and over)


def backend_for(spec: BackendSpec) -> Backend:
    b = _backends.get(spec)
    if b is None:
        b = _backends[spec] = make_backend(spec)
    return b


def resolve(target: Any) -> Any:
    """The check a worker's target names (a reference with `.resolve()` is resolved once per process)."""
    if not hasattr(target, "resolve"):
        return target
    found = _targets.get(target)
    if found is None:
        found = _targets[target] = target.resolve()
    return found


def run_case(target: Any, spec: BackendSpec, case: Case) -> tuple[Outcome, bool]:
    """Run `case` on `spec`; returns the outcome and whether this process is still healthy.

    `target` is a check, or a reference with `.resolve()` that finds the check (in workers).
    """
    try:
        target = resolve(target)
        backend = backend_for(spec)
    except Exception as exc:
        out = Outcome.of(spec)
        out.error = error_info(exc, "setup")
        return out, True
    outcome = backend.run(target, case)
    healthy = not getattr(backend, "poisoned", False)
    if not healthy:
        _backends.pop(spec, None)
    return outcome, healthy
