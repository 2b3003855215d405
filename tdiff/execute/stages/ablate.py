"""Lowerings that take one thing out of a kernel's compile: a pass (ablation), or an optimizer below the MLIR
passes (ptxas's, LLVM's, fp fusion). Each is compiled here, without a GPU, into an IR file pinned to the
specialization, which the GPU runs through `compiled[ir=...]`.

An ablation is checked against MLIR's dump of the ablated compile: exactly the passes the builder call added
are gone, nothing else. Its file is the ablated compile's TTGIR (a pass of make_ttir or make_ttgir) or LLVM IR
(a pass of make_llir); a file from below TTGIR is only run when the launch metadata Triton computes from the
compile from source (shared memory, scratch, warps) is the ablated compile's too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ir_override import pinned, store
from .passes import PassCall, Without, llvm_optimizer_off, ptxas_optimizer_off
from .snapshots import Pipeline, dump
from .support import captured_stderr, first_line
from .toolchain import CompileJob

#: launch metadata Triton reads off the compile (make_llir), which an override below TTGIR does not change
LAUNCH_METADATA = ("name", "num_warps", "num_ctas", "shared", "global_scratch_size", "global_scratch_align",
                   "profile_scratch_size", "tmem_size", "launch_cooperative_grid", "launch_pdl")


@dataclass(frozen=True)
class Lowering:
    """One way to compile the kernel that the GPU runs instead of the compile from source."""

    label: str
    path: Path | None = None  # the pinned IR file the GPU runs; None: run with `launch` only, or not at all
    launch: tuple[tuple[str, Any], ...] = ()  # launch options (as Triton spells them) for the GPU run
    problem: str = ""  # why it cannot be run (then it counts as UNKNOWN)

    @property
    def runnable(self) -> bool:
        return not self.problem


def _metadata_problem(kernel: Any, reference: Any) -> str:
    a, b = kernel.metadata._asdict(), reference.metadata._asdict()
    diff = [k for k in LAUNCH_METADATA if a.get(k) != b.get(k)]
    return "" if not diff else "its launch metadata differs from the compile from source (" + \
        ", ".join(f"{k} {a.get(k)} vs {b.get(k)}" for k in diff) + "): an override cannot carry it"


def _file(job: CompileJob, kernel: Any, stage: str, about: str) -> Path:
    return store(pinned(kernel.asm[stage], job.spec, stage, f"{job.label} {about}"), stage, job.name, job.spec)


def without_pass(pipeline: Pipeline, call: PassCall, label: str) -> Lowering:
    """The kernel compiled with one builder call left out."""
    job = pipeline.job
    try:
        with captured_stderr():
            ablated = dump(job, Without(call))
    except Exception as exc:  # noqa: BLE001 - the pipeline cannot lower the kernel without it
        return Lowering(label, problem=f"the kernel does not compile without it ({first_line(exc)})")
    gone = set(pipeline.passes_of(call))
    expected = [e.pass_name for i, e in enumerate(pipeline.passes(call.stage)) if i not in gone]
    got = [e.pass_name for e in ablated.passes(call.stage)]
    if not gone or got != expected:
        return Lowering(label, problem=f"leaving out {call} did not remove exactly its passes from make_{call.stage}")
    stage = "llir" if call.stage == "llir" else "ttgir"
    if stage == "llir":
        problem = _metadata_problem(ablated.kernel, pipeline.kernel)
        if problem:
            return Lowering(label, problem=problem)
    return Lowering(label, _file(job, ablated.kernel, stage, label))


def _below(job: CompileJob, reference: Any, label: str, stage: str, within: Callable[[], Any]) -> Lowering:
    try:
        with within(), captured_stderr():
            kernel = job.fresh()
    except Exception as exc:  # noqa: BLE001
        return Lowering(label, problem=f"it does not compile ({first_line(exc)})")
    problem = _metadata_problem(kernel, reference)
    if problem:
        return Lowering(label, problem=problem)
    if kernel.asm[stage] == reference.asm[stage]:
        return Lowering(label, problem=f"it changes nothing: the {stage} is the same")
    return Lowering(label, _file(job, kernel, stage, label))


def below_mlir(job: CompileJob, reference: Any) -> list[Lowering]:
    """ptxas without optimisation, the LLVM optimizer off, fp fusion off: each alone."""
    return [
        _below(job, reference, "with ptxas optimisation off (--opt-level 0)", "cubin", ptxas_optimizer_off),
        _below(job, reference, "with LLVM's optimizer off (no -O3 on the LLVM IR)", "llir", llvm_optimizer_off),
        Lowering("with fp fusion off (enable_fp_fusion=False: no FMA contraction)",
                 launch=(("enable_fp_fusion", False),)),
    ]
