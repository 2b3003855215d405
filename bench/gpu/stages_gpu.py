"""Stage opinions and the pass localizer on a GPU (tdiff.execute.stages), with a compact summary.

    PYTHONPATH=. python -m bench.gpu.stages_gpu [--examples N] [--only NAME] [--below] [--dry-run]

(a) the bundled suites' checks (suites/*.py) with `compiled`, `compiled[from=ttgir]`, `compiled[from=ptx]`, the
    interpreter and the reference on every case: pass/fail per check, the recompiled stage files the lanes
    wrote, and the extra time per case of each stage lane over `compiled`;
(b) a planted miscompiling pass (after it, `arith.addf` becomes `arith.subf`; tests/stage_kernels.py): tdiff
    finds `compiled wrong`, and the localizer must name the planted pass and confirm it by ablation
    (`--below` adds a pass planted in make_llir, below every TTGIR snapshot);
(c) an edited TTGIR (one `arith.addf` of the column sum made `arith.subf`) through `compiled[ir=...]`: the
    comparison must catch it; and the unedited TTGIR on the general check: the cases of its specialization
    must agree bit for bit with `compiled`, the others must run without that opinion (named, counted).

`--dry-run` needs no GPU: it compiles everything for sm_90 without launching (the suites' round trips from
TTGIR and PTX, cubin bytes), runs the localizer with a stand-in GPU that reads the PTX, and compiles the
edited TTGIR through the lane. Exits 1 on any unexpected result.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("TDIFF_STAGES_DIR", tempfile.mkdtemp(prefix="tdiff-stages-bench-"))

import torch  # noqa: E402
from hypothesis import HealthCheck, find, settings  # noqa: E402

import tdiff  # noqa: E402
from tdiff.core.backend_spec import BackendSpec  # noqa: E402
from tdiff.declaration import declared_in  # noqa: E402
from tdiff.execute.stages import AGREE, StageUnsupported, capture_jobs, export_stage, localize, round_trip  # noqa
from tdiff.execute.stages.ir_override import store_dir  # noqa: E402
from tdiff.execute.stages.passes import control  # noqa: E402
from tdiff.execute.stages.toolchain import gpu_arch  # noqa: E402
from tdiff.generate.cases import case_strategy  # noqa: E402

LANES = ("compiled[from=ttgir]", "compiled[from=ptx]")
PLANTS = {  # where a miscompile is planted -> the pass the localizer must name
    "ttgir:ttgpuir.add_remove_layout_conversions:0": "TritonGPURemoveLayoutConversions",
    "ttir:ttir.add_combine:0": "TritonCombineOps",
}
BELOW = "llir:common.add_canonicalizer:0"
DRY_ARCH = 90
problems: list[str] = []


def say(line: str) -> None:
    print(line, flush=True)


def bad(what: str) -> None:
    problems.append(what)
    say(f"UNEXPECTED {what}")


def suite_checks(only: str | None) -> list:
    out = []
    for path in sorted((ROOT / "suites").glob("*.py")):
        if path.stem == "__init__" or (only and only not in path.stem):
            continue
        module = f"suites.{path.stem}"
        importlib.import_module(module)
        out += declared_in(module)
    return out


def one_case(check):
    return find(case_strategy(check), lambda c: True,
                settings=settings(database=None, max_examples=50, suppress_health_check=list(HealthCheck)))


def options(backends, examples, **more):
    return tdiff.RunOptions(profile="ci", backends=tuple(backends), max_examples=examples, corpus_dir=None,
                            repro_dir=None, replay=False, shrink_budget=10, compile_budget=0, **more)


def stage_files() -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in store_dir().iterdir():
        if p.suffix != ".json":
            counts[p.suffix.lstrip(".")] = counts.get(p.suffix.lstrip("."), 0) + 1
    return counts


# ------------------------------------------------------------------ (a) the suites under stage lanes

def lanes_agree_with_compiled(result) -> tuple[bool, str]:
    """Whether, in every divergence, each stage lane agreed with compiled (then the failure is not theirs)."""
    for div in result.failures:
        for pair in div.evidence.pairs:
            labels = {pair.a, pair.b}
            lane_pair = "compiled" in labels and labels & set(LANES)
            if lane_pair and (pair.disagrees or not pair.classification.judged):
                return False, f"{pair.a} vs {pair.b}: {pair.classification.reason or 'values differ'}"
    return True, ""


def lane_times(check, case, rounds: int = 5) -> dict[str, tuple[float, float]]:
    """Per lane: (the seconds of its extra compile for the case's specializations, fresh: the compile from the
    stage file; for compiled, the compile from source), and the median seconds of a warm run of the case (each
    lane by itself in the GPU worker)."""
    from tdiff.execute.stages.roundtrip import stage_file
    from tdiff.execute.workers import Job, shared_pool

    jobs = capture_jobs(check, case, BackendSpec("compiled"), gpu_arch())
    compile_s = {"compiled": sum(_timed(job.fresh) for job in jobs)}
    for lane in LANES:
        stage = BackendSpec.parse(lane).stage
        files = [(job, str(stage_file(job.reference, stage, job.spec))) for job in jobs]
        compile_s[lane] = sum(_timed(lambda job=job, path=path: job.fresh(path)) for job, path in files)
    pool = shared_pool()
    out = {}
    for lane in ("compiled", *LANES):
        runs = [pool.run_many([Job(check.ref(), BackendSpec.parse(lane), case)], 120.0)[0] for _ in range(rounds)]
        warm = sorted(o.seconds for o in runs[1:])
        out[lane] = (compile_s[lane], warm[len(warm) // 2])
    return out


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def suites_gpu(args) -> None:
    say(f"(a) bundled suites under {', '.join(LANES)} (with compiled, interpreter, reference); per stage lane: "
        "its extra compile per specialization (s, fresh), and its extra time per case once warm (ms)")
    for check in suite_checks(args.only):
        before = stage_files()
        t0 = time.perf_counter()
        r = tdiff.Runner(options(("compiled", *LANES, "interpreter"), args.examples)).run_check(check)
        wall = time.perf_counter() - t0
        made = {k: v - before.get(k, 0) for k, v in stage_files().items() if v > before.get(k, 0)}
        times = lane_times(check, one_case(check))
        base = times["compiled"][1]
        extra = "  ".join(f"{lane[9:-1]} +{times[lane][0]:.2f}s +{(times[lane][1] - base) * 1e3:.2f}ms"
                          for lane in LANES) + f" (compile from source {times['compiled'][0]:.2f}s)"
        ok, why = lanes_agree_with_compiled(r)
        verdicts = ", ".join(d.verdict.label for d in r.failures if d.verdict) or "-"
        say(f"  {'ok ' if ok and r.status != 'error' else 'BAD'} {check.id:50} {r.status:7} {r.cases:2} cases "
            f"({r.judged} judged)  compiled {base * 1e3:.2f}ms/case  {extra}  files {made}  {wall:4.1f}s  "
            f"verdicts: {verdicts}")
        if r.status == "error":
            bad(f"(a) {check.id}: {'; '.join(r.notes)[:300]}")
        elif not ok:
            bad(f"(a) {check.id}: a stage lane disagrees with compiled: {why}")
        elif (not made.get("ttgir") or not made.get("ptx")) and r.cases:
            bad(f"(a) {check.id}: the stage lanes wrote no recompiled stage files ({made})")


def suites_dry(args) -> None:
    say(f"(a) bundled suites: round trips from TTGIR and PTX, compiled here for sm_{DRY_ARCH} (cubin bytes)")
    for check in suite_checks(args.only):
        try:
            case = one_case(check)
            t0 = time.perf_counter()
            jobs = capture_jobs(check, case, BackendSpec("compiled"), DRY_ARCH)
        except StageUnsupported as exc:
            say(f"  -   {check.id:52} not compiled here: {str(exc)[:100]}")
            continue
        trips = [round_trip(job, stage) for job in jobs for stage in ("ttgir", "ptx")]
        exact = all(t.exact for t in trips)
        say(f"  {'ok ' if exact else 'BAD'} {check.id:52} {len(jobs)} specialization(s), round trips "
            f"{sum(t.exact for t in trips)}/{len(trips)} exact  {time.perf_counter() - t0:5.1f}s")
        if not exact:
            bad(f"(a) {check.id}: " + "; ".join(f"{t.stage}: {t.detail}" for t in trips if not t.exact))


# ------------------------------------------------------------------ (b) a planted pass, localized

def agreement(check, case, truth):
    from tdiff.judge.evidence import gather
    from tdiff.judge.rules import Rules

    def agrees(outcome):
        ev = gather(case, check.kernel_name, {"truth:interpreter": truth, outcome.backend: outcome},
                    Rules(check.tolerance, check.tolerances), [("truth:interpreter", outcome.backend)])
        pair = ev.pairs[0]
        return None if not pair.classification.judged else not pair.disagrees

    return agrees


def expect_localized(found, name: str, where: str) -> None:
    loc = found.found
    say(f"    localizer: {found.sentence()}")
    if loc is None or loc.pass_name != name:
        bad(f"(b) {where}: the localizer did not name {name}")
    elif loc.ablation is None or loc.ablation.result != AGREE:
        bad(f"(b) {where}: removing {name} did not restore agreement")
    else:
        say(f"    snapshot for the reproducer: {loc.snapshot} ({loc.gpu_runs} GPU runs)")


def planted_gpu(args) -> None:
    from tdiff.execute.workers import Job, Pool
    from tests import stage_kernels as sk

    check = tdiff.checks_of(sk.add_kernel)[0]
    arch = gpu_arch()
    plants = dict(PLANTS, **({BELOW: None} if args.below else {}))
    say(f"(b) planted miscompiles in {check.id}, localized on sm_{arch}")
    for where, name in plants.items():
        os.environ[sk.PLANT_ENV] = where  # new workers import the kernels' module with the plant
        pool = Pool()
        try:
            with control(sk.plant(where)):  # and this process (the localizer compiles here)
                t0 = time.perf_counter()
                r = tdiff.Runner(options(("compiled", "interpreter"), args.examples), executor=pool).run_check(check)
                div = r.failures[0] if r.failures else None
                label = div.verdict.label if div and div.verdict else "-"
                say(f"  {where}: {r.status}, verdict {label} ({time.perf_counter() - t0:.1f}s)")
                if div is None or label != "compiled wrong":
                    bad(f"(b) {where}: expected `compiled wrong`, got {r.status} / {label}")
                    continue
                truth = next(o for o in div.evidence.outcomes.values() if o.role.kind == "interpreter" and o.ok)

                def run(spec, case=div.case, pool=pool):
                    return pool.run_many([Job(check.ref(), spec, case)], check.timeout or 60.0)[0]

                t0 = time.perf_counter()
                found = localize(check, div.case, run=run, agrees=agreement(check, div.case, truth), arch=arch)
                say(f"    ({time.perf_counter() - t0:.1f}s)")
                if name is None:
                    below = [c.label for c in found.kernels[0].below if c.result == AGREE]
                    say(f"    localizer: {found.sentence()}")
                    if not any("Canonicalizer" in b for b in below):
                        bad(f"(b) {where}: the localizer did not find the make_llir pass")
                else:
                    expect_localized(found, name, where)
        finally:
            pool.close()
            os.environ.pop(sk.PLANT_ENV, None)


def stand_in(job):
    from tdiff.core.outcome import Outcome

    def run(spec):
        kernel = job.fresh(spec.ir, **dict(spec.launch)) if spec.ir else job.fresh(**dict(spec.launch))
        out = Outcome.of(spec)
        out.notes.append(kernel.asm["ptx"])
        return out

    return run


def planted_dry(args) -> None:
    from tdiff.core.case import Case
    from tdiff.generate.cases import tensor_arg
    from tests import stage_kernels as sk

    check = tdiff.checks_of(sk.add_kernel)[0]
    case = Case({"x": tensor_arg(torch.randn(200)), "y": tensor_arg(torch.randn(200))})
    plants = dict(PLANTS, **({BELOW: None} if args.below else {}))
    say(f"(b) planted miscompiles in {check.id}, localized with a stand-in GPU that reads the PTX")
    for where, name in plants.items():
        job = capture_jobs(check, case, BackendSpec("compiled"), DRY_ARCH)[0]
        with control(sk.plant(where)):
            t0 = time.perf_counter()
            found = localize(check, case, run=stand_in(job), agrees=lambda o: "sub.f32" not in o.notes[0],
                             arch=DRY_ARCH)
        say(f"  {where} ({time.perf_counter() - t0:.1f}s)")
        if name is None:
            say(f"    localizer: {found.sentence()}")
            if not any("Canonicalizer" in c.label and c.result == AGREE for c in found.kernels[0].below):
                bad(f"(b) {where}: the localizer did not find the make_llir pass")
        else:
            expect_localized(found, name, where)


# ------------------------------------------------------------------ (c) an edited TTGIR

def edited_ttgir(check, case, arch) -> tuple[Path, Path]:
    """The case's TTGIR as exported (pinned to its specialization), and a copy with one add made a subtract."""
    exported = export_stage(check, case, "ttgir", arch)[0]
    text = exported.read_text()
    assert "arith.addf" in text
    edited = Path(tempfile.mkdtemp(prefix="tdiff-edited-")) / "colsum_edited.ttgir"
    edited.write_text(text.replace("arith.addf", "arith.subf", 1))
    return exported, edited


def edited_gpu(args) -> None:
    from tdiff.execute.stages.roundtrip import same_results
    from tdiff.execute.workers import Job, shared_pool
    from tests import stage_kernels as sk

    fixed, general = (next(c for c in tdiff.checks_of(sk.colsum_kernel) if c.name == n) for n in ("fixed", "tdiff"))
    arch = gpu_arch()
    _, edited = edited_ttgir(fixed, one_case(fixed), arch)
    say(f"(c) an edited TTGIR ({edited.name}) through compiled[ir=...] on {fixed.id}")
    lane = f"compiled[ir={edited}]"
    r = tdiff.Runner(options(("compiled", lane, "interpreter"), args.examples)).run_check(fixed)
    div = r.failures[0] if r.failures else None
    caught = div is not None and any(p.disagrees and BackendSpec.parse(lane).label in (p.a, p.b)
                                     for p in div.evidence.pairs)
    plain_ok = div is not None and all(not p.disagrees for p in div.evidence.pairs
                                       if {p.a, p.b} == {"compiled", "interpreter"})
    say(f"  {r.status}, verdict {div.verdict.label if div and div.verdict else '-'}: the edit is "
        f"{'caught' if caught else 'NOT caught'}; compiled from source {'agrees' if plain_ok else 'DISAGREES'}")
    if not (caught and plain_ok):
        bad("(c) the edited TTGIR was not caught (or compiled from source disagreed too)")
    # the unedited TTGIR of one case's specialization on the general check's cases: the cases of that
    # specialization agree bit for bit with compiled, the others run without that opinion, named
    strategy = case_strategy(general)
    cases = [one_case(general)]
    with warnings.catch_warnings():  # drawn outside a test, on purpose: several specializations
        warnings.simplefilter("ignore")
        cases += [strategy.example() for _ in range(max(1, args.examples - 1))]
    own = export_stage(general, cases[0], "ttgir", arch)[0]
    pool = shared_pool()
    used = other = 0
    reasons: set[str] = set()
    for case in cases:
        a, b = pool.run_many([Job(general.ref(), BackendSpec.parse(f"compiled[ir={own}]"), case),
                              Job(general.ref(), BackendSpec("compiled"), case)], 60.0)
        if a.error is not None and a.error.kind == "lane":
            other += 1
            reasons.add(a.error.limitation)
        elif a.error is not None or same_results(a, b) is not None:
            bad(f"(c) the unedited TTGIR differs from compiled on {case.describe()[:120]}: "
                f"{a.error.summary() if a.error else same_results(a, b)}")
        else:
            used += 1
    say(f"  unedited TTGIR of one specialization on {general.id}: {used} case(s) of it equal to compiled bit for "
        f"bit, {other} of other specializations run without it ({', '.join(sorted(reasons)) or '-'})")
    if used == 0:
        bad("(c) no case ran the unedited TTGIR")


def edited_dry(args) -> None:
    from triton.runtime.jit import JITFunction

    from tdiff.execute.plan import LaunchPlan
    from tdiff.execute.stages.launch import StageLane
    from tdiff.execute.stages.toolchain import compile_only
    from tests import stage_kernels as sk

    fixed = next(c for c in tdiff.checks_of(sk.colsum_kernel) if c.name == "fixed")
    case = one_case(fixed)
    exported, edited = edited_ttgir(fixed, case, DRY_ARCH)
    say(f"(c) an edited TTGIR ({edited.name}) compiled through the compiled[ir=...] lane for sm_{DRY_ARCH}")
    x = LaunchPlan(case, "cpu").inputs["x"]
    for path, want in ((edited, "sub.f32"), (exported, "add.f32")):
        lane = StageLane(ir=str(path))
        state = lane.begin()
        with compile_only(DRY_ARCH):
            kernel = lane.wrap(JITFunction.run, state)(sk.colsum_kernel, x, torch.zeros(64), 32, 64, 64, 1, BM=16,
                                                        BN=32, grid=(2,), warmup=True)
        ok = state.used == 1 and want in kernel.asm["ptx"]
        say(f"  {'ok ' if ok else 'BAD'} {path.name}: {'ran' if state.used else 'not run'}, PTX has {want}: {ok}")
        if not ok:
            bad(f"(c) {path.name} did not compile through the lane as expected")


# ------------------------------------------------------------------ main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=8, help="cases per check (default 8)")
    ap.add_argument("--only", default=None, help="only the suites whose module name contains this")
    ap.add_argument("--below", action="store_true", help="also plant a pass in make_llir (slower)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: compile everything, launch nothing")
    ap.add_argument("--skip", default="", help="parts to skip, e.g. 'a' or 'ab'")
    args = ap.parse_args()
    t0 = time.perf_counter()
    gpu = torch.cuda.is_available() and not args.dry_run
    if not gpu and not args.dry_run:
        say("no CUDA GPU here: run with --dry-run, or on the GPU machine")
        return 2
    import triton

    say(f"triton {triton.__version__}, torch {torch.__version__}, "
        f"{torch.cuda.get_device_name() if gpu else 'no GPU (dry run: compile only, sm_90)'}; "
        f"stage files in {store_dir()}")
    parts = {"a": (suites_gpu, suites_dry), "c": (edited_gpu, edited_dry), "b": (planted_gpu, planted_dry)}
    for key in "acb":  # (b) last: its workers and this process carry a planted pass
        if key in args.skip:
            continue
        try:
            parts[key][0 if gpu else 1](args)
        except Exception as exc:  # noqa: BLE001 - report, go on, fail at the end
            import traceback

            traceback.print_exc()
            bad(f"({key}) raised {type(exc).__name__}: {exc}")
    say(f"summary: {'OK' if not problems else f'{len(problems)} unexpected'} ({time.perf_counter() - t0:.0f}s)")
    for p in problems:
        say(f"  - {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
