"""Running checks: replay the corpus, search with hypothesis, then shrink, judge, report and record.

This module drives the pipeline (strategies -> plan -> backends -> comparison -> verdict ->
shrink/report/corpus); the stages live in their own modules: `search` (hypothesis), `pipeline` (one case,
the same for the search, fuzz targets and replay: the compile budget's filter, judging, counting),
`case_judge` (opinions, evidence, verdict, reruns, timeouts), `finish` (a divergence's steps: shrink, final
verdict, localize, reduce, reproducer and corpus entry, report), `status` (the check's status, decided once
at the end from what the run found), `shrink`, `report`, `repro`, `corpus`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core import kernels
from ..core.backend_spec import COMPILE_ONLY
from ..core.case import Case
from ..core.outcome import Outcome
from ..core.settings import RunOptions
from ..declaration import Check, checks_of
from ..errors import CorpusError, DivergenceError
from ..execute import ahead, forkserver
from ..execute.backends.base import gpu_available
from ..execute.backends.dry_launch import SPEC as SPECIALIZE
from ..execute.compile_budget import INT_CLASSES, POINTER_CLASSES, CompileBudget, layout_of
from ..execute.workers import InProcess, Pool, shared_pool
from ..judge.opinions import Opinions, choose
from ..record import corpus as corpus_mod
from ..record import corpus_union
from ..record.results import CheckResult, Divergence, uncovered
from ..record.status import Status
from ..record.tally import Tally
from . import finish as steps_mod
from .case_judge import CaseJudge, HangBudgetSpent, SetupError, error_text
from .pipeline import CasePipeline, CaseRecord
from .search import Ahead, SearchReport, search
from .status import Facts, Replayed, coverage_note, decide_status

__all__ = ["CheckResult", "Divergence", "Progress", "Runner", "Status", "verify", "opinions_for"]


def opinions_for(check: Check, options: RunOptions) -> Opinions:
    return choose(check, options.backends, gpu_available, options.compile_only)


class Progress(Protocol):
    """What a runner tells whoever shows a running check's progress (the pytest plugin): each phase it
    enters (`replaying the corpus`, `searching`, `shrinking`, `writing the reproducer`) and each case drawn."""

    def update(self, tally: Tally, phase: str) -> None: ...


class Runner:
    """Runs checks with one set of options and one executor (worker pool or in-process)."""

    def __init__(self, options: RunOptions | None = None, executor: Any = None,
                 progress: Progress | None = None) -> None:
        self.options = options or RunOptions()
        if executor is None:
            executor = InProcess() if self.options.isolation == "none" else shared_pool(self.options.gpu)
        self.executor = executor
        self.progress = progress

    def phase(self, tally: Tally, phase: str) -> None:
        tally.enter(phase)
        if self.progress is not None:
            self.progress.update(tally, phase)

    def judge(self, check: Check, tally: Tally | None = None, opinions: Opinions | None = None) -> CaseJudge:
        """A judge of the check's cases, counting them in `tally` (default: a new one)."""
        return CaseJudge(self.executor, check, opinions or opinions_for(check, self.options), self.options,
                         Tally() if tally is None else tally)

    def pipeline(self, check: Check, judge: CaseJudge | None = None) -> CasePipeline:
        """The pipeline a check's drawn cases go through (`judge`'s, or a new judge's), under the check's compile
        budget."""
        judge = judge or self.judge(check)
        return CasePipeline(judge, self.budget(check, judge.opinions), lambda case: self.predict_keys(check, case))

    def new_result(self, check: Check) -> CheckResult:
        """The result of a check that ran nothing yet: what it is and what it compares."""
        opinions = opinions_for(check, self.options)
        return CheckResult(check.id, check.item_name, opinions.labels, pair_note=opinions.note,
                           compared=opinions.describe(), declared=check.declared_tolerances())

    def check_environments(self, judge: CaseJudge) -> tuple[dict[str, str], str]:
        """Backends in another environment (`interpreter@python`) need worker processes and a Python
        that can run tdiff's worker: a ValueError naming the spec otherwise. The versions of each, and of
        this environment ('' where none ran elsewhere): a pass names both."""
        from ..execute.environments import probe, versions_here

        environments: dict[str, str] = {}
        here = ""
        for spec in judge.opinions.backends:
            if spec.python is None:
                continue
            text = spec.label
            if not isinstance(self.executor, Pool):
                raise ValueError(f"backend {text!r} runs in another environment, in a worker process: it needs "
                                 "isolation='process' (--tdiff-isolation process), not 'none'")
            try:
                environments[text] = probe(spec.python)
            except ValueError as exc:
                raise ValueError(f"backend {text!r}: {exc}") from None
            here = versions_here()
        return environments, here

    # -- one check -----------------------------------------------------------------
    def run_check(self, check: Check) -> CheckResult:
        """Replay the check's corpus entries, search, and finish the divergence found; the result is assembled
        once, at the end, with the status decided from what the run found (`decide_status`)."""
        t0 = time.perf_counter()
        started, pid = time.time(), os.getpid()
        tally = Tally()
        judge = self.judge(check, tally)
        environments, here = self.check_environments(judge)
        ahead_workers = self.ahead_workers(judge)
        if isinstance(self.executor, Pool):
            self.executor.warm([judge.spec(s).lane for s in judge.opinions.backends] + ahead.lanes(ahead_workers))
        pipeline = self.pipeline(check, judge)
        budget = pipeline.budget
        replays: list[Replayed] = []
        report = SearchReport()
        done: dict[str, Any] = {}  # what the compile workers did
        found: list[Divergence] = []
        after: list[str] = []  # the notes after the search's
        spec = _SpecClasses()
        error: str | None = None  # the run's own error: the check errors, whatever else it found
        try:
            if self.options.replay:
                self.phase(tally, "replaying the corpus")
                for replayed in self.replays(check, judge):  # (those before an error count)
                    replays.append(replayed)
            self.phase(tally, "searching")
            report = search(pipeline, lambda phase: self.phase(tally, phase),
                            self.compile_ahead(judge, ahead_workers, done) if ahead_workers else None,
                            self.specialization(check) if ahead_workers else None)
            error = report.error
            if error is None:
                spec = _spec_classes(budget)
                after += spec.notes
                if report.found is not None:
                    known = tuple(r.known for r in replays if r.known is not None)
                    found.append(self.finish(check, judge, report.found, known=known))
        except DivergenceError:
            raise
        except (Exception, SetupError, HangBudgetSpent) as exc:  # report, never crash the session
            error = error_text(exc)
        if error is not None:
            after.append(error)
        divergences = [r.divergence for r in replays if r.divergence is not None] + found
        result = self.new_result(check)
        lines_run, lines_executable = tally.lines_run, tally.lines_executable
        # (an error beats kernel code that never ran: its lines are not looked up then)
        never_ran = uncovered(lines_run, lines_executable) if self.options.coverage == "require" and error is None \
            else []
        status, why = decide_status(Facts(
            expects_failure=check.expects_failure(), error=error, replays=replays,
            failures=sum(1 for d in divergences if d.verdict.failed), judged=tally.judged, never_ran=never_ran))
        status = Status(status)
        if never_ran and status != Status.ERROR:
            after.append(coverage_note(never_ran))
        tally.enter(None)
        return dataclasses.replace(result,  # (the one place a check's result is completed)
            status=status, why=why, started=started, pid=pid, wall=time.perf_counter() - t0,
            environments=environments, here=here, ahead=done,
            cases=tally.cases, judged=tally.judged, discarded=tally.discarded, max_examples=tally.max_examples,
            search_shrinks=tally.search_shrinks, caveats=tally.caveats, caveat_examples=tally.caveat_examples,
            shims=tally.shims, unbatched=tally.unbatched, fresh_workers=forkserver.take_fresh(),
            seconds=tally.seconds, compiles=tally.compiles,
            compile_seconds=tally.compile_seconds, cache_loads=tally.cache_loads, compile_wait=tally.compile_wait,
            compile_only=tally.compile_only, hang_timeout=tally.hang_timeout, phases=tally.phases,
            spent=tally.spent, lines_run=lines_run, lines_executable=lines_executable,
            first_failure=report.first_failure, stopped=report.stopped, plan=report.plan, plan_line=report.plan_line,
            budget_skipped=spec.budget_skipped, budget_beyond=spec.budget_beyond, spec_classes=spec.classes,
            spec_unreachable=spec.unreachable, spec_skipped=spec.skipped,
            replayed=tuple((r.entry, r.state) for r in replays if r.entry is not None),
            other_versions=Counter(r.recorded_under for r in replays if r.recorded_under),
            known=tuple(r.known for r in replays if r.known is not None), divergences=tuple(divergences),
            notes=(*(n for r in replays for n in r.notes), *report.notes, *after))

    def ahead_workers(self, judge: CaseJudge) -> int:
        """Compile workers for this check's planned cases: none without a GPU, worker processes or a plain
        compiled opinion (stage lanes compile their own way)."""
        n = self.options.compile_ahead
        if n == 0 or not isinstance(self.executor, Pool) or not gpu_available():
            return 0
        if not any(s.plain_compiled for s in judge.opinions.backends):
            return 0  # (a compile worker compiles the case's own launches: a variant's would go unused)
        return ahead.workers(n)

    def compile_ahead(self, judge: CaseJudge, n: int, done: dict[str, Any]) -> Ahead:
        """What the search calls with its planned cases: start `n` compile workers on them; it returns what the
        search calls at its end (stop them, and put what they did in `done`), or why they did not start."""

        def start(cases: list[Case]) -> Callable[[], None] | str:
            jobs = ahead.jobs(judge.target(), cases, n)
            try:
                self.executor.ahead(jobs)
            except Exception as exc:  # the search goes on, its GPU worker compiling everything itself
                return (f"compile workers not started ({type(exc).__name__}: {exc}): the GPU worker compiled every "
                        "specialization itself")
            t0 = time.perf_counter()

            def stop() -> None:
                count = self.executor.stop_ahead(judge.timeouts.base)
                done.update({"workers": len(jobs), "cases": sum(len(j.cases) for j in jobs),
                                      "done": count.cases, "compiles": count.compiles,
                                      "compile_seconds": round(count.seconds, 3), "loads": count.loads,
                                      "launchers": count.launchers,
                                      "launcher_seconds": round(count.launcher_seconds, 3),
                                      "taken": count.taken, "stopped": count.stopped,
                                      "wall": round(time.perf_counter() - t0, 3), "errors": count.errors[:3]})

            return stop

        return start

    def specialization(self, check: Check) -> Callable[[Case], Hashable | None]:
        """A case's specialization, for the search to run planned cases that share one one after another (on the
        GPU, where each costs a compile): the launch keys a dry launch predicts, else its layout (`layout_of`)."""

        def key(case: Case) -> Hashable | None:
            try:
                keys = self.predict_keys(check, case)
            except Exception:  # noqa: BLE001 - (the order is all it decides: the case runs anyway)
                keys = None
            return ("keys", tuple(keys)) if keys else ("layout", layout_of(case))

        return key

    def budget(self, check: Check, opinions: Opinions) -> CompileBudget:
        """The check's compile budget; none when no opinion compiles on a GPU (interpreter, reference, compile-only:
        it compiles each class once and runs nothing)."""
        if not any(k not in ("interpreter", "reference", COMPILE_ONLY) for k in opinions.kinds):
            return CompileBudget()
        if check.max_compiles is not None:  # the check's own count replaces the run's budget
            return CompileBudget(None, check.max_compiles)
        return CompileBudget(self.options.compile_budget, self.options.max_compiles)

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
               write_repro: bool = True, known_too: bool = False,
               known: Sequence[tuple[Any, dict[str, Any]]] = ()) -> Divergence:
        """The divergence of a failing case: shrunk (a search's), its final verdict, reproducer (unless
        `write_repro` is False) and corpus entry (`tdiff.drive.finish`'s steps). A fuzz run's ("fuzz": its engine
        shrinks) replaces the entry its previous, larger case of the same divergence wrote. `known`: the replayed
        entries' known divergences still showing (entry path, recorded divergence)."""
        steps = steps_mod.Steps(self.options, judge, lambda phase: self.phase(judge.tally, phase), tuple(known))
        # a divergence a corpus entry records as known (`"expect": "divergence"`): that entry is already its
        # minimal case; no shrinking and no reproducer (`tdiff replay --repro-dir DIR ENTRY` writes one)
        known_path = None if known_too else steps_mod.known_entry(steps.known, found.verdict)
        shrunk = steps_mod.shrink_found(steps, found, source, known_path)
        confirmed = steps_mod.confirm(steps, shrunk)
        localized = steps_mod.localize(steps, confirmed)
        reproducer = steps_mod.write_reproducer(steps, check, confirmed, known_path,
                                                lambda c: self.dry_launch(check, c)) \
            if write_repro else steps_mod.Written()
        entry = steps_mod.write_entry(steps, check, confirmed, source)
        if source == "fuzz" and entry.corpus_path is not None:
            self._replace_fuzz_entry((check.id, confirmed.verdict.signature), entry.corpus_path)
        return steps_mod.divergence(check, source, shrunk, confirmed, localized, reproducer, entry)

    def _replace_fuzz_entry(self, key: tuple, path: Path) -> None:
        """Keep one corpus entry per divergence a fuzz run shrinks: the newest (smallest) case's."""
        entries = self.__dict__.setdefault("_fuzz_entries", {})
        old = entries.get(key)
        if old is not None and Path(old) != Path(path) and Path(old).is_dir():
            shutil.rmtree(old, ignore_errors=True)
        entries[key] = path

    # -- the corpus --------------------------------------------------------------------
    def replay_corpora(self, check: Check, judge: CaseJudge | None = None) -> list[Replayed]:
        """Replay the check's entries in every corpus of the run (`corpus_dir`, then `corpus_more`), each
        entry once; what each replay found, in order. Copies of an entry that conflict are replayed from none
        (a "conflict": the check errors)."""
        return list(self.replays(check, judge or self.judge(check)))

    def replays(self, check: Check, judge: CaseJudge) -> Iterator[Replayed]:
        """`replay_corpora`, one replay at a time."""
        roots = self.options.corpora()
        if not roots:
            return
        found = corpus_union.entries_for_check(roots, check)
        for conflict in found.conflicts:
            yield Replayed("conflict", conflict.describe(), notes=(conflict.describe(),))
        known: list[tuple[Any, dict[str, Any]]] = []
        for entry in found.entries:
            replayed = self.replay_entry(check, entry, judge, known=known)
            if replayed.known is not None:
                known.append(replayed.known)
            yield replayed

    def replay_entry(self, check: Check, entry: corpus_mod.Entry, judge: CaseJudge | None = None,
                     reproduce_known: bool = False, known: Sequence[tuple[Any, dict[str, Any]]] = ()) -> Replayed:
        """Replay one corpus entry; what it found (`Replayed`): its state ("passed", "failed", "known", "fixed": a
        known divergence that no longer shows, "not judged" or "error"), the note that says why, where it fails the
        check (`decide_status`), its notes and its divergence. `reproduce_known`: write a reproducer of a known
        divergence too (`tdiff replay --repro-dir`). `known`: the known divergences earlier entries showed."""
        judge = judge or self.judge(check)
        notes: list[str] = []

        def replayed(state: str, note: str = "", **more: Any) -> Replayed:
            return Replayed(state, note, entry.id, tuple(notes), **more)

        try:
            case = entry.load_case(check)
            meta = entry.meta()
            is_known = entry.expected() == "divergence"  # a known bug, e.g. in Triton: kept as a watch
        except CorpusError as exc:
            notes.append(str(exc))
            return replayed("error", str(exc))
        if meta.get("expect") == "divergence" and not is_known:
            notes.append(f"corpus entry {entry.path} expects its divergence under triton "
                         f"{meta.get('expect_triton')} only: replayed as a regression test under triton "
                         f"{corpus_mod.triton_here()}")
        recorded_under = corpus_mod.other_triton(meta)
        if recorded_under:
            notes.append(f"corpus entry {entry.path} was recorded under {recorded_under}; replayed here under "
                         f"triton {corpus_mod.triton_here()}")
        under = recorded_under or None
        sides = corpus_mod.recorded_sides(meta)
        backends_here = {b.kind for b in judge.opinions.backends} - {COMPILE_ONLY}  # (it shows no values)
        if is_known and any(s.base == "compiled" for s in sides) \
                and backends_here <= {"interpreter", "reference"}:
            # (it would read as fixed: the backend that showed it did not run)
            notes.append(f"corpus entry {entry.path} could not be judged here: its known divergence is the "
                         "compiled backend's, which did not run (no CUDA GPU, or not among the backends)")
            return replayed("not judged", recorded_under=under)
        # every opinion, no compile budget; a known divergence's note names its cause
        record = CasePipeline(judge).judge_case(case, final=is_known)
        verdict = record.verdict
        if not record.judged:
            notes.append(f"corpus entry {entry.path} could not be judged here: {'; '.join(verdict.reasons)}")
            return replayed("not judged", recorded_under=under)
        if not verdict.failed:
            if is_known:  # like a strict xfail that passes: the corpus no longer says what is true
                recorded = meta.get("divergence") or {}
                note = (
                    f"corpus entry {entry.path} recorded a known {recorded.get('kind') or ''} divergence that no "
                    f"longer shows ({verdict.label}): if the bug was fixed (a Triton or library upgrade), set its "
                    f"\"expect\" to \"pass\" (or \"expect_triton\" to the versions with the bug) to keep it as a "
                    f"regression test; if not, tdiff stopped seeing it")
                notes.append(note)  # (it fails the check; a finding's check passes: its xfail reports it)
                return replayed("fixed", note, recorded_under=under)
            return replayed("passed", recorded_under=under)
        recorded = meta.get("divergence") or {}
        if is_known and steps_mod.same_divergence(recorded, verdict):
            note = f"corpus entry {entry.path} still shows its known divergence: {verdict}"
            notes.append(note)  # (it fails a finding's check: the finding its xfail mark expects)
            if reproduce_known and self.options.repro_dir is not None:
                div = self.finish(check, judge, record, source=str(entry.path), known_too=True,
                                  known=(*known, (entry.path, recorded)))
                notes.append(f"reproducer: {div.repro_path or 'not written (' + str(div.repro_note) + ')'}")
            return replayed("known", note, known=(entry.path, recorded), recorded_under=under)
        if is_known:
            notes.append(f"corpus entry {entry.path} records a known {recorded.get('kind')} divergence in "
                         f"{', '.join(recorded.get('targets') or []) or 'its outputs'}; it now fails otherwise "
                         f"({verdict.label}): judged as a new failure")
        divergence = self.finish(check, judge, record, source=f"corpus entry {entry.path}", known=known)
        return replayed("failed", divergence=divergence, recorded_under=under)


@dataclass(frozen=True)
class _SpecClasses:
    """What the compile budget did: drawn cases run without the compiled backend, compiles past it, the
    specialization classes no case compiled, those no case can reach, those it skipped; and its notes."""

    budget_skipped: int = 0
    budget_beyond: int = 0
    classes: tuple[str, ...] = ()
    unreachable: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _spec_classes(budget: CompileBudget) -> _SpecClasses:
    skipped = tuple(_skipped_classes(budget))
    described = budget.describe()
    notes = [described] if described else []
    if skipped:
        notes.append("the compile budget never compiled specialization classes that drawn cases brought: "
                     + "; ".join(skipped))
    return _SpecClasses(budget.skipped, budget.for_classes, tuple(budget.coverage()),
                        tuple(budget.coverage(reachable=False)), skipped, tuple(notes))


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


def verify(kernel: Any, *, options: RunOptions | None = None, executor: Any = None,
           **changes: Any) -> list[CheckResult]:
    """Run every check of `kernel`; raise `DivergenceError` (with the report) on a divergence.

    Keyword arguments override `RunOptions` fields, e.g. `verify(k, max_examples=10, isolation="none")`; a bad
    value raises `RunOptions`'s ValueError (that of the flag that sets the field) before anything runs.
    """
    if os.environ.get("TDIFF_WORKER"):
        raise RuntimeError("tdiff.verify ran inside a tdiff worker, which means it runs when the kernel's module "
                           "is imported; put it under `if __name__ == '__main__':` or in a test")
    # (first: a bad option raises, as `RunOptions` checks it, before anything runs)
    opts = (options or RunOptions()).with_(**changes) if changes else (options or RunOptions())
    checks = checks_of(kernel)
    if not checks:
        raise TypeError(f"{kernels.kernel_name(kernel) if kernels.is_kernel(kernel) else kernel!r} "
                        "has no @tdiff.check")
    runner = Runner(opts, executor)
    results = [runner.run_check(c) for c in checks]
    bad = [r for r in results if r.status.bad]
    if bad:
        raise DivergenceError("\n\n".join(r.report() or f"{r.check_id}: {r.status}" for r in bad), results)
    return results
