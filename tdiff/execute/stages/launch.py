"""A stage lane in the compiled backend: every launch of `compiled[from=<stage>]` or `compiled[ir=<file>]`.

Each launch is compiled from source as usual (Triton's JIT, its cache), then compiled again through
`ir_override` from its own stage text (`from=`) or from the user's file (`ir=`, only for launches of the
file's specialization: see `ir_override`), and that second kernel is launched. `from=` checks each round
trip: the same cubin bytes as the kernel from source, or else (`finish`) the same results bit for bit as a
rerun of the case compiled from source; anything else is a lane problem (`LaneError`), never a finding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .ir_override import IrFile
from .roundtrip import IR_COMPILE, IR_SPECIALIZATION, ROUNDTRIP, STAGE_COMPILE, LaneError, same_results, stage_file
from .support import FROM_STAGES, first_line, require_ir_override, require_override_unset
from .toolchain import describe, spec_id


@dataclass
class CaseState:
    """What one case's launches did under the lane."""

    used: int = 0  # launches run from the stage / the IR file
    skipped: list[str] = field(default_factory=list)  # why other launches ran compiled from source (ir=)
    inexact: list[str] = field(default_factory=list)  # specializations whose round trip changed the cubin bytes


class StageLane:
    """The per-launch work of a stage lane; one per backend (it keeps the round trips it has checked)."""

    def __init__(self, stage: str | None = None, ir: str | None = None) -> None:
        if (stage is None) == (ir is None):
            raise ValueError("a stage lane takes from=<stage> or ir=<file>")
        if stage is not None and stage not in FROM_STAGES:
            raise ValueError(f"from={stage}: a compiled kernel is recompiled from {', '.join(FROM_STAGES)}")
        require_ir_override()
        require_override_unset()
        self.stage = stage
        self.ir = IrFile.load(ir) if ir is not None else None
        self.exact: dict[str, bool] = {}  # source kernel hash -> its round trip gave the same cubin
        self.paths: dict[str, tuple[Any, str | None]] = {}  # source kernel hash -> (file to run, why not)

    def begin(self) -> CaseState:
        return CaseState()

    def error(self, exc: BaseException) -> Any:
        """The `ErrorInfo` (kind "lane") of a lane problem raised during a case, or None for other errors."""
        from ...core.outcome import ErrorInfo

        seen: set[int] = set()
        e: BaseException | None = exc
        while e is not None and id(e) not in seen:
            if isinstance(e, LaneError):
                return ErrorInfo("lane", str(e), limitation=e.reason)
            seen.add(id(e))
            e = e.__cause__ or e.__context__
        return None

    @property
    def name(self) -> str:
        return f"from={self.stage}" if self.stage else f"ir={self.ir.path}"  # type: ignore[union-attr]  # (no stage: an IR file)

    def wrap(self, original: Callable[..., Any], state: CaseState) -> Callable[..., Any]:
        """`original` (JITFunction.run) as this lane runs it."""

        def run(jit: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
            if kwargs.pop("ir_override", None):
                raise LaneError(STAGE_COMPILE if self.stage else IR_COMPILE,
                                f"compiled[{self.name}]: the launch (an autotune config?) sets ir_override itself")
            source = original(jit, *args, grid=grid, warmup=True, **kwargs)
            if source is None:  # a JIT hook took the compile over: nothing to recompile
                state.skipped.append("a JIT cache hook compiled the launch")
                return original(jit, *args, grid=grid, warmup=warmup, **kwargs)
            path = self._path(source, state)
            if path is None:
                return original(jit, *args, grid=grid, warmup=warmup, **kwargs)
            try:
                kernel = original(jit, *args, grid=grid, warmup=True, ir_override=str(path), **kwargs)
            except Exception as exc:
                what = f"the {self.stage} of {describe(source)}" if self.stage else str(self.ir.path)  # type: ignore[union-attr]  # (as in `name`)
                raise LaneError(STAGE_COMPILE if self.stage else IR_COMPILE,
                                f"compiled[{self.name}]: {what} did not compile ("
                                f"{first_line(exc, 300)})") from exc
            if self.stage:
                same = self.exact.get(source.hash)
                if same is None:
                    same = self.exact[source.hash] = kernel.asm["cubin"] == source.asm["cubin"]
                if not same:
                    state.inexact.append(describe(source))
            state.used += 1
            if warmup:
                return kernel
            return original(jit, *args, grid=grid, warmup=False, ir_override=str(path), **kwargs)

        return run

    def _path(self, source: Any, state: CaseState) -> Any:
        """The file this launch runs from (None: its specialization is not the IR file's); once per kernel."""
        known = self.paths.get(source.hash)
        if known is None:
            if self.stage:
                known = (stage_file(source, self.stage, spec_id(source), describe(source)), None)
            else:
                why = self.ir.mismatch(source)  # type: ignore[union-attr]  # (no stage: an IR file)
                known = (None, why) if why is not None else (self.ir.copy, None)  # type: ignore[union-attr]  # (as above)
            self.paths[source.hash] = known
        if known[1] is not None:
            state.skipped.append(known[1])
        return known[0]

    def finish(self, state: CaseState, outcome: Any, rerun: Callable[[], Any]) -> None:
        """After the case: an `ir=` lane no launch used is a lane problem (the case is not judged by it); a
        `from=` round trip with other cubin bytes is checked against a rerun compiled from source."""
        if outcome.error is not None:
            return
        if self.ir is not None:
            if state.used == 0:
                reasons = "; ".join(dict.fromkeys(state.skipped)) or "the case launched no kernel"
                raise LaneError(IR_SPECIALIZATION, f"compiled[{self.name}]: no launch of this case is its "
                                                   f"specialization ({reasons})")
            if state.skipped:
                outcome.notes.append(f"compiled[{self.name}]: {len(state.skipped)} launch(es) of other "
                                     f"specializations ran compiled from source: {state.skipped[0]}")
            return
        if state.inexact:
            plain = rerun()
            diff = same_results(outcome, plain)
            if diff is not None:
                raise LaneError(ROUNDTRIP, f"compiled[{self.name}]: recompiling {state.inexact[0]} from its "
                                           f"{self.stage} gives other cubin bytes and other results ({diff}): "
                                           f"the round trip is not exact on this Triton")
            outcome.notes.append(f"compiled[{self.name}]: the round trip gives other cubin bytes for "
                                 f"{state.inexact[0]}; the results are the same bit for bit")
