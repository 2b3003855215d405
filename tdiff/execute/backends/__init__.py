"""Backends: ways to execute a case. Each returns an `Outcome`."""

from .base import Backend, BackendSpec, Target, gpu_available, make_backend

__all__ = ["Backend", "BackendSpec", "Target", "gpu_available", "make_backend"]
