"""Running checks: replay the corpus, search with hypothesis, then shrink, judge, report and record.

This module drives the pipeline (strategies -> plan -> backends -> comparison -> verdict ->
shrink/report/corpus); the stages live in their own modules: `search` (hypothesis), `pipeline` (one case,
the same for the search, fuzz targets and replay: the compile budget's filter, judging, counting),
`case_judge` (opinions, evidence, verdict, reruns, timeouts), `shrink`, `report`, `repro`, `corpus`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Any, Protocol

from ..core import kernels
from ..core.backend_spec import BackendSpec
from ..core.case import Case
from ..core.outcome import Outcome
from ..core.settings import RunOptions, prepare_run_dir
from ..declaration import Check, checks_of
from ..errors import CorpusError, DivergenceError
from ..execute import ahead
from ..execute.backends.base import gpu_available
from ..execute.backends.dry_launch import SPEC as SPECIALIZE
from ..execute.compile_budget import INT_CLASSES, POINTER_CLASSES, CompileBudget
from ..execute.workers import InProcess, Pool, shared_pool
from ..judge.opinions import Opinions, choose
from ..record import corpus as corpus_mod
from ..record import corpus_union, repro
from ..record.report import _comparisons, render, save_pictures
from ..record.results import CheckResult, Divergence
from ..record.shrink import shrink
from .case_judge import CaseJudge, HangBudgetSpent, SetupError
from .localize import which_pass
from .pipeline import CasePipeline, CaseRecord
from .reduce_kernel import KernelReduction, reduce_kernel
from .search import search

__all__ = ["CheckResult", "Divergence", "Progress", "Runner", "verify", "opinions_for"]


def opinions_for(check: Check, options: RunOptions) -> Opinions:
    return choose(check, options.backends, gpu_available)


class Progress(Protocol):
    """What a runner tells whoever shows a running check's progress (the pytest plugin): each phase it
    enters (`replaying the corpus`, `searching`, `shrinking`, `writing the reproducer`) and each case drawn."""

    def update(self, result: CheckResult, phase: str) -> None: ...


class Runner:
    """Runs checks with one set of options and one executor (worker pool or in-process)."""

    def __init__(self, options: RunOptions | None = None, executor: Any = None,
                 progress: Progress | None = None) -> None:
        self.options = options or RunOptions()
        if executor is None:
            executor = InProcess() if self.options.isolation == "none" else shared_pool(self.options.gpu)
        self.executor = executor
        self.progress = progress

    def phase(self, result: CheckResult, phase: str) -> None:
        if self.progress is not None:
            self.progress.update(result, phase)

    def judge(self, check: Check, result: CheckResult, opinions: Opinions | None = None) -> CaseJudge:
        return CaseJudge(self.executor, check, opinions or opinions_for(check, self.options), self.options, result)

    def pipeline(self, check: Check, judge: CaseJudge | None = None) -> CasePipeline:
        """The pipeline a check's drawn cases go through (`judge`'s, or a new judge's with a new result), under
        the check's compile budget."""
        judge = judge or self.judge(check, self.new_result(check))
        return CasePipeline(judge, self.budget(check, judge.opinions), lambda case: self.predict_keys(check, case))

    def new_result(self, check: Check) -> CheckResult:
        opinions = opinions_for(check, self.options)
        return CheckResult(check.id, check.item_name, opinions.labels, pair_note=opinions.note,
                           compared=opinions.describe())

    def check_environments(self, judge: CaseJudge) -> None:
        """Backends in another environment (`interpreter@python`) need worker processes and a Python
        that can run tdiff's worker: a ValueError naming the spec otherwise. The versions of each (and of
        this environment) go into the result: a pass names both."""
        from ..execute.environments import probe, versions_here

        for spec in judge.opinions.backends:
            if spec.python is None:
                continue
            text = spec.label
            if not isinstance(self.executor, Pool):
                raise ValueError(f"backend {text!r} runs in another environment, in a worker process: it needs "
                                 "isolation='process' (--tdiff-isolation process), not 'none'")
            try:
                judge.result.environments[text] = probe(spec.python)
            except ValueError as exc:
                raise ValueError(f"backend {text!r}: {exc}") from None
            judge.result.here = versions_here()

    # -- one check -----------------------------------------------------------------
    def run_check(self, check: Check) -> CheckResult:
        t0 = time.perf_counter()
        result = self.new_result(check)
        judge = self.judge(check, result)
        self.check_environments(judge)
        workers = self.precompile_workers(judge)
        if isinstance(self.executor, Pool):
            self.executor.warm([judge.spec(s).lane for s in judge.opinions.backends]
                               + [BackendSpec("precompile", slot=i).lane for i in range(workers)])
        pipeline = self.pipeline(check, judge)
        budget = pipeline.budget
        try:
            if self.options.replay:
                self.phase(result, "replaying the corpus")
                self.replay_corpora(check, result, judge)
            self.phase(result, "searching")
            compile_ahead, started = None, {}
            if workers:
                def compile_ahead(cases: list[Case]) -> None:
                    chosen = ahead.plan(cases, lambda c: self.predict_keys(check, c))
                    started.update(ahead.start(self.executor, check.ref(), chosen, workers,
                                                    check.timeout or self.options.timeout))
            try:
                found = search(pipeline, compile_ahead, lambda phase: self.phase(result, phase))
            finally:
                if started:
                    result.ahead = ahead.finish(self.executor, started)
            result.budget_skipped, result.budget_beyond = budget.skipped, budget.for_classes
            if budget.describe():
                result.notes.append(budget.describe())  # type: ignore[arg-type]
            result.spec_classes = budget.coverage()
            result.spec_unreachable = budget.coverage(reachable=False)
            result.spec_skipped = _skipped_classes(budget)
            if result.spec_skipped:
                result.notes.append("the compile budget never compiled specialization classes that drawn cases "
                                    "brought: " + "; ".join(result.spec_skipped))
            if found is not None:
                result.divergences.append(self.finish(check, judge, found))
        except DivergenceError:
            raise
        except SetupError as exc:
            result.status = "error"
            result.why = str(exc)
            result.notes.append(result.why)
        except HangBudgetSpent:
            result.status = "error"
            result.why = "hangs cost more than the per-case timeout and no failing case was kept"
            result.notes.append(result.why)
        except Exception as exc:  # tdiff itself or the declaration failed: report, never crash the session
            result.status = "error"
            result.why = f"{type(exc).__name__}: {exc}"
            result.notes.append(result.why)
        if result.status != "error":
            never_ran = result.uncovered() if self.options.coverage == "require" else []
            if never_ran:
                note = "--tdiff-coverage require: kernel code no case ran: " + "; ".join(never_ran)
                result.why = result.why or note
                result.notes.append(note)
            # a finding's check (xfail) fails on its known divergences still showing, and passes (a strict
            # xfail then says XPASS) once they are gone; any other check is the opposite
            stale = "known" if check.expects_failure() else "fixed"
            if result.failures or never_ran or any(s == stale for _, s in result.replayed):
                result.status = "failed"
            elif result.judged <= 0 and not any(s == "passed" for _, s in result.replayed):
                result.status = "skipped"
        result.wall = time.perf_counter() - t0
        return result

    def budget(self, check: Check, opinions: Opinions) -> CompileBudget:
        """The check's compile budget; none when no opinion compiles (interpreter, reference)."""
        if not any(k not in ("interpreter", "reference") for k in opinions.kinds):
            return CompileBudget()
        if check.max_compiles is not None:  # the check's own count replaces the run's budget
            return CompileBudget(None, check.max_compiles)
        return CompileBudget(self.options.compile_budget, self.options.max_compiles)

    def precompile_workers(self, judge: CaseJudge) -> int:
        """Compile workers for compiling ahead: with the compiled backend, in worker processes only."""
        if not isinstance(self.executor, Pool) or all(k in ("interpreter", "reference") for k in judge.opinions.kinds):
            return 0
        n = self.options.precompile
        return ahead.auto_workers() if n is None else n

    def predict_keys(self, check: Check, case: Case) -> tuple | None:
        """The launch keys a case would compile, from a dry launch in a CPU worker (None: unknown)."""
        target = check if isinstance(self.executor, InProcess) else check.ref()
        from ..execute.workers import Job

        return self.executor.run_many([Job(target, SPECIALIZE, case)], check.timeout or self.options.timeout)[0] \
            .launch_keys

    def dry_launch(self, check: Check, case: Case) -> Outcome:
        """The launches `launch` makes for a case, recorded without running a kernel."""
        target = check if isinstance(self.executor, InProcess) else check.ref()
        from ..execute.workers import Job

        return self.executor.run_many([Job(target, SPECIALIZE, case)], check.timeout or self.options.timeout)[0]

    # -- a divergence ------------------------------------------------------------------
    def finish(self, check: Check, judge: CaseJudge, found: CaseRecord, source: str = "search",
               write_repro: bool = True, known_too: bool = False) -> Divergence:
        """The divergence of a failing case: shrunk (a search's), its final verdict, reproducer (unless
        `write_repro` is False) and corpus entry. A fuzz run's ("fuzz": its engine shrinks) replaces the entry
        its previous, larger case of the same divergence wrote."""
        case, verdict, ev = found.case, found.verdict, found.evidence
        info = None
        # a divergence a corpus entry records as known (`"expect": "divergence"`): that entry is already its
        # minimal case; no shrinking and no reproducer (`tdiff replay --repro-dir DIR ENTRY` writes one)
        known = None if known_too else next(
            (path for path, rec in judge.result.known if _same_divergence(rec, verdict)), None)
        if source == "search" and self.options.shrink_budget > 0 and not judge.timeouts.spent and known is None:
            self.phase(judge.result, "shrinking")
            with contextlib.suppress(HangBudgetSpent):  # hangs cost enough: keep the case as found
                case, verdict, ev, info = shrink(case, verdict, ev, lambda c: judge.verdict(c),
                                                 self.options.shrink_budget)
        if self.options.verdict and not judge.timeouts.spent:
            try:
                final, final_ev = judge.verdict(case, final=True)
                if final.failed:
                    verdict, ev = final, final_ev
            except HangBudgetSpent:
                pass
        div = Divergence(check.id, case, verdict, ev, source=source, shrink=info)
        extra = []
        if info is not None:
            extra.append(f"shrunk: {info.describe()}")
        if self.options.localize and not judge.timeouts.spent:
            self.phase(judge.result, "localizing the compiler pass")
            line = which_pass(judge, case, verdict, ev)
            if line is not None:
                extra.append(line)
        if self.options.repro_dir is not None and write_repro and known is not None:
            extra.append(f"reproducer: not written (the known divergence of {known}, its minimal case; "
                         f"`tdiff replay --repro-dir DIR {known}` writes one)")
        elif self.options.repro_dir is not None and write_repro:
            reduced = self.reduce(judge, case, verdict, ev, div, extra)
            self.phase(judge.result, "writing the reproducer")
            prepare_run_dir(self.options.run_dir, self.options.repro_dir)
            folder = Path(self.options.repro_dir) / corpus_mod.case_folder(check, case)
            try:
                dry = None
                if not any(o.launches for o in ev.outcomes.values()):
                    dry = self.dry_launch(check, case)
                div.repro_path = self.write_repro(folder, check, case, verdict, ev, dry, judge, reduced, extra)
                extra.append(f"reproducer: {div.repro_path} (run: python {div.repro_path})")
            except Exception as exc:
                div.repro_note = f"{type(exc).__name__}: {exc}"
                extra.append(f"reproducer: not written ({div.repro_note})")
            div.pictures = save_pictures(_comparisons(ev, verdict), folder)
            extra += [f"picture: {p}" for p in div.pictures]
        same = next((path for path, rec in judge.result.known if _same_divergence(rec, verdict)), None)
        writes = source in ("search", "fuzz")
        if self.options.corpus_dir is not None and writes and same is not None:
            extra.append(f"corpus entry: not written (the known divergence of {same})")
        elif self.options.corpus_dir is not None and writes:
            try:
                prepare_run_dir(self.options.run_dir, self.options.corpus_dir)
                div.corpus_path = corpus_mod.write(Path(self.options.corpus_dir), check, case, verdict, ev)
                extra.append(f"corpus entry: {div.corpus_path}")
                if source == "fuzz":
                    self._replace_fuzz_entry((check.id, verdict.signature), div.corpus_path)
            except Exception as exc:
                extra.append(f"corpus entry: not written ({type(exc).__name__}: {exc})")
        if source not in ("search", "fuzz"):
            extra.append(f"replayed from {source}")
        div.report = render(check.id, case, verdict, ev, extra)
        return div

    def reduce(self, judge: CaseJudge, case: Case, verdict: Any, ev: Any, div: Divergence,
               extra: list[str]) -> KernelReduction | None:
        """The kernel reduced on the shrunk case for the reproducer (`--tdiff-reduce-budget`), with a line for the
        report saying how much, or why not; None when it is off or found nothing smaller."""
        if self.options.reduce_budget <= 0 or judge.timeouts.spent:
            return None
        if judge.check.expects_failure() and not self.options.reduce_expected:
            # (a known finding: pytest's xfail expects it; its reduction would cost every run the budget)
            why = ("the check expects this failure (xfail): kernels of expected failures are not reduced in a "
                   "pytest run; `tdiff replay --repro-dir DIR ENTRY` reduces it")
            div.kernel_reduced = why
            extra.append(f"kernel not reduced: {why}")
            return None
        self.phase(judge.result, "reducing the kernel")
        try:
            got = reduce_kernel(judge, case, verdict, ev, self.options.reduce_budget)
        except HangBudgetSpent:
            got = "hangs spent the check's budget"
        except Exception as exc:  # tdiff's own failure: the reproducer carries the whole kernel, and says why
            got = f"tdiff failed: {type(exc).__name__}: {exc}"
        div.kernel_reduced = got if isinstance(got, str) else got.describe()
        extra.append(f"kernel not reduced: {got}" if isinstance(got, str) else got.describe())
        return None if isinstance(got, str) else got

    def write_repro(self, folder: Path, check: Check, case: Case, verdict: Any, ev: Any, dry: Outcome | None,
                    judge: CaseJudge, reduced: KernelReduction | None, extra: list[str]) -> Path:
        """The reproducer, with the reduced kernel where there is one and it reproduces in a fresh process;
        else with the whole kernel (the report says why)."""
        if reduced is not None and reduced.verdict is not None:
            try:
                return repro.write(folder, reduced.check, case, reduced.verdict, reduced.evidence, dry=dry,
                                   case_timeout=judge.timeouts.current(),
                                   reduced=reduced.describe() + "\n\n" + reduced.diff)
            except Exception as exc:
                extra.append(f"the reduced kernel's reproducer was not kept ({type(exc).__name__}: {exc}): "
                             "it carries the whole kernel")
        return repro.write(folder, check, case, verdict, ev, dry=dry, case_timeout=judge.timeouts.current())

    def _replace_fuzz_entry(self, key: tuple, path: Path) -> None:
        """Keep one corpus entry per divergence a fuzz run shrinks: the newest (smallest) case's."""
        entries = self.__dict__.setdefault("_fuzz_entries", {})
        old = entries.get(key)
        if old is not None and Path(old) != Path(path) and Path(old).is_dir():
            shutil.rmtree(old, ignore_errors=True)
        entries[key] = path

    # -- the corpus --------------------------------------------------------------------
    def replay_corpora(self, check: Check, result: CheckResult, judge: CaseJudge) -> None:
        """Replay the check's entries in every corpus of the run (`corpus_dir`, then `corpus_more`), each
        entry once; copies of an entry that conflict are replayed from none and make the check an error."""
        roots = self.options.corpora()
        if not roots:
            return
        found = corpus_union.entries_for_check(roots, check)
        for conflict in found.conflicts:
            result.status = "error"
            result.why = result.why or conflict.describe()
            result.notes.append(conflict.describe())
        for entry in found.entries:
            self.replay_entry(check, entry, result, judge)

    def replay_entry(self, check: Check, entry: corpus_mod.Entry, result: CheckResult,
                     judge: CaseJudge | None = None, reproduce_known: bool = False) -> str:
        """Replay one corpus entry into `result`; returns "passed", "failed", "known", "fixed" (a known
        divergence that no longer shows: fails the check), "not judged" or "error". `reproduce_known`: write
        a reproducer of a known divergence too (`tdiff replay --repro-dir`)."""
        judge = judge or self.judge(check, result)
        try:
            case = entry.load_case(check)
            meta = entry.meta()
            known = entry.expected() == "divergence"  # a known bug, e.g. in Triton: kept as a watch
        except CorpusError as exc:
            result.replayed.append((entry.id, "error"))
            result.status = "error"
            result.why = result.why or str(exc)
            result.notes.append(str(exc))
            return "error"
        if meta.get("expect") == "divergence" and not known:
            result.notes.append(f"corpus entry {entry.path} expects its divergence under triton "
                                f"{meta.get('expect_triton')} only: replayed as a regression test under triton "
                                f"{corpus_mod.triton_here()}")
        recorded_under = corpus_mod.other_triton(meta)
        if recorded_under:
            result.other_versions[recorded_under] += 1
            result.notes.append(f"corpus entry {entry.path} was recorded under {recorded_under}; replayed here under "
                                f"triton {corpus_mod.triton_here()}")
        sides = corpus_mod.recorded_sides(meta)
        backends_here = {b.kind for b in judge.opinions.backends}
        if known and any(s.base == "compiled" for s in sides) \
                and backends_here <= {"interpreter", "reference"}:
            # (it would read as fixed: the backend that showed it did not run)
            result.replayed.append((entry.id, "not judged"))
            result.notes.append(f"corpus entry {entry.path} could not be judged here: its known divergence is the "
                                "compiled backend's, which did not run (no CUDA GPU, or not among the backends)")
            return "not judged"
        # every opinion, no compile budget; a known divergence's note names its cause
        record = CasePipeline(judge).judge_case(case, final=known)
        verdict = record.verdict
        if not record.judged:
            result.replayed.append((entry.id, "not judged"))
            result.notes.append(f"corpus entry {entry.path} could not be judged here: {'; '.join(verdict.reasons)}")
            return "not judged"
        if not verdict.failed:
            if known:  # like a strict xfail that passes: the corpus no longer says what is true
                recorded = meta.get("divergence") or {}
                note = (
                    f"corpus entry {entry.path} recorded a known {recorded.get('kind') or ''} divergence that no "
                    f"longer shows ({verdict.label}): if the bug was fixed (a Triton or library upgrade), set its "
                    f"\"expect\" to \"pass\" (or \"expect_triton\" to the versions with the bug) to keep it as a "
                    f"regression test; if not, tdiff stopped seeing it")
                if not check.expects_failure():  # (a finding's check then passes: its xfail reports it)
                    result.why = result.why or note
                result.notes.append(note)
                result.replayed.append((entry.id, "fixed"))
                return "fixed"
            result.replayed.append((entry.id, "passed"))
            return "passed"
        recorded = meta.get("divergence") or {}
        if known and _same_divergence(recorded, verdict):
            result.replayed.append((entry.id, "known"))
            result.known.append((entry.path, recorded))
            note = f"corpus entry {entry.path} still shows its known divergence: {verdict}"
            if check.expects_failure():  # the finding its xfail mark expects
                result.why = result.why or note
            result.notes.append(note)
            if reproduce_known and self.options.repro_dir is not None:
                div = self.finish(check, judge, record, source=str(entry.path), known_too=True)
                result.notes.append(f"reproducer: {div.repro_path or 'not written (' + str(div.repro_note) + ')'}")
            return "known"
        if known:
            result.notes.append(f"corpus entry {entry.path} records a known {recorded.get('kind')} divergence in "
                                f"{', '.join(recorded.get('targets') or []) or 'its outputs'}; it now fails otherwise "
                                f"({verdict.label}): judged as a new failure")
        result.replayed.append((entry.id, "failed"))
        result.divergences.append(self.finish(check, judge, record, source=f"corpus entry {entry.path}"))
        return "failed"


def _skipped_classes(budget: CompileBudget) -> list[str]:
    """The specialization classes of kernel arguments that drawn cases brought and no case compiled (the
    budget ran them without the compiled backend), one line per argument."""
    by_param: dict[tuple, list[str]] = {}
    for name, index, cls in sorted(budget.drawn - budget.classes, key=str):
        if index == "options" or not (isinstance(cls, tuple) and len(cls) == 2) or cls[0] == "constexpr":
            continue
        table = POINTER_CLASSES if str(cls[0]).startswith("*") else INT_CLASSES
        by_param.setdefault((name, index), []).append(table.get(cls[1], str(cls[1])))
    return [f"{name} argument {index}: {' or '.join(texts)}" for (name, index), texts in by_param.items()]


def _same_divergence(recorded: dict, verdict: Any) -> bool:
    """Whether a failure is the one a known-divergence entry recorded: the same kind, in a target it named."""
    kind, targets = recorded.get("kind"), set(recorded.get("targets") or ())
    if kind and verdict.kind and kind != verdict.kind:
        return False
    return not (targets and verdict.targets and not targets & set(verdict.targets))


def verify(kernel: Any, *, options: RunOptions | None = None, executor: Any = None,
           **changes: Any) -> list[CheckResult]:
    """Run every check of `kernel`; raise `DivergenceError` (with the report) on a divergence.

    Keyword arguments override `RunOptions` fields, e.g. `verify(k, max_examples=10, isolation="none")`.
    """
    if os.environ.get("TDIFF_WORKER"):
        raise RuntimeError("tdiff.verify ran inside a tdiff worker, which means it runs when the kernel's module "
                           "is imported; put it under `if __name__ == '__main__':` or in a test")
    checks = checks_of(kernel)
    if not checks:
        raise TypeError(f"{kernels.kernel_name(kernel) if kernels.is_kernel(kernel) else kernel!r} "
                        "has no @tdiff.check")
    opts = (options or RunOptions()).with_(**changes) if changes else (options or RunOptions())
    runner = Runner(opts, executor)
    results = [runner.run_check(c) for c in checks]
    bad = [r for r in results if r.status in ("failed", "error")]
    if bad:
        raise DivergenceError("\n\n".join(r.report() or f"{r.check_id}: {r.status}" for r in bad), results)
    return results
