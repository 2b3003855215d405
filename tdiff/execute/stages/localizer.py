"""Which compiler pass: name the pass after which a `compiled wrong` case's result goes wrong.

For each specialization the case launches (its compile job, found by compiling the case's launches here,
without a GPU), MLIR's per-pass dumps give a snapshot after every pass of make_ttir and make_ttgir. Each
snapshot is compiled here (one that cannot be lowered counts as unknown, never as agreeing), then run on the
GPU through `compiled[ir=<snapshot>]` and compared with the interpreter by the caller's `agrees`; `bisect`
finds the first diverging snapshot. An ablation confirms it: the same case with only that pass left out.
Where no snapshot agrees, the kernel is compiled without ptxas's optimisation, without LLVM's, without fp
fusion, and without each pass of make_llir, to say what below the TTGIR passes restores agreement.

Everything but the GPU runs goes through `run(spec)`: the caller runs the case on a compiled `BackendSpec`
in its GPU lane and returns the `Outcome`; `agrees(outcome)` says whether it agrees with the opinions that
found compiled wrong (interpreter and reference). Tests pass stand-ins for both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core import kernels
from ...core.backend_spec import BackendSpec
from ...core.case import Case
from ...core.outcome import Outcome
from ..backends.base import Target
from ..plan import LaunchPlan, deterministic_empty, route_launches
from . import bisect as bis
from .ablate import Lowering, below_mlir, without_pass
from .ir_override import pinned, store
from .passes import changed
from .snapshots import Pipeline, Snapshot, dump
from .support import (
    StageUnsupported,
    captured_stderr,
    first_line,
    require_ir_override,
    require_override_unset,
    triton_version,
)
from .toolchain import CompileJob, compile_only, gpu_arch, job_of, scratch_cache

Run = Callable[[BackendSpec], Outcome]
Agrees = Callable[[Outcome], "bool | None"]
COMPILED = BackendSpec("compiled")  # the lane localized and exported unless another is named


@dataclass(frozen=True)
class Check:
    """A lowering tried besides the bisection (an ablation, an optimizer off) and its result."""

    label: str
    result: str  # bisect.AGREE, DIVERGE or UNKNOWN
    detail: str = ""
    file: Path | None = None


@dataclass
class Localization:
    """Where in the compile of one specialization the case's result goes wrong."""

    kernel: str  # the specialization, for people
    outcome: str  # bisect.FOUND, NONE_AGREE, NOT_REPRODUCED, or "unsupported"
    stage: str | None = None
    pass_name: str | None = None  # the first pass after which the result diverges (FOUND)
    builder: str | None = None  # the Python call that added it, e.g. "ttgpuir.add_pipeline in make_ttgir"
    suspects: tuple[str, ...] = ()
    ablation: Check | None = None  # the case with only that pass left out
    below: list[Check] = field(default_factory=list)  # what below the TTGIR passes changes the result
    snapshot: Path | None = None  # the first diverging snapshot (for the reproducer)
    before: Path | None = None  # the last agreeing one
    probes: list[bis.Probe] = field(default_factory=list)
    gpu_runs: int = 0  # cases run on the GPU (lowerings that compiled)
    note: str = ""

    def sentence(self) -> str:
        """One sentence for the verdict (after "which pass: ")."""
        if self.outcome == "unsupported":
            return f"not localized ({self.note})"
        if self.outcome == bis.NOT_REPRODUCED:
            return "not localized (the kernel recompiled from its own TTGIR does not diverge on this case)"
        if self.outcome == bis.FOUND:
            if len(self.suspects) > 1:
                text = f"first diverging after one of {', '.join(self.suspects)} (make_{self.stage}; the snapshots " \
                       "between could not be lowered)"
            else:
                text = f"first diverging after {self.pass_name} (make_{self.stage})"
            if self.ablation is not None:
                text += "; " + {bis.AGREE: "removing it restores agreement",
                                bis.DIVERGE: "removing it alone does not restore agreement",
                                }.get(self.ablation.result, f"removing it could not be checked: {self.ablation.detail}")
            return text + self._below_text()
        if any(c.result == bis.AGREE for c in self.below):
            return "every TTIR and TTGIR snapshot that could be lowered diverges: the divergence is below the TTGIR " \
                   "passes" + self._below_text()
        return "every TTIR and TTGIR snapshot that could be lowered diverges: the divergence is in a stage's first " \
               "passes (no snapshot separates them) or below the TTGIR passes (make_llir, LLVM, ptxas)" + \
               self._below_text()

    def _below_text(self) -> str:
        agree = [c.label for c in self.below if c.result == bis.AGREE]
        if agree:
            return "; it agrees " + " and ".join(agree)
        if self.below and self.outcome != bis.FOUND:
            return "; no single change below TTGIR restores agreement"
        return ""


@dataclass
class Localized:
    """The localizations of a case's specializations, in launch order (stopping at the first found)."""

    kernels: list[Localization]

    @property
    def found(self) -> Localization | None:
        return next((k for k in self.kernels if k.outcome == bis.FOUND), None)

    def sentence(self) -> str:
        best = self.found or (self.kernels[0] if self.kernels else None)
        if best is None:
            return "not localized (the case launched no kernel)"
        many = len(self.kernels) > 1 or (self.found is not None and self.kernels[0] is not self.found)
        return (f"{best.kernel}: " if many else "") + best.sentence()


# ------------------------------------------------------------------ the case's compile jobs

def capture_jobs(target: Target, case: Case, spec: BackendSpec, arch: int) -> list[CompileJob]:
    """The compile job of each specialization the case launches (in launch order), compiled here for
    `sm_<arch>` without a GPU: the check's `launch` runs on CPU copies of the inputs with every kernel launch
    compiled (`warmup=True`) instead of run, with the lane's launch options and autotune config."""
    jobs: dict[str, CompileJob] = {}
    overrides = dict(spec.launch)
    failed: list[BaseException] = []

    def handler(jit: Any, original: Any, args: tuple, grid: Any, warmup: bool, kwargs: dict) -> Any:
        try:
            kernel = original(jit, *args, grid=grid, warmup=True, **{**kwargs, **overrides})
        except Exception as exc:  # noqa: BLE001 - reported below
            failed.append(exc)
            raise
        job = job_of(kernel)
        jobs.setdefault(job.spec, job)
        return kernel

    plan = LaunchPlan(case, "cpu")
    config = case.config if spec.config is None else spec.config
    kernel = kernels.rebuild(target.kernel, kernels.jit_function(target.kernel), config)
    try:
        with compile_only(arch), scratch_cache(changed()), deterministic_empty(), route_launches(handler):
            target.launch(kernel, **plan.inputs)
    except Exception as exc:
        cause = failed[0] if failed else exc
        if not jobs:
            raise StageUnsupported(f"the case's launches could not be compiled here for sm_{arch} "
                                   f"({type(cause).__name__}: {cause}); the launch function must run on CPU "
                                   "copies of the inputs") from exc
    return list(jobs.values())


def export_stage(check: Target, case: Case, stage: str, arch: int, spec: BackendSpec = COMPILED) -> list[Path]:
    """Write the `stage` text (or cubin) of every specialization the case launches, pinned to its
    specialization, as content-hashed files (in `ir_override.store_dir()`): the files to edit and run back
    through `compiled[ir=<file>]`. Compiles here, for `sm_<arch>`, without a GPU."""
    from .roundtrip import stage_file

    return [stage_file(job.reference, stage, job.spec, job.label)
            for job in capture_jobs(check, case, spec, arch)]


# ------------------------------------------------------------------ one specialization

def _snapshot_file(job: CompileJob, snap: Snapshot) -> Path:
    return store(pinned(snap.text, job.spec, snap.stage, f"{job.label} {snap.label}"), snap.stage, job.name,
                 job.spec)


class _Runner:
    """Compiles a lowering here (UNKNOWN when it cannot), then runs it on the GPU and judges it."""

    def __init__(self, job: CompileJob, base: BackendSpec, run: Run, agrees: Agrees) -> None:
        self.job, self.base, self.run, self.agrees = job, base, run, agrees
        self.files: dict[tuple[str, str], Path] = {}
        self.gpu_runs = 0

    def snapshot(self, snap: Snapshot) -> tuple[str, str]:
        path = _snapshot_file(self.job, snap)
        self.files[(snap.stage, snap.text)] = path
        try:
            with captured_stderr():  # MLIR's diagnostics and reproducer of a failed lowering
                self.job.compile(ir_override=str(path))
        except Exception as exc:  # noqa: BLE001 - cannot be lowered: unknown, never agreeing
            return bis.UNKNOWN, f"cannot be lowered ({first_line(exc, 160)})"
        return self.judge(self.base.with_(ir=str(path)))

    def lowering(self, low: Lowering) -> Check:
        if not low.runnable:
            return Check(low.label, bis.UNKNOWN, low.problem)
        spec = self.base.with_(ir=str(low.path) if low.path else None, launch=(*self.base.launch, *low.launch))
        result, detail = self.judge(spec)
        return Check(low.label, result, detail, low.path)

    def judge(self, spec: BackendSpec) -> tuple[str, str]:
        self.gpu_runs += 1
        outcome = self.run(spec)
        if outcome.error is not None:
            if outcome.error.kind in ("lane", "setup"):
                return bis.UNKNOWN, outcome.error.summary()
            return bis.DIVERGE, outcome.error.summary()  # a crash or CUDA error under this lowering: wrong too
        ok = self.agrees(outcome)
        if ok is None:
            return bis.UNKNOWN, "the outcome could not be judged"
        return (bis.AGREE, "") if ok else (bis.DIVERGE, "")


def localize_job(job: CompileJob, base: BackendSpec, run: Run, agrees: Agrees, max_runs: int = 40) -> Localization:
    """Localize the divergence of one specialization (the others compiled from source)."""
    try:
        pipeline = dump(job)
    except Exception as exc:  # noqa: BLE001
        return Localization(job.label, "unsupported", note=f"the dumped compile failed: {exc}")
    runner = _Runner(job, base, run, agrees)
    stages = [pipeline.snapshots("ttir"), pipeline.snapshots("ttgir")]
    if not all(stages):
        return Localization(job.label, "unsupported", note=f"MLIR's dumps named no passes on Triton {triton_version()}")
    found = bis.bisect(stages, runner.snapshot, max_runs)
    loc = Localization(job.label, found.outcome, found.stage, probes=found.probes)
    if found.outcome == bis.NOT_RUN:  # e.g. the GPU lane did not take the snapshot for this specialization
        loc.outcome, loc.note = "unsupported", f"the kernel recompiled from its own TTGIR could not be run: " \
                                               f"{found.probes[0].detail if found.probes else ''}"
        loc.gpu_runs = runner.gpu_runs
        return loc
    budget = max(0, max_runs - found.runs)
    if found.outcome == bis.FOUND:
        loc.suspects = found.suspects
        loc.pass_name = found.suspects[-1] if len(found.suspects) == 1 else None
        loc.snapshot = runner.files.get((found.first_diverge.stage, found.first_diverge.text))
        loc.before = runner.files.get((found.last_agree.stage, found.last_agree.text))
        if len(found.suspects) == 1:
            # (a bisection that found a pass names its stage)
            call = pipeline.builder_of(found.stage, found.suspect_points[0].index - 1)  # type: ignore[arg-type]
            if call is not None and budget > 0:
                loc.builder = str(call)
                loc.ablation = runner.lowering(without_pass(pipeline, call, f"without {loc.pass_name} ({call})"))
                budget -= 1
    if found.outcome != bis.NOT_REPRODUCED and (loc.ablation is None or loc.ablation.result != bis.AGREE):
        loc.below = _below_checks(pipeline, runner, budget)
    loc.gpu_runs = runner.gpu_runs
    return loc


def _below_checks(pipeline: Pipeline, runner: _Runner, budget: int) -> list[Check]:
    """ptxas's and LLVM's optimizers and fp fusion off, each alone; then each pass of make_llir left out, until
    one restores agreement. Each costs one GPU run of `budget` (a lowering that cannot be built costs none)."""
    reference = pipeline.job.reference if pipeline.job.reference is not None else pipeline.kernel
    out: list[Check] = []

    def attempt(label: str, build: Callable[[], Lowering]) -> Check:
        nonlocal budget
        if budget <= 0:
            check = Check(label, bis.UNKNOWN, "the localizer's run budget is spent")
        else:
            low = build()
            budget -= low.runnable
            check = runner.lowering(low)
        out.append(check)
        return check

    if budget > 0:
        for low in below_mlir(pipeline.job, reference):
            attempt(low.label, lambda low=low: low)  # type: ignore[misc]  # (mypy infers no lambda with a default)
    seen: set[tuple[str, int]] = set()
    for i, entry in enumerate(pipeline.passes("llir")):
        call = pipeline.builder_of("llir", i)
        if call is None or (call.builder, call.occurrence) in seen:
            continue
        seen.add((call.builder, call.occurrence))
        label = f"without {entry.pass_name} ({call})"
        if attempt(label, lambda call=call, label=label: without_pass(  # type: ignore[misc]  # (as above)
                pipeline, call, label)).result == bis.AGREE:
            break
    return out


# ------------------------------------------------------------------ the case

def localize(check: Target, case: Case, *, run: Run, agrees: Agrees, spec: BackendSpec = COMPILED,
             arch: int | None = None, max_runs: int = 40) -> Localized:
    """Name the compiler pass after which `case` goes wrong, for a case whose verdict is `compiled wrong`.

    `check`: the check (its kernel and `launch`); `spec`: the compiled lane that was wrong (its launch
    options and autotune config are kept); `run(spec)`: run the case on a compiled `BackendSpec` on the GPU
    and return the Outcome; `agrees(outcome)`: whether it agrees with the interpreter and the reference (None:
    it could not be judged); `arch`: the GPU's compute capability (default: asked of the CUDA driver);
    `max_runs`: GPU runs per specialization. Raises `StageUnsupported` where this Triton or this machine
    cannot (the message names the version or the reason)."""
    require_ir_override()
    require_override_unset()
    if spec.kind != "compiled" or spec.stage or spec.ir:
        raise ValueError(f"localize: {spec.label} is not a compiled lane compiled from source")
    arch = arch or gpu_arch()
    if arch is None:
        raise StageUnsupported("localize needs the GPU's compute capability (arch=90 for an H100): no CUDA GPU here")
    jobs = capture_jobs(check, case, spec, arch)
    out: list[Localization] = []
    for job in jobs:
        loc = localize_job(job, spec, run, agrees, max_runs)
        out.append(loc)
        if loc.outcome == bis.FOUND:
            break
    return Localized(out)
