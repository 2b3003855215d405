"""Backends: ways to execute a case. Each returns an `Outcome`."""

from ...core.backend_spec import BackendSpec
from .base import Backend, Target, gpu_available
from .registry import make_backend

__all__ = ["Backend", "BackendSpec", "Target", "gpu_available", "make_backend"]
