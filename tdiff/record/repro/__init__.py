"""Standalone reproducers: one Python file (plus an .npz for large arrays) that shows a divergence.

The file needs only triton, torch and numpy. It rebuilds every input inside guard bands with its
exact strides and storage offset, replays the recorded launches, and shows the divergence of the
kind tdiff found: values that differ beyond the run's own per-element tolerance, a side that fails
or hangs, a guard band or a gap between views written (or a gap read), an access outside every
allocation, a data race or an undefined cast (the interpreter side runs under a small tracer for
those). The compiled side runs where a GPU is present, the interpreter everywhere (TRITON_INTERPRET=1,
in a subprocess, with tdiff's interpreter shims, which print what they worked around); a side that
cannot run here (the reference, or the GPU on a CPU machine) is replaced by its recorded result.
Kernels are inlined with the device functions they call, also those they reach through a library's
module (FlagGems' `tle.program_id`), so no library is imported; Triton dtypes passed as launch
arguments are rebuilt; `--live` launches the kernels from their modules instead (a fixed kernel).
The file exits 1 while the divergence is present, 0 once it is gone, 2 when nothing can run here.
tdiff keeps a reproducer only after it showed the same kind of divergence on the same targets in a
fresh process.

Modules: `render` (the file's text), `inline` (kernel source), `library` (the runtime and the shim
library, rendered from tdiff's source), `runtime` (what runs in the file), `verify` (write and keep).
"""

from __future__ import annotations

from typing import Any

from .errors import MARK, REPRODUCIBLE, ReproError
from .render import INLINE_LIMIT, _variants, render, versions
from .render import PRELUDE as _PRELUDE
from .verify import verify, write

__all__ = ["INLINE_LIMIT", "MARK", "REPRODUCIBLE", "ReproError", "_PRELUDE", "_variants", "render", "verify",
           "versions", "write"]


def __getattr__(name: str) -> Any:
    """`_RUNTIME`: a reproducer's runtime as text, after `_PRELUDE` (for tests that run them)."""
    if name == "_RUNTIME":
        from .library import runtime_source

        return runtime_source()
    raise AttributeError(name)
