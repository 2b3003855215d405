"""Per-pass snapshots of one specialization's compile, from MLIR's own dumps.

With `MLIR_ENABLE_DUMP=1` every MLIR pass manager Triton runs prints the whole module before each pass
(`// -----// IR Dump Before <Pass> (<argument>) ('builtin.module' operation) //----- //`). Where the dump goes:
to `MLIR_DUMP_PATH`, which Triton opens once per process and buffers (`tools/Sys/Dump.hpp`), else to LLVM's
unbuffered `dbgs()`, standard error. tdiff leaves `MLIR_DUMP_PATH` unset for its compile and reads file
descriptor 2 stage by stage, so each stage's dumps are its own, and a fresh compile is forced (the dump runs
only when the passes really run).

A snapshot is the module after some passes of a stage: index 0 is the stage's input, index k the module
after its k-th pass (a pass's nested passes, such as the inliner's canonicalizations, are part of it), and
the last is the stage's output as the compiled kernel keeps it. The builder call behind each pass
(`passes.ttgpuir.add_pipeline`) is found by aligning the stage's builder calls with its dumped passes in
order (a builder may add several passes, e.g. `add_warp_specialize_to_llvm` adds two).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from .passes import Layer, PassCall, Recorder, StageHook, control
from .support import MLIR_STAGES, captured_stderr
from .toolchain import CompileJob

# `Inliner (inline) ('builtin.module' operation)` (MLIR of Triton 3.4 to 3.7) or
# `InlinerPass: inline{max-iterations=4 } ('builtin.module' operation)` (Triton 3.8, 3.9)
_HEADER = re.compile(r"IR Dump Before (?P<name>[^\s:]+)(?::\s+(?P<arg>[\w.-]+)(?:\{[^']*?\})?|\s+\((?P<old>[^)]*)\))"
                     r"\s+\('(?P<op>[^']+)' operation")


@dataclass(frozen=True)
class Entry:
    """One dumped pass: its name, argument, whether it ran on the whole module, and the module before it."""

    pass_name: str
    argument: str
    top: bool
    text: str


@dataclass(frozen=True)
class Snapshot:
    """The module of `stage` after its first `index` passes (`after`: the last of them; '' for the input)."""

    stage: str
    index: int
    after: str
    text: str
    final: bool = False  # the stage's output (after its last pass)

    @property
    def label(self) -> str:
        if self.index == 0:
            return f"the input of make_{self.stage}"
        return f"after {self.after} (make_{self.stage} pass {self.index})"


def parse_dump(data: str) -> list[Entry]:
    """The `IR Dump Before` entries of a dump, each with its module text (other output dropped)."""
    entries = []
    for chunk in data.split("// -----// ")[1:]:
        head, _, body = chunk.partition("\n")
        m = _HEADER.match(head)
        if m is None:
            continue
        name = re.sub(r"(?<=.)Pass$", "", m.group("name"))  # CSEPass (3.8) / CSE (3.6): one name
        entries.append(Entry(name, m.group("arg") or m.group("old") or "", m.group("op") == "builtin.module",
                             _module_text(body)))
    return entries


def _module_text(body: str) -> str:
    """The module of a dump entry: its aliases, the module itself and its trailing `#loc` lines."""
    lines = body.splitlines()
    close = max((i for i, line in enumerate(lines) if line.startswith("}")), default=len(lines) - 1)
    end = close + 1
    while end < len(lines) and (lines[end].startswith("#") or not lines[end].strip()):
        end += 1
    return "\n".join(lines[:end]).strip() + "\n"


class _Capture:
    """Reads what each stage writes to file descriptor 2 (MLIR's dumps), stage by stage."""

    def __init__(self) -> None:
        self.text: dict[str, str] = {}

    @contextlib.contextmanager
    def around(self, stage: str) -> Iterator[None]:
        out = None
        try:
            with captured_stderr() as out:
                yield
        finally:
            if out is not None:
                self.text[stage] = self.text.get(stage, "") + out.text


@contextlib.contextmanager
def _dumping() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("MLIR_ENABLE_DUMP", "MLIR_DUMP_PATH")}
    os.environ["MLIR_ENABLE_DUMP"] = "1"
    os.environ.pop("MLIR_DUMP_PATH", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class Pipeline:
    """A compile of one job with its dumps: per stage, the dumped passes, the builder calls, the snapshots."""

    job: CompileJob
    kernel: Any  # the CompiledKernel the dumped compile produced
    entries: dict[str, list[Entry]]
    calls: dict[str, list[PassCall]]
    alignment: dict[str, list[int]] = field(default_factory=dict)  # per stage: top-level pass -> index in calls

    def passes(self, stage: str) -> list[Entry]:
        """The stage's passes that ran on the whole module, in order."""
        return [e for e in self.entries.get(stage, []) if e.top]

    def snapshots(self, stage: str) -> list[Snapshot]:
        """Index 0 (the stage's input) to the stage's output; for make_llir, whose output is LLVM IR, up to
        the module before its last pass."""
        top = self.passes(stage)
        out = [Snapshot(stage, i, top[i - 1].pass_name if i else "", e.text) for i, e in enumerate(top)]
        final = self.kernel.asm.get(stage) if stage in ("ttir", "ttgir") else None
        if final is not None and top:
            out.append(Snapshot(stage, len(top), top[-1].pass_name, final, final=True))
        return out

    def builder_of(self, stage: str, index: int) -> PassCall | None:
        """The builder call that added the stage's `index`-th pass (0 first), if the alignment found one."""
        mapping = self.alignment.get(stage)
        calls = self.calls.get(stage, [])
        if mapping is None or not 0 <= index < len(mapping) or mapping[index] < 0:
            return None
        return calls[mapping[index]]

    def passes_of(self, call: PassCall) -> list[int]:
        """The stage's top-level passes (indices) a builder call added."""
        calls = self.calls.get(call.stage, [])
        mapping = self.alignment.get(call.stage, [])
        return [i for i, j in enumerate(mapping) if 0 <= j < len(calls) and calls[j].key == call.key]


def dump(job: CompileJob, *layers: Layer) -> Pipeline:
    """Compile `job` afresh with MLIR's per-pass dumps on (under `layers`, e.g. an ablation) and parse them."""
    capture, recorder = _Capture(), Recorder()
    with _dumping(), control(StageHook(capture.around), recorder, *layers):
        kernel = job.fresh()
    entries = {s: parse_dump(capture.text.get(s, "")) for s in MLIR_STAGES}
    calls = {s: recorder.stage(s) for s in MLIR_STAGES}
    pipeline = Pipeline(job, kernel, entries, calls)
    for stage in MLIR_STAGES:
        pipeline.alignment[stage] = align([(e.pass_name, e.argument) for e in pipeline.passes(stage)],
                                          [c.builder for c in calls[stage]])
    return pipeline


# ------------------------------------------------------------------ passes <-> builders

_PREFIXES = ("tritonnvidiagpu", "tritongpu", "tritonamdgpu", "triton", "ttnvgpuir", "ttgpuir", "ttir", "nvidiagpu",
             "nvidia", "nvgpu", "convert", "pass", "add")


def _norm(text: str) -> str:
    text = re.sub(r"[^a-z0-9]", "", text.lower())
    changed = True
    while changed:
        changed = False
        for p in _PREFIXES:
            if text.startswith(p) and len(text) > len(p):
                text, changed = text[len(p):], True
    return re.sub(r"pass$", "", text)


def similarity(entry: tuple[str, str], builder: str) -> float:
    """How alike a dumped pass (name, argument) and a builder (`ttgpuir.add_pipeline`) are named, 0 to 1."""
    b = _norm(builder.rsplit(".", 1)[-1])
    return max(SequenceMatcher(None, _norm(x), b).ratio() for x in entry)


def align(entries: list[tuple[str, str]], builders: list[str]) -> list[int]:
    """For each dumped pass, in order, the index of the builder call that added it: a monotone assignment
    (a builder may add several passes, or none) that maximises the names' similarity."""
    m, n = len(entries), len(builders)
    if m == 0:
        return []
    if n == 0:
        return [-1] * m
    skip = 0.6  # the cost of a builder that added no pass
    extra = 0.3  # the score of a further pass a builder added (its name says nothing of the builder's)
    sim = [[similarity(e, b) for b in builders] for e in entries]
    neg = float("-inf")
    best = [[neg] * n for _ in range(m)]  # best[i][j]: entries 0..i placed, entry i on builder j
    back = [[-1] * n for _ in range(m)]
    for j in range(n):
        best[0][j] = sim[0][j] - skip * j
    for i in range(1, m):
        for j in range(n):
            cand, arg = best[i - 1][j] + extra, j
            for k in range(j):
                if best[i - 1][k] == neg:
                    continue
                score = best[i - 1][k] - skip * (j - k - 1) + sim[i][j]
                if score > cand:
                    cand, arg = score, k
            best[i][j], back[i][j] = cand, arg
    j = max(range(n), key=lambda jj: best[m - 1][jj] - skip * (n - 1 - jj))
    out = [0] * m
    for i in range(m - 1, -1, -1):
        out[i] = j
        j = back[i][j]
    return out
