"""Compiles ahead of use: a worker that compiles the specializations a case's launches need,
without running a kernel, so the GPU worker finds them in Triton's on-disk cache.

The check's `launch` runs on CPU copies of the case's inputs, as for a dry launch
(`tdiff.execute.launch_keys`); each launch is sent to Triton's JIT with `warmup=True`, which binds the
arguments, specializes them exactly as a real launch would (pointer alignment comes from the same
CPU copies the dry launch classifies) and compiles, but launches nothing. The compile lands in
`TRITON_CACHE_DIR`, shared with every worker of the machine. Several of these workers compile side
by side on the CPU cores a GPU machine has to spare, beside the search (`tdiff.execute.ahead`).
"""

from __future__ import annotations

import time
from typing import Any

from ...core.backend_spec import BackendSpec
from ...core.case import Case
from ...core.outcome import ErrorInfo, Outcome
from ..launch_keys import dry_launches
from .base import Target, error_info
from .compiled import _cache_size, _disk_entries


class PrecompileBackend:
    """Compiles a case's launches (`warmup=True`); its outcome counts compiles and holds no results."""

    def __init__(self, spec: BackendSpec | None = None) -> None:
        self.spec = spec or BackendSpec("precompile")
        self.name = "precompile"

    def run(self, target: Target, case: Case) -> Outcome:
        outcome = Outcome(self.name)
        t0 = time.perf_counter()
        failed: list[BaseException] = []

        def warm(jit: Any, original: Any, args: tuple, grid: Any, kwargs: dict) -> None:
            before, on_disk, t = _cache_size(jit), _disk_entries(), time.perf_counter()
            try:
                original(jit, *args, grid=grid, warmup=True, **kwargs)
            except Exception as exc:  # the real launch will fail the same way, and report it
                failed.append(exc)
                return
            new = _cache_size(jit) - before
            if new > 0 and on_disk >= 0 and _disk_entries() == on_disk:  # an earlier run compiled it
                outcome.cache_loads += new
            elif new > 0:
                outcome.compiles += new
                outcome.compile_seconds += time.perf_counter() - t

        outcome.launch_keys, outcome.launches = dry_launches(target, case, then=warm)
        if failed:
            outcome.error = error_info(failed[0])
        elif outcome.launch_keys is None and not outcome.launches:
            outcome.error = ErrorInfo("setup", "the launch function failed on CPU copies of the inputs")
        outcome.seconds = time.perf_counter() - t0
        return outcome
