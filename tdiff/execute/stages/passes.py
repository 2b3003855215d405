"""Control over Triton's pass pipeline during a compile, through Triton's own Python entry points.

Each stage of the NVIDIA backend (`make_ttir`, `make_ttgir`, `make_llir`, ...) is a Python function that
builds a pass manager with calls such as `passes.ttgpuir.add_pipeline(pm, ...)` and runs it. Within
`control(...)` tdiff wraps the stage functions (`CUDABackend.add_stages`) and every pass builder
(`triton._C.libtriton.passes.<group>.add_<pass>`, `...nvidia.passes.<group>.add_<pass>`), so that it can
record which builders each stage calls, leave chosen ones out (ablation), run code around a stage (capture
its dumps), or split a stage after one pass and edit the IR there (a planted miscompile, for tdiff's tests
and its GPU demo). The LLVM optimizer (`llvm.optimize_module`) can be switched off the same way.

A pass is named by a `PassCall`: its stage, its builder's qualified name (`ttgpuir.add_pipeline`), and which
call of that builder within the stage it is (`occurrence`, from 0: `remove_layout_conversions` runs three
times in make_ttgir).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PassCall:
    """One call of a pass builder in one stage of one compile."""

    stage: str
    builder: str  # "ttgpuir.add_pipeline", "nvidia.ttnvgpuir.add_plan_cta"
    occurrence: int  # which call of this builder within the stage (0 first)
    index: int = field(default=0, compare=False)  # which builder call within the stage (0 first)

    @property
    def key(self) -> tuple[str, str, int]:
        return self.stage, self.builder, self.occurrence

    def __str__(self) -> str:
        nth = f" #{self.occurrence + 1}" if self.occurrence else ""
        return f"{self.builder}{nth} in make_{self.stage}"


class Layer:
    """One user of `control`: may refuse builder calls, hears of the calls made, may wrap stage functions."""

    def allow(self, call: PassCall) -> bool:
        return True

    def added(self, call: PassCall) -> None:
        pass

    def wrap_stage(self, stage: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        return fn


class _Pipeline:
    """The patches, installed while any `control` block is open; they consult the open layers."""

    def __init__(self) -> None:
        self.layers: list[Layer] = []
        self.lock = threading.RLock()
        self.saved: list[tuple[Any, str, Any]] = []
        self.stage: str | None = None
        self.counts: dict[str, int] = {}
        self.calls = 0

    # -- stage functions
    def begin_stage(self, stage: str) -> tuple[Any, ...]:
        saved = (self.stage, self.counts, self.calls)
        self.stage, self.counts, self.calls = stage, {}, 0
        return saved

    def end_stage(self, saved: tuple[Any, ...]) -> None:
        self.stage, self.counts, self.calls = saved

    def restart_stage(self) -> None:
        """Count builder calls from 0 again (a stage function run a second time in the same stage)."""
        self.counts, self.calls = {}, 0

    def stage_function(self, stage: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        for layer in reversed(self.layers):  # the first layer opened ends up outermost
            fn = layer.wrap_stage(stage, fn)
        return fn

    # -- pass builders
    def builder(self, qualname: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def add(*args: Any, **kwargs: Any) -> Any:
            if self.stage is None:  # a pass manager built outside a stage function: leave it alone
                return fn(*args, **kwargs)
            occurrence = self.counts.get(qualname, 0)
            self.counts[qualname] = occurrence + 1
            call = PassCall(self.stage, qualname, occurrence, self.calls)
            self.calls += 1
            if not all(layer.allow(call) for layer in self.layers):
                return None
            for layer in self.layers:
                layer.added(call)
            return fn(*args, **kwargs)

        add.__name__ = qualname.rsplit(".", 1)[-1]
        return add

    def install(self) -> None:
        from triton._C.libtriton import nvidia, passes
        from triton.backends.nvidia.compiler import CUDABackend

        original = CUDABackend.__dict__["add_stages"]
        pipeline = self

        def add_stages(backend: Any, stages: dict, options: Any, *rest: Any, **kw: Any) -> Any:
            out = original(backend, stages, options, *rest, **kw)
            for name in list(stages):
                stages[name] = pipeline.tracked(name, pipeline.stage_function(name, stages[name]))
            return out

        self.saved = [(CUDABackend, "add_stages", original)]
        CUDABackend.add_stages = add_stages
        for qualname, module, attr in builders(passes, nvidia):
            fn = getattr(module, attr)
            self.saved.append((module, attr, fn))
            setattr(module, attr, self.builder(qualname, fn))

    def tracked(self, stage: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def run(src: Any, metadata: Any) -> Any:
            saved = self.begin_stage(stage)
            try:
                return fn(src, metadata)
            finally:
                self.end_stage(saved)

        return run

    def uninstall(self) -> None:
        for owner, attr, value in reversed(self.saved):
            setattr(owner, attr, value)
        self.saved = []


_PIPELINE = _Pipeline()
_TOOLS_CHANGED = [0]  # open blocks that change a tool below the MLIR passes (LLVM's optimizer, ptxas)


def changed() -> bool:
    """Whether tdiff is changing Triton's pipeline in this process now (a layer is open, or a tool is off):
    compiles then must not use Triton's on-disk cache, whose key does not show it."""
    return bool(_PIPELINE.layers) or _TOOLS_CHANGED[0] > 0


def builders(passes: Any, nvidia: Any) -> list[tuple[str, Any, str]]:
    """(qualified name, module, attribute) of every pass builder Triton's Python side can call."""
    found = []
    for prefix, root in (("", passes), ("nvidia.", getattr(nvidia, "passes", None))):
        if root is None:
            continue
        for group in dir(root):
            module = getattr(root, group)
            if not isinstance(module, types.ModuleType):
                continue
            found += [(f"{prefix}{group}.{attr}", module, attr) for attr in dir(module) if attr.startswith("add_")]
    return found


@contextlib.contextmanager
def control(*layers: Layer) -> Iterator[None]:
    """Within the block, compiles in this process go through `layers` (see `Layer`). Blocks nest."""
    with _PIPELINE.lock:
        if not _PIPELINE.layers:
            _PIPELINE.install()
        _PIPELINE.layers.extend(layers)
        try:
            yield
        finally:
            for layer in layers:
                _PIPELINE.layers.remove(layer)
            if not _PIPELINE.layers:
                _PIPELINE.uninstall()


# ------------------------------------------------------------------ layers

class Recorder(Layer):
    """Records every builder call made (in order), per compile."""

    def __init__(self) -> None:
        self.calls: list[PassCall] = []

    def added(self, call: PassCall) -> None:
        self.calls.append(call)

    def stage(self, stage: str) -> list[PassCall]:
        return [c for c in self.calls if c.stage == stage]


class Without(Layer):
    """Leaves the given builder calls out (an ablation); an occurrence of None leaves out every call of that
    builder in that stage."""

    def __init__(self, *calls: PassCall | tuple[str, str, int | None]) -> None:
        self.keys = {c.key if isinstance(c, PassCall) else tuple(c) for c in calls}
        self.removed: list[PassCall] = []

    def allow(self, call: PassCall) -> bool:
        if call.key in self.keys or (call.stage, call.builder, None) in self.keys:
            self.removed.append(call)
            return False
        return True


class _StopStage(Exception):
    """Raised by the first part of a planted stage once its pass manager has run."""

    def __init__(self, module: Any) -> None:
        super().__init__("planted: the stage stops after its first pass manager run")
        self.module = module


class Planted(Layer):
    """A miscompile planted after one pass: the stage's pass manager runs up to and including `call`, `edit`
    rewrites the module's text, and the stage runs again on the result with only the passes after `call`. If
    the pass is never added (absent, or taken out by an ablation), nothing is edited. `fired` counts edits."""

    def __init__(self, call: PassCall | tuple[str, str, int], edit: Callable[[str], str]) -> None:
        self.key = call.key if isinstance(call, PassCall) else tuple(call)
        self.edit = edit
        self.fired = 0
        self.phase = "off"  # "first": up to the pass; "rest": after it
        self.split_at: int | None = None

    def allow(self, call: PassCall) -> bool:
        if self.phase == "first":
            return self.split_at is None
        if self.phase == "rest":
            return call.index > self.split_at  # type: ignore[operator]  # (set before the phase turns to "rest")
        return True

    def added(self, call: PassCall) -> None:
        if self.phase == "first" and call.key == self.key:
            self.split_at = call.index

    def wrap_stage(self, stage: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        if stage != self.key[0]:
            return fn

        def planted(mod: Any, metadata: Any) -> Any:
            self.phase, self.split_at = "first", None
            try:
                with self._stop_after_run():
                    return fn(mod, metadata)
            except _StopStage as stop:
                edited = _reparse(stop.module, self.edit(str(stop.module)))
                self.fired += 1
                self.phase = "rest"
                _PIPELINE.restart_stage()
                return fn(edited, metadata)
            finally:
                self.phase = "off"

        return planted

    @contextlib.contextmanager
    def _stop_after_run(self) -> Iterator[None]:
        from triton._C.libtriton import ir

        original = ir.pass_manager.run
        layer = self

        def run(pm: Any, mod: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(pm, mod, *args, **kwargs)
            if layer.split_at is not None:
                raise _StopStage(mod)
            return out

        ir.pass_manager.run = run
        try:
            yield
        finally:
            ir.pass_manager.run = original


def _reparse(mod: Any, text: str) -> Any:
    from triton._C.libtriton import ir

    fd, path = tempfile.mkstemp(suffix=".mlir", prefix="tdiff-planted-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        new = ir.parse_mlir_module(path, mod.context)
        new.context = mod.context
        return new
    finally:
        os.unlink(path)


class StageHook(Layer):
    """Runs `around(stage)` (a context manager factory) around every call of a stage function."""

    def __init__(self, around: Callable[[str], contextlib.AbstractContextManager]) -> None:
        self.around = around

    def wrap_stage(self, stage: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def run(src: Any, metadata: Any) -> Any:
            with self.around(stage):
                return fn(src, metadata)

        return run


@contextlib.contextmanager
def llvm_optimizer_off() -> Iterator[None]:
    """Within the block the LLVM optimizer (`llvm.optimize_module`, -O3 on the kernel's LLVM IR) does nothing."""
    from triton._C.libtriton import llvm

    original = llvm.optimize_module
    llvm.optimize_module = lambda *args, **kwargs: None
    _TOOLS_CHANGED[0] += 1
    try:
        yield
    finally:
        _TOOLS_CHANGED[0] -= 1
        llvm.optimize_module = original


@contextlib.contextmanager
def ptxas_optimizer_off() -> Iterator[None]:
    """Within the block ptxas runs with `--opt-level 0` (Triton's DISABLE_PTXAS_OPT knob)."""
    from triton import knobs

    with knobs.nvidia.scope():
        knobs.nvidia.disable_ptxas_opt = True
        _TOOLS_CHANGED[0] += 1
        try:
            yield
        finally:
            _TOOLS_CHANGED[0] -= 1
