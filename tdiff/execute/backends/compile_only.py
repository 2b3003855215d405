"""The compile-only opinion: on a machine without a GPU, the specializations a case launches, compiled by
Triton's own JIT for a GPU (sm_90, `COMPILE_ONLY_ARCH`) through TTGIR, and not run.

Triton's interpreter runs kernels its compiler rejects (a Python `if` on a block tensor takes a branch; a
runtime value where a `tl.constexpr` is needed often just works), so without a GPU nothing else tells those
kernels apart. A case's launches are found by a dry launch (`tdiff.execute.launch_keys`: the check's `launch`
on CPU copies of the inputs, every kernel launch intercepted); each goes to the JIT with `warmup=True` under a
driver that only names the target (`tdiff.compat.compile_only`).

What it costs is kept down three ways (docs/explanation/opinions.md, "On a CPU-only machine: compile only", has
the figures):
- the pipeline stops after TTGIR (`STOP_AFTER`): the frontend, where a kernel's own mistakes are rejected, and
  Triton's TTIR and TTGIR passes, about a third of a full compile (LLVM IR with libdevice and ptxas are the
  rest); stopped compiles run in a scratch cache, so Triton's cache never holds a kernel without its binary;
- a specialization (launch key) is compiled where it brings a class the kernel has not compiled in this worker
  (an argument's dtype, 16-byte alignment, an integer equal to 1 or a multiple of 16, a constexpr value, the
  launch options); one that only combines classes compiled before is not compiled, and counted
  (`Outcome.compile_skipped`); a key compiled before gives its result again;
- a specialization that compiled leaves a mark beside Triton's cache (`tdiff-compile-only/`), which later runs
  read instead of compiling it again.
On Triton 3.4 (no launch keys) every launch is compiled.

A compile that fails is the outcome's error (kind "compile", naming the user's line: `compile_errors`); the
outcome holds no results and is compared with nothing (`tdiff.judge.verdict`: `compiled error (compile only)`).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...compat import compile_only
from ...core.backend_spec import COMPILE_ONLY, COMPILE_ONLY_ARCH, COMPILE_ONLY_STAGE, BackendSpec
from ...core.case import Case
from ...core.outcome import ErrorInfo, Outcome
from .. import compile_claims
from ..compile_budget import features
from ..compile_errors import compile_error, describe_key
from ..launch_keys import dry_launches
from ..stages.toolchain import scratch_cache
from .base import Target

SPEC = BackendSpec(COMPILE_ONLY)
#: the last stage of Triton's CUDA pipeline compile-only runs
STOP_AFTER = COMPILE_ONLY_STAGE


class _Stopped(Exception):
    """The last stage compile-only runs has run: the compile stops here, successfully."""


@contextlib.contextmanager
def stopping_after(stage: str) -> Iterator[None]:
    """Within the block Triton's backends run their pipelines up to `stage` and stop there (`_Stopped`)."""
    from triton.backends import backends

    saved = []
    for b in backends.values():
        cls = b.compiler
        original = cls.add_stages

        def add_stages(self: Any, stages: dict, *rest: Any, _original: Any = original) -> Any:
            out = _original(self, stages, *rest)
            if stage in stages:
                names = list(stages)
                for later in names[names.index(stage) + 1:]:
                    del stages[later]
                last = stages[stage]

                def stop(src: Any, metadata: Any, _last: Any = last) -> Any:
                    _last(src, metadata)
                    raise _Stopped(stage)

                stages[stage] = stop
            return out

        saved.append((cls, cls.__dict__.get("add_stages")))
        cls.add_stages = add_stages
    try:
        yield
    finally:
        for cls, own in saved:
            if own is None:
                delattr(cls, "add_stages")
            else:
                cls.add_stages = own


def _marks_dir() -> Path | None:
    """Where compiled specializations are marked: beside Triton's cache (None where it cannot be made)."""
    base = compile_claims.claims_dir()
    if base is None:
        return None
    path = base.parent / "tdiff-compile-only"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path


class CompileOnlyBackend:
    """Compiles the launches of a case for `COMPILE_ONLY_ARCH` without a GPU; an outcome without results whose
    error is the first compile that failed."""

    def __init__(self, spec: BackendSpec | None = None) -> None:
        import triton

        self.spec = spec or SPEC
        self.name = self.spec.label
        self.role = self.spec.role
        self.arch = COMPILE_ONLY_ARCH
        self.known: dict[str, ErrorInfo | None] = {}  # specialization (claim name) -> its compile's error, or None
        self.classes: dict[str, set] = {}  # kernel (its source key) -> the classes its compiles covered
        self.version = f"triton {triton.__version__}, sm_{self.arch}, through {STOP_AFTER}"
        self._marks: Path | None = None  # (found on first use: Triton's cache directory is set by then)
        self._marks_found = False

    def marks(self) -> Path | None:
        if not self._marks_found:
            self._marks, self._marks_found = _marks_dir(), True
        return self._marks

    def _mark(self, name: str) -> Path | None:
        where = self.marks()
        return where / hashlib.sha256(f"{name}|{self.version}".encode()).hexdigest()[:32] if where else None

    def compile_launch(self, outcome: Outcome, failed: list[ErrorInfo], jit: Any, original: Any, args: tuple,
                       grid: Any, kwargs: dict, key: tuple | None) -> None:
        """Compile one launch's specialization, where it brings a class not compiled before (a known one gives its
        first result again)."""
        name = compile_claims.name_of(jit, key) if key is not None else None
        kernel = str(getattr(jit, "cache_key", jit.fn.__qualname__))
        if name is not None and name in self.known:
            error = self.known[name]
        elif key is not None and not features([key]) - self.classes.get(kernel, set()):
            outcome.compile_skipped += 1  # (every class of it compiled before, in other combinations)
            return
        else:
            error = self._compile(outcome, jit, original, args, grid, kwargs, key, name)
            if name is not None:
                self.known[name] = error
            if key is not None:
                self.classes.setdefault(kernel, set()).update(features([key]))
        if error is not None:
            failed.append(error)

    def _compile(self, outcome: Outcome, jit: Any, original: Any, args: tuple, grid: Any, kwargs: dict,
                 key: tuple | None, name: str | None) -> ErrorInfo | None:
        mark = self._mark(name) if name is not None else None
        if mark is not None and mark.exists():  # compiled by an earlier run
            outcome.cache_loads += 1
            return None
        t0 = time.perf_counter()
        try:
            with compile_only(self.arch), stopping_after(STOP_AFTER), scratch_cache():
                original(jit, *args, grid=grid, warmup=True, **kwargs)
        except _Stopped:
            pass
        except Exception as exc:  # the compiler rejected it (or crashed): the case fails, naming the line
            outcome.compiles += 1
            outcome.compile_seconds += time.perf_counter() - t0
            return compile_error(exc, jit, describe_key(jit, key, self.arch))
        outcome.compiles += 1
        outcome.compile_seconds += time.perf_counter() - t0
        if mark is not None:
            with contextlib.suppress(OSError):
                mark.write_text(f"{jit.fn.__qualname__}: {describe_key(jit, key, self.arch)}\n")
        return None

    def run(self, target: Target, case: Case) -> Outcome:
        t0 = time.perf_counter()
        outcome = Outcome(self.name, role=self.role)
        failed: list[ErrorInfo] = []
        launch_failed: list[BaseException] = []

        def then(jit: Any, original: Any, args: tuple, grid: Any, kwargs: dict, key: tuple | None) -> None:
            self.compile_launch(outcome, failed, jit, original, args, grid, kwargs, key)

        outcome.launch_keys, outcome.launches = dry_launches(target, case, then=then, failed=launch_failed)
        if failed:
            outcome.error = failed[0]
        elif launch_failed:  # (the interpreter runs the same `launch`: it says what failed, where)
            exc = launch_failed[0]
            outcome.notes.append(f"{self.name}: `launch` failed on CPU copies of the inputs after "
                                 f"{len(outcome.launches)} launch(es) ({type(exc).__name__}: {str(exc)[:200]}): the "
                                 "launches after it were not compiled")
        outcome.seconds = time.perf_counter() - t0
        return outcome
