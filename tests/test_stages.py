"""Stage opinions and the pass localizer without a GPU (tdiff.execute.stages).

Triton compiles to a cubin here (`compile_only` gives its JIT a target and no device); only launching needs a
GPU. So everything up to the launch is tested: `compiled[from=...]` / `compiled[ir=...]` parsing, content-hashed
IR files and their specializations, exact round trips, MLIR's per-pass snapshots (each compiled to a cubin),
ablations, a planted miscompile, the lane's compile path, the bisection (a stand-in runner), and the whole
localizer against a planted pass with a stand-in GPU that reads the PTX.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from triton.runtime.jit import JITFunction

from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.core.outcome import Outcome
from tdiff.declaration import checks_of
from tdiff.execute.backends.registry import make_backend
from tdiff.execute.stages import bisect as bis
from tdiff.execute.stages import ir_override, localizer, snapshots, support
from tdiff.execute.stages.launch import StageLane
from tdiff.execute.stages.passes import PassCall, Planted, Without, control
from tdiff.execute.stages.roundtrip import IR_COMPILE, IR_SPECIALIZATION, LaneError, round_trip
from tdiff.execute.stages.toolchain import compile_only, job_of
from tdiff.generate.cases import tensor_arg
from tests import labelled
from tests import stage_kernels as sk

ARCH = 90  # the H100's; Triton compiles for it without a GPU


@pytest.fixture(autouse=True, scope="module")
def _private_folders(tmp_path_factory):
    """IR files and Triton's cache in folders of this module: nothing read from or left in the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TDIFF_STAGES_DIR", str(tmp_path_factory.mktemp("stages")))
        mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
        yield


def _launch(kernel, *args, **kwargs):
    """A launch compiled here, not run: the CompiledKernel Triton's JIT makes for it."""
    with compile_only(ARCH):
        return JITFunction.run(kernel, *args, warmup=True, **kwargs)


def _add(n=256, block=128, offset=0):
    x = torch.zeros(n + offset)[offset:]
    return _launch(sk.add_kernel, x, x, x, n, 1, 1, BLOCK=block, grid=(2,))


@pytest.fixture(scope="module")
def add():
    return job_of(_add())


@pytest.fixture(scope="module")
def add_pipeline(add):
    return snapshots.dump(add)


def _ptx_runner(job):
    """A stand-in GPU: compiles what the lane would run (fresh: a planted pass is in this process) and
    reports whether its PTX still adds (the planted miscompile subtracts)."""

    def run(spec: BackendSpec) -> Outcome:
        kernel = job.fresh(spec.ir, **dict(spec.launch)) if spec.ir else job.fresh(**dict(spec.launch))
        out = Outcome.of(spec)
        out.notes.append(kernel.asm["ptx"])
        return out

    return run


def _adds(outcome: Outcome) -> bool:
    return "sub.f32" not in outcome.notes[0] and "sub.rn.f32" not in outcome.notes[0]


# ------------------------------------------------------------------ specs

def test_spec_parses_stage_and_ir_variants(tmp_path):
    spec = BackendSpec.parse("compiled[from=ttgir]")
    assert (spec.kind, spec.stage, spec.ir, spec.label) == ("compiled", "ttgir", None, "compiled[from=ttgir]")
    both = BackendSpec.parse("compiled[from=ptx,num_warps=2]:reversed")
    assert (both.stage, both.launch, both.order) == ("ptx", (("num_warps", 2),), "reversed")
    odd = tmp_path / "v1.2@x" / "k.ttgir"  # dots, an @ and a colon-free path inside the brackets
    odd.parent.mkdir()
    odd.write_text("module {}\n")
    spec = BackendSpec.parse(f"compiled[ir={odd}]")
    assert spec.ir == str(odd) and spec.stage is None and spec.label.startswith("compiled[ir=")
    assert BackendSpec.parse("compiled[num_warps=2,num_stages=1]").launch == (("num_warps", 2), ("num_stages", 1))
    assert BackendSpec.parse("tests.faulty:Factory").kind == "tests.faulty:Factory"
    for bad, why in [("compiled[from=cubin]", "from= takes"), ("compiled[from=sass]", "from= takes"),
                     (f"compiled[ir={tmp_path}/missing.ttgir]", "no IR file"), (f"compiled[ir={odd.parent}/k.txt]",
                                                                                "ending in"),
                     (f"compiled[from=ttgir,ir={odd}]", "do not go together"), ("interpreter[from=ttgir]",
                                                                                  "only compiled"),
                     ("compiled[from=ttgir", "not closed")]:
        with pytest.raises(ValueError, match=why):
            BackendSpec.parse(bad)


# ------------------------------------------------------------------ IR files

def test_ir_files_are_content_hashed_and_pinned(tmp_path):
    a = ir_override.store("module {}\n", "ttgir", "k")
    assert ir_override.store("module {}\n", "ttgir", "k") == a  # the same content, the same path
    assert ir_override.store("module {} // edited\n", "ttgir", "k") != a
    user = tmp_path / "mine.ttgir"
    user.write_text("module {}\n")
    first = ir_override.copy_of(user)
    user.write_text("module { }\n")  # edited in place: Triton would key it by the same path
    assert ir_override.copy_of(user) != first
    text = ir_override.pinned("define void @k() {\n}\n", "abc123", "llir", "k(x: *fp32)")
    assert text.splitlines()[-1] == "; tdiff: specialization=abc123 k(x: *fp32)"  # last: no IR line moves
    assert text.splitlines()[0] == "define void @k() {"
    path = ir_override.store(text, "llir", "k")
    assert ir_override.pin_of(path) == "abc123"
    cubin = ir_override.store(b"\x7fELF...", "cubin", "k", "def456")
    assert ir_override.pin_of(cubin) == "def456"  # in the .json beside it


@pytest.mark.triton_matrix
def test_round_trip_is_exact_from_every_stage(add):
    for stage in support.STAGES:
        trip = round_trip(add, stage)
        assert trip.exact, (stage, trip.detail)
        assert ir_override.pin_of(trip.path) == add.spec


# ------------------------------------------------------------------ snapshots

@pytest.mark.triton_matrix
def test_snapshots_compile_back_and_name_their_builders(add, add_pipeline):
    p = add_pipeline
    assert p.kernel.asm["cubin"] == add.reference.asm["cubin"]  # dumping changes nothing
    assert all(p.passes(stage) for stage in support.MLIR_STAGES)
    names = [e.pass_name for e in p.passes("ttgir")]
    assert names[0] == "ConvertTritonToTritonGPU" and "TritonGPUPipeline" in names
    layouts = [p.builder_of("ttgir", i) for i, n in enumerate(names) if n == "TritonGPURemoveLayoutConversions"]
    assert [(c.builder, c.occurrence) for c in layouts] == [("ttgpuir.add_remove_layout_conversions", k)
                                                            for k in range(len(layouts))]
    assert p.builder_of("ttgir", names.index("TritonGPUPipeline")).builder == "ttgpuir.add_pipeline"
    assert p.snapshots("ttgir")[-1].text == add.reference.asm["ttgir"]


@pytest.mark.triton_matrix
def test_every_snapshot_compiles_to_a_cubin():
    x = torch.zeros(40, 70)
    colsum = job_of(_launch(sk.colsum_kernel, x, torch.zeros(70), 40, 70, 70, 1, BM=16, BN=32, grid=(3,)))
    p = snapshots.dump(colsum)
    cubins, failed = {}, []
    for stage in ("ttir", "ttgir"):
        snaps = p.snapshots(stage)
        assert snaps[-1].final and snaps[-1].text == colsum.reference.asm[stage]
        for snap in {s.text: s for s in snaps}.values():  # one of each distinct module
            try:
                cubins[(stage, snap.index)] = colsum.compile(
                    ir_override=str(ir_override.store(snap.text, stage, "snap"))).asm["cubin"]
            except RuntimeError:
                failed.append((stage, snap.index))
    # the modules before the inliner (calls to tl.sum's combine function) and the input of make_ttgir (TTIR)
    # cannot stand for their stage's output; every other snapshot lowers to a cubin
    assert set(failed) <= {("ttir", 0), ("ttgir", 0)} and len(cubins) >= 6
    assert cubins[("ttgir", len(p.passes("ttgir")))] == colsum.reference.asm["cubin"]
    assert len(set(cubins.values())) > 1  # the passes change the code


def test_alignment_lets_a_builder_add_several_passes_or_none():
    entries = [("TritonGPUCoalesce", "tritongpu-coalesce"), ("TritonGPUOptimizeDotOperands", "x"),
               ("Canonicalizer", "canonicalize"), ("CSE", "cse"), ("ConvertWarpSpecializeToLLVM", "y"),
               ("ReconcileUnrealizedCasts", "reconcile-unrealized-casts"), ("SymbolDCE", "symbol-dce")]
    builders = ["ttgpuir.add_coalesce", "ttgpuir.add_optimize_dot_operands", "common.add_cse",
                "ttgpuir.add_never_dumped", "nvidia.ttnvgpuir.add_warp_specialize_to_llvm", "common.add_symbol_dce"]
    assert snapshots.align(entries, builders) == [0, 1, 1, 2, 4, 4, 5]


@pytest.mark.slow
def test_a_dot_does_not_lower_from_before_accelerate_matmul():
    a = torch.zeros(16, 32, dtype=torch.float16)
    job = job_of(_launch(sk.dot_kernel, a, a.t().contiguous(), torch.zeros(16, 16), 32, 32, 1, 16, 1, BK=16,
                         grid=(1,)))
    p = snapshots.dump(job)
    names = [e.pass_name for e in p.passes("ttgir")]
    cut = names.index("TritonGPUAccelerateMatmul")
    lowers = {}
    for snap in p.snapshots("ttgir")[1:]:
        try:
            job.compile(ir_override=str(ir_override.store(snap.text, "ttgir", "dot")))
            lowers[snap.index] = True
        except RuntimeError:
            lowers[snap.index] = False
    assert not any(lowers[i] for i in range(1, cut + 1)) and all(lowers[i] for i in range(cut + 1, len(names) + 1))


# ------------------------------------------------------------------ ablation and planting

def test_ablation_removes_exactly_its_pass_and_changes_the_cubin(add, add_pipeline):
    second = PassCall("ttgir", "ttgpuir.add_remove_layout_conversions", 1)
    ablated = snapshots.dump(add, Without(second))
    before = [e.pass_name for e in add_pipeline.passes("ttgir")]
    after = [e.pass_name for e in ablated.passes("ttgir")]
    gone = add_pipeline.passes_of(second)
    assert len(gone) == 1 and after == [n for i, n in enumerate(before) if i not in gone]
    with control(Without(("llir", "llvmir.add_di_scope", 0))):
        assert add.compile().asm["cubin"] != add.reference.asm["cubin"]  # no line info
    x = torch.zeros(40, 70)
    colsum = job_of(_launch(sk.colsum_kernel, x, torch.zeros(70), 40, 70, 70, 1, BM=16, BN=32, grid=(3,)))
    with control(Without(("ttgir", "ttgpuir.add_remove_layout_conversions", None))):
        assert colsum.compile().asm["cubin"] != colsum.reference.asm["cubin"]
    assert colsum.compile().asm["cubin"] == colsum.reference.asm["cubin"]  # and nothing stayed changed


def test_a_planted_pass_edits_the_ir_after_it_unless_it_is_taken_out(add):
    call = PassCall("ttgir", "ttgpuir.add_remove_layout_conversions", 0)
    plant = Planted(call, sk.add_to_sub)
    with control(plant):
        assert "sub.f32" in add.compile().asm["ptx"] and plant.fired == 1
        with control(Without(call)):
            assert "sub.f32" not in add.compile().asm["ptx"] and plant.fired == 1
        p = snapshots.dump(add)
    names = [e.pass_name for e in p.passes("ttgir")]
    assert names == [e.pass_name for e in snapshots.dump(add).passes("ttgir")]  # the same passes, run once each
    edited = [s.index for s in p.snapshots("ttgir") if "arith.subf" in s.text]
    assert edited[0] == names.index("TritonGPURemoveLayoutConversions") + 1
    assert "sub.f32" not in add.compile().asm["ptx"]  # outside the block: nothing planted, nothing cached


# ------------------------------------------------------------------ the lane's compile path

def _lane_kernel(lane, *args, **kwargs):
    state = lane.begin()
    with compile_only(ARCH):
        kernel = lane.wrap(JITFunction.run, state)(sk.add_kernel, *args, warmup=True, **kwargs)
    return kernel, state


@pytest.mark.triton_matrix
def test_from_stage_lanes_recompile_the_same_cubin():
    x = torch.zeros(256)
    source = _add()
    for stage in support.FROM_STAGES:
        kernel, state = _lane_kernel(StageLane(stage=stage), x, x, x, 256, 1, 1, BLOCK=128, grid=(2,))
        assert kernel.asm["cubin"] == source.asm["cubin"] and kernel.hash != source.hash
        assert (state.used, state.inexact, state.skipped) == (1, [], [])


def test_an_ir_lane_runs_its_specialization_only(tmp_path):
    x = torch.zeros(257)
    source = _add()
    pinned = ir_override.store(ir_override.pinned(source.asm["ttgir"].replace("arith.addf", "arith.subf"),
                                                  job_of(source).spec, "ttgir"), "ttgir", "edited")
    lane = StageLane(ir=str(pinned))
    kernel, state = _lane_kernel(lane, x, x, x, 256, 1, 1, BLOCK=128, grid=(2,))
    assert state.used == 1 and "sub.f32" in kernel.asm["ptx"]
    kernel, state = _lane_kernel(lane, x, x, x, 255, 1, 1, BLOCK=128, grid=(2,))  # n not divisible by 16
    assert state.used == 0 and "pinned to specialization" in state.skipped[0] and "sub.f32" not in kernel.asm["ptx"]
    with pytest.raises(LaneError) as err:
        lane.finish(state, labelled.outcome("compiled[ir=...]"), lambda: None)
    assert err.value.reason == IR_SPECIALIZATION and "no launch of this case" in str(err.value)
    # without the pin, the file is matched by what it shows: name, arguments and their alignment, shapes
    bare = tmp_path / "bare.ttgir"
    bare.write_text(source.asm["ttgir"].replace("arith.addf", "arith.subf"))
    lane = StageLane(ir=str(bare))
    assert _lane_kernel(lane, x, x, x, 256, 1, 1, BLOCK=128, grid=(2,))[1].used == 1
    _, state = _lane_kernel(lane, x, x, x, 255, 1, 1, BLOCK=128, grid=(2,))
    assert state.used == 0 and "arguments" in state.skipped[0]
    _, state = _lane_kernel(lane, x, x, x, 256, 1, 1, BLOCK=64, grid=(4,))
    assert state.used == 0 and "tensor shapes" in state.skipped[0]


def test_an_ir_file_edited_in_place_is_never_served_stale(tmp_path):
    x = torch.zeros(256)
    source = _add()
    path = tmp_path / "kernel.ttgir"
    path.write_text(source.asm["ttgir"].replace("arith.addf", "arith.subf"))
    kernel, _ = _lane_kernel(StageLane(ir=str(path)), x, x, x, 256, 1, 1, BLOCK=128, grid=(2,))
    assert "sub.f32" in kernel.asm["ptx"]
    path.write_text(source.asm["ttgir"].replace("arith.addf", "arith.mulf"))  # the same path, new contents
    kernel, _ = _lane_kernel(StageLane(ir=str(path)), x, x, x, 256, 1, 1, BLOCK=128, grid=(2,))
    assert "mul.f32" in kernel.asm["ptx"] and "sub.f32" not in kernel.asm["ptx"]


def test_an_inexact_round_trip_is_checked_bit_for_bit(add, monkeypatch):
    from tdiff.core.outcome import StorageOutcome
    from tdiff.execute.stages import roundtrip
    from tdiff.execute.stages.launch import CaseState

    real = roundtrip.stage_file
    monkeypatch.setattr(roundtrip, "stage_file", lambda kernel, stage, spec, about="": ir_override.store(
        real(kernel, stage, spec, about).read_text().replace("arith.addf", "arith.subf"), stage, "inexact"))
    assert not round_trip(add, "ttgir").exact  # a round trip that changes the code is seen
    monkeypatch.undo()

    def outcome(data):
        out = labelled.outcome("compiled[from=ttgir]")
        out.storages["x"] = StorageOutcome("x", "float32", 0, data)
        return out

    lane = StageLane(stage="ttgir")
    same = outcome(b"\x00\x01")
    lane.finish(CaseState(used=1, inexact=["k(x)"]), same, lambda: outcome(b"\x00\x01"))
    assert "the results are the same bit for bit" in same.notes[0]
    with pytest.raises(LaneError) as err:
        lane.finish(CaseState(used=1, inexact=["k(x)"]), outcome(b"\x00\x01"), lambda: outcome(b"\x00\x02"))
    assert err.value.reason == roundtrip.ROUNDTRIP and "`x` differs" in str(err.value)
    quiet = outcome(b"")
    lane.finish(CaseState(used=1), quiet, lambda: pytest.fail("an exact round trip reruns nothing"))
    assert quiet.notes == []


def test_lane_problems_are_their_own_error_kind(tmp_path):
    backend = make_backend(BackendSpec.parse("compiled[from=ttgir]"))
    assert backend.lane is not None and backend.name == "compiled[from=ttgir]"
    info = backend._error(LaneError(IR_SPECIALIZATION, "no launch of this case is its specialization"))
    assert (info.kind, info.limitation) == ("lane", IR_SPECIALIZATION)
    assert backend._error(ValueError("boom")).kind == "exception"
    broken = tmp_path / "broken.ttgir"
    broken.write_text(_add().asm["ttgir"].replace("tt.return", "tt.return %bogus"))
    x = torch.zeros(256)
    with pytest.raises(LaneError) as err:
        _lane_kernel(StageLane(ir=str(broken)), x, x, x, 256, 1, 1, BLOCK=128, grid=(2,))
    assert err.value.reason == IR_COMPILE and "did not compile" in str(err.value)


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """The compiled backend on CPU tensors, compiling for sm_90 and launching nothing (a no-op launcher)."""
    from triton.compiler.compiler import CompiledKernel

    from tdiff.execute.backends import compiled

    def init(self):
        self.module, self.function, self._run = object(), None, lambda *args, **kwargs: None
        if not isinstance(getattr(type(self), "run", None), property):  # Triton 3.4: an attribute, not a property
            self.run = self._run

    monkeypatch.setattr(CompiledKernel, "_init_handles", init)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(compiled, "_device_name", lambda index: "stand-in")
    with compile_only(ARCH):
        yield lambda spec: make_backend(BackendSpec.parse(spec).with_(device="cpu"))


def test_the_compiled_backend_runs_stage_lanes(stand_in_gpu, tmp_path):
    check = checks_of(sk.add_kernel)[0]
    source = _add()
    backend = stand_in_gpu("compiled[from=ptx]")
    out = backend.run(check, _case(256))
    assert out.error is None and len(out.launches) == 1 and out.notes == []
    assert backend.lane.exact == {source.hash: True}  # recompiled from its PTX: the same cubin
    other = ir_override.store(ir_override.pinned(source.asm["ttgir"], "0" * 16, "ttgir"), "ttgir", "other")
    out = stand_in_gpu(f"compiled[ir={other}]").run(check, _case(256))
    assert out.error is not None and (out.error.kind, out.error.limitation) == ("lane", IR_SPECIALIZATION)
    mine = ir_override.store(ir_override.pinned(source.asm["ttgir"], job_of(source).spec, "ttgir"), "ttgir", "mine")
    assert stand_in_gpu(f"compiled[ir={mine}]").run(check, _case(256)).error is None


def test_missing_mechanisms_are_refused_naming_the_version(monkeypatch):
    monkeypatch.setattr(support, "option_names", lambda: frozenset({"num_warps"}))
    with pytest.raises(support.StageUnsupported, match=f"Triton {support.triton_version()}.*ir_override"):
        support.require_ir_override()
    monkeypatch.undo()
    monkeypatch.setenv("TRITON_KERNEL_OVERRIDE", "1")
    with pytest.raises(support.StageUnsupported, match="TRITON_KERNEL_OVERRIDE"):
        StageLane(stage="ttgir")


# ------------------------------------------------------------------ the bisection, with a stand-in runner

class _Snap:
    def __init__(self, stage, index, text):
        self.stage, self.index, self.after, self.text = stage, index, f"{stage}-pass{index}" if index else "", text

    @property
    def label(self):
        return f"{self.stage}#{self.index}"


def _pipeline(n_ttir, n_ttgir, culprit, unknown=frozenset(), unchanged=frozenset()):
    """Snapshots whose result follows the stage semantics: a snapshot has its stage's passes up to its index
    and every later stage in full; it diverges iff the culprit ("stage", k) is among them."""
    stages, runs = [], []
    for stage, n in (("ttir", n_ttir), ("ttgir", n_ttgir)):
        seq, text = [], f"{stage}:0"
        for i in range(n + 1):
            if i and (stage, i) not in unchanged:
                text = f"{stage}:{i}"
            seq.append(_Snap(stage, i, text))
        stages.append(seq)

    def run(snap):
        runs.append(snap.label)
        if (snap.stage, snap.index) in unknown:
            return bis.UNKNOWN, "cannot be lowered"
        c_stage, c_index = culprit  # another stage's passes are all in: earlier ones done, later ones run
        has = c_stage != snap.stage or c_index <= snap.index
        return (bis.DIVERGE if has else bis.AGREE), ""

    return stages, run, runs


def test_bisection_finds_a_ttgir_pass_in_few_runs():
    stages, run, runs = _pipeline(8, 40, ("ttgir", 21))
    found = bis.bisect(stages, run)
    assert (found.outcome, found.stage, found.suspects) == (bis.FOUND, "ttgir", ("ttgir-pass21",))
    assert found.last_agree.index == 20 and found.first_diverge.index == 21
    assert len(runs) <= 9 and len(set(runs)) == len(runs)


def test_bisection_goes_back_to_make_ttir_when_every_ttgir_snapshot_diverges():
    stages, run, _ = _pipeline(8, 40, ("ttir", 3), unknown={("ttir", 0)})
    found = bis.bisect(stages, run)
    assert (found.outcome, found.stage, found.suspects) == (bis.FOUND, "ttir", ("ttir-pass3",))


def test_bisection_names_every_pass_it_could_not_separate():
    stages, run, _ = _pipeline(8, 40, ("ttgir", 12), unknown={("ttgir", 11), ("ttgir", 10)},
                               unchanged={("ttgir", 11)})
    found = bis.bisect(stages, run)
    assert found.outcome == bis.FOUND and found.suspects == ("ttgir-pass10", "ttgir-pass12")  # 11 changed nothing


def test_bisection_never_counts_unknown_as_agreeing():
    stages, run, _ = _pipeline(4, 10, ("ttgir", 3), unknown={("ttgir", i) for i in range(0, 3)} | {("ttir", 0)})
    found = bis.bisect(stages, run)
    assert found.outcome == bis.NONE_AGREE  # no lowerable snapshot before the culprit: nothing to stand on
    stages, run, _ = _pipeline(4, 10, ("ttgir", 99))  # nothing diverges
    assert bis.bisect(stages, run).outcome == bis.NOT_REPRODUCED


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_bisection_finds_the_culprit_whenever_snapshots_separate_it(data):
    n_ttir = data.draw(st.integers(1, 10))
    n_ttgir = data.draw(st.integers(2, 45))
    stage = data.draw(st.sampled_from(["ttir", "ttgir"]))
    culprit = (stage, data.draw(st.integers(1, n_ttir if stage == "ttir" else n_ttgir)))
    unknown = data.draw(st.sets(st.tuples(st.sampled_from(["ttir", "ttgir"]), st.integers(0, 45)), max_size=12))
    unknown = {u for u in unknown if u != ("ttgir", n_ttgir)}  # the whole compile runs
    stages, run, runs = _pipeline(n_ttir, n_ttgir, culprit, frozenset(unknown))
    found = bis.bisect(stages, run)
    assert found.outcome in (bis.FOUND, bis.NONE_AGREE)
    if found.outcome == bis.FOUND:
        assert found.stage == culprit[0] and f"{culprit[0]}-pass{culprit[1]}" in found.suspects
        assert found.last_agree.index < culprit[1] <= found.first_diverge.index
    last = n_ttir if culprit[0] == "ttir" else n_ttgir
    separable = any((culprit[0], i) not in unknown for i in range(culprit[1])) and (culprit[0], last) not in unknown
    if separable:  # a lowerable snapshot before the culprit, and the stage's output: it must be found
        assert found.outcome == bis.FOUND
    assert len(set(runs)) == len(runs)  # no snapshot ran twice


# ------------------------------------------------------------------ the localizer, end to end

def _case(n=200):
    return Case({"x": tensor_arg(torch.randn(n)), "y": tensor_arg(torch.randn(n))})


def _localize(plant_at):
    check = checks_of(sk.add_kernel)[0]
    case = _case()
    job = localizer.capture_jobs(check, case, BackendSpec("compiled"), ARCH)[0]
    if plant_at is None:
        return localizer.localize(check, case, run=_ptx_runner(job), agrees=_adds, arch=ARCH)
    with control(sk.plant(plant_at)):
        return localizer.localize(check, case, run=_ptx_runner(job), agrees=_adds, arch=ARCH)


@pytest.mark.triton_matrix
def test_localize_names_a_planted_ttgir_pass_and_confirms_it():
    found = _localize("ttgir:ttgpuir.add_remove_layout_conversions:0")
    loc = found.found
    assert loc is not None and loc.pass_name == "TritonGPURemoveLayoutConversions" and loc.stage == "ttgir"
    assert loc.builder == "ttgpuir.add_remove_layout_conversions in make_ttgir"
    assert found.sentence() == ("first diverging after TritonGPURemoveLayoutConversions (make_ttgir); removing it "
                                "restores agreement")
    assert "arith.subf" in loc.snapshot.read_text() and "arith.subf" not in loc.before.read_text()
    assert ir_override.pin_of(loc.snapshot) == ir_override.pin_of(loc.before) and loc.gpu_runs <= 8


def test_localize_names_a_planted_ttir_pass():
    loc = _localize("ttir:ttir.add_combine:0").found
    assert loc is not None and (loc.stage, loc.pass_name) == ("ttir", "TritonCombineOps")
    assert loc.ablation.result == bis.AGREE


def test_localize_says_when_the_case_does_not_diverge():
    found = _localize(None)
    assert found.kernels[0].outcome == bis.NOT_REPRODUCED and "not localized" in found.sentence()


@pytest.mark.slow
def test_localize_looks_below_ttgir_when_every_snapshot_diverges():
    found = _localize("llir:common.add_canonicalizer:0")
    loc = found.kernels[0]
    assert loc.outcome == bis.NONE_AGREE
    agree = [c.label for c in loc.below if c.result == bis.AGREE]
    assert agree == ["without Canonicalizer (common.add_canonicalizer in make_llir)"]
    assert {c.label.split(" (")[0]: c.result for c in loc.below[:3]} == {
        "with ptxas optimisation off": bis.DIVERGE, "with LLVM's optimizer off": bis.DIVERGE,
        "with fp fusion off": bis.DIVERGE}
    assert "below the TTGIR passes; it agrees without Canonicalizer" in found.sentence()


def test_a_lowering_the_gpu_lane_cannot_run_is_unknown_never_agreeing():
    from tdiff.core.outcome import ErrorInfo

    def refused(spec):
        out = Outcome.of(spec)
        out.error = ErrorInfo("lane", "compiled[ir=...]: no launch of this case is its specialization",
                              limitation=IR_SPECIALIZATION)
        return out

    check = checks_of(sk.add_kernel)[0]
    found = localizer.localize(check, _case(), run=refused, agrees=lambda o: True, arch=ARCH)
    loc = found.kernels[0]
    assert loc.outcome == "unsupported" and "could not be run" in found.sentence()
    assert [p.result for p in loc.probes] == [bis.UNKNOWN]

    def crashed(spec):  # a lowering that crashes on the GPU is wrong, as the compiled kernel was
        out = Outcome.of(spec)
        out.error = ErrorInfo("cuda", "CUDA error: an illegal memory access was encountered")
        return out

    loc = localizer.localize(check, _case(), run=crashed, agrees=lambda o: True, arch=ARCH, max_runs=6).kernels[0]
    assert loc.outcome == bis.NONE_AGREE and all(p.result != bis.AGREE for p in loc.probes)


def test_localize_refuses_without_a_gpu_arch(monkeypatch):
    monkeypatch.setattr(localizer, "gpu_arch", lambda: None)
    with pytest.raises(support.StageUnsupported, match="compute capability"):
        localizer.localize(checks_of(sk.add_kernel)[0], _case(), run=None, agrees=None)
    with pytest.raises(ValueError, match="not a compiled lane"):
        localizer.localize(checks_of(sk.add_kernel)[0], _case(), run=None, agrees=None,
                           spec=BackendSpec.parse("compiled[from=ttgir]"), arch=ARCH)


def test_the_store_folder_is_this_sessions():
    assert Path(os.environ["TDIFF_STAGES_DIR"]) == ir_override.store_dir()


@pytest.mark.slow
def test_the_gpu_demo_runs_its_cpu_parts(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "TDIFF_STAGES_DIR": str(tmp_path / "stages")}
    r = subprocess.run([sys.executable, "-m", "bench.gpu.stages_gpu", "--dry-run", "--only", "vector_add",
                        "--skip", "b"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "round trips 2/2 exact" in r.stdout and "PTX has sub.f32: True" in r.stdout and "summary: OK" in r.stdout


@pytest.mark.slow
def test_the_plant_variable_plants_in_every_compile_of_the_process(tmp_path):
    import subprocess
    import sys

    code = ("import torch; from triton.runtime.jit import JITFunction; from tests import stage_kernels as sk; "
            "from tdiff.execute.stages.toolchain import compile_only\n"
            "x = torch.zeros(256)\n"
            "with compile_only(90):\n"
            "    k = JITFunction.run(sk.add_kernel, x, x, x, 256, 1, 1, BLOCK=128, grid=(2,), warmup=True)\n"
            "print('sub.f32' in k.asm['ptx'])")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), sk.PLANT_ENV: "ttgir:ttgpuir.add_remove_layout_conversions:0",
           "TMPDIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert r.stdout.strip().splitlines()[-1:] == ["True"], r.stdout + r.stderr
