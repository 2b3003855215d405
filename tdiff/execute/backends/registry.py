"""The registry of backend kinds: builds the backend a `BackendSpec` names. It lives apart from what it builds, so
none of the backends imports it back."""

from __future__ import annotations

import importlib

from ...core.backend_spec import COMPILE_ONLY, BackendSpec
from .base import Backend


def make_backend(spec: BackendSpec) -> Backend:
    if spec.kind == "compiled":
        from .compiled import CompiledBackend

        return CompiledBackend(spec)
    if spec.kind == "interpreter":
        from ..interpreter.backend import InterpreterBackend

        return InterpreterBackend(spec)
    if spec.kind == "reference":
        from .reference import ReferenceBackend

        return ReferenceBackend(spec)
    if spec.kind == COMPILE_ONLY:  # compiled for a GPU without one, not run; compared with nothing
        from .compile_only import CompileOnlyBackend

        return CompileOnlyBackend(spec)
    if spec.kind == "specialize":  # dry launches for the compile budget, never compared
        from .dry_launch import SpecializeBackend

        return SpecializeBackend(spec)
    mod, attr = spec.factory
    factory = getattr(importlib.import_module(mod), attr)
    return factory(spec)
