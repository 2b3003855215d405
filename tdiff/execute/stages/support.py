"""What the stage opinions need from the installed Triton, and a clear error naming the version where it lacks it.

Everything here reads Triton's own sources' mechanisms (checked on Triton 3.4.0, 3.5.1, 3.6.0, 3.7.1, 3.8.0 and
3.9.0): the `ir_override` compile option (`CUDAOptions`, all six), the `passes.*.add_*` pass builders (all six),
MLIR's per-pass dumps (`MLIR_ENABLE_DUMP`, all six) and the NVIDIA backend's stage functions (`add_stages`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from functools import lru_cache

import triton

from ...core.backend_spec import FROM_STAGES, IR_STAGES

#: the stages a compiled kernel keeps, in pipeline order; `ir_override` replaces the output of any of them
STAGES = IR_STAGES
__all__ = ["FROM_STAGES", "MLIR_STAGES", "STAGES", "StageUnsupported"]
#: the stages whose passes are MLIR passes, dumped one by one (make_llir's run before the LLVM translation)
MLIR_STAGES = ("ttir", "ttgir", "llir")


class StageUnsupported(RuntimeError):
    """The installed Triton cannot do what a stage opinion or the localizer needs (the message names it)."""


def first_line(exc: BaseException, limit: int = 200) -> str:
    """`Type: first line of the message`, for one-line reasons."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:limit] if text else ''}".rstrip(": ")


def triton_version() -> str:
    return triton.__version__


def version_tuple() -> tuple[int, int]:
    found = re.findall(r"\d+", triton.__version__)
    return int(found[0]), int(found[1])


@lru_cache(maxsize=1)
def cuda_options() -> type:
    """Triton's `CUDAOptions` (the NVIDIA backend's compile options)."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError as exc:  # pragma: no cover - every supported wheel ships the NVIDIA backend
        raise StageUnsupported(f"Triton {triton.__version__} has no NVIDIA backend: stage opinions compile "
                               "for CUDA only") from exc
    return CUDAOptions


def option_names() -> frozenset[str]:
    return frozenset(cuda_options().__dataclass_fields__)  # type: ignore[attr-defined]  # (a dataclass, untyped)


def require_ir_override() -> None:
    """`ir_override` is how a stage's output is replaced (Triton 3.4 to 3.9 have it)."""
    if "ir_override" not in option_names():
        raise StageUnsupported(f"Triton {triton.__version__} has no `ir_override` compile option (CUDAOptions): "
                               "stage opinions and the localizer need it (Triton 3.4 to 3.9 have it)")


def require_override_unset() -> None:
    """Under TRITON_KERNEL_OVERRIDE Triton ignores `ir_override` (compiler.py reads one or the other): refuse
    rather than run the kernel compiled from source under a stage opinion's name."""
    from triton import knobs

    if knobs.compilation.override:
        raise StageUnsupported("TRITON_KERNEL_OVERRIDE is set: Triton then ignores the `ir_override` option that "
                               "stage opinions use; unset it to run compiled[from=...] / compiled[ir=...]")


class Captured:
    """What a `captured_stderr` block wrote to file descriptor 2."""

    text: str = ""


@contextlib.contextmanager
def captured_stderr() -> Iterator[Captured]:
    """Within the block, file descriptor 2 (where MLIR's dumps, diagnostics and reproducers go) writes to a
    temporary file; its text is in the yielded object afterwards."""
    out = Captured()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            out.text = f.read().decode(errors="replace")
