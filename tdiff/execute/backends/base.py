"""The backend protocol, what a backend needs from a check, and errors as a user reads them (where in their code)."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...core.backend_spec import Role, short_path
from ...core.outcome import ErrorInfo, Outcome

if TYPE_CHECKING:
    from ...core.case import Case


class Target(Protocol):
    """What a backend needs from a check."""

    name: str
    kernel: Any
    launch: Callable[..., Any]
    reference: Callable[..., Any] | None


class Backend(Protocol):
    """Runs a case; its outcomes carry its display label (`name`) and what they play (`role`): a built-in
    backend's spec's (`spec.role`), or the part a backend plays for another (a test backend playing `compiled`)."""

    name: str
    role: Role

    def run(self, target: Target, case: Case) -> Outcome: ...


def gpu_available() -> bool:
    """Whether a CUDA GPU can run the compiled backend here."""
    from ..gpus import device_count

    return device_count() > 0


# ------------------------------------------------------------------ errors

_LIB_DIRS = tuple(
    os.path.dirname(importlib.util.find_spec(m).origin or "")  # type: ignore[union-attr]  # (installed: a spec)
    for m in ("triton", "torch", "numpy")
) + (str(Path(os.path.abspath(__file__)).parents[2]),)  # tdiff itself


def _is_library(filename: str) -> bool:
    return filename.startswith(_LIB_DIRS) or filename.startswith("<")


def user_frame(tb: Any) -> traceback.FrameSummary | None:
    """The innermost frame of a traceback that is user code (not triton, torch, numpy or tdiff)."""
    frames = traceback.extract_tb(tb)
    for fr in reversed(frames):
        if not _is_library(os.path.abspath(fr.filename)):
            return fr
    return None


def user_line_now() -> str:
    """`file:line: code` of the innermost user frame on the current stack."""
    f: types.FrameType | None = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not _is_library(fn):
            import linecache

            code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
            return f"{short_path(f.f_code.co_filename)}:{f.f_lineno}: {code}"
        f = f.f_back
    return ""


def error_info(exc: BaseException, kind: str | None = None) -> ErrorInfo:
    """An `ErrorInfo` that says what failed and where in the user's code (never a limitation: only
    the interpreter backend decides that, from `tdiff.core.limitations`)."""
    root = exc
    while root.__cause__ is not None and type(root).__name__ in ("InterpreterError", "KernelRunError"):
        root = root.__cause__
    fr = user_frame(root.__traceback__) or user_frame(exc.__traceback__)
    where = f"{short_path(fr.filename)}:{fr.lineno}: {(fr.line or '').strip()}" if fr else ""
    message = f"{type(root).__name__}: {root}".strip()
    program = getattr(exc, "program", None)
    if program is not None:
        message = f"{message} (program {program})"
    if kind is None:
        kind = "exception"
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]
    return ErrorInfo(kind=kind, message=message[:2000], where=where, details=details)
