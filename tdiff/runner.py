"""Running checks: replay the corpus, search with hypothesis, then shrink, judge, report and record.

This module drives the pipeline (strategies -> plan -> backends -> comparison -> verdict ->
shrink/report/corpus); every stage it calls lives in its own module and knows nothing of this one.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import errors as herrors

from . import corpus as corpus_mod
from . import kernels, repro
from .backends.base import BackendSpec, gpu_available
from .backends.specialize import SPEC as SPECIALIZE
from .budget import CompileBudget, layout_of
from .case import Case
from .compare import Comparison, compare
from .declaration import Check, checks_of
from .errors import CorpusError, DivergenceError
from .outcome import Outcome
from .report import render, save_pictures
from .settings import RunOptions, hypothesis_settings
from .shrink import ShrinkInfo, shrink
from .strategies import case_strategy
from .verdict import QUIET, Verdict, decide
from .workers import InProcess, Job, Pool, shared_pool


@dataclass
class Divergence:
    """A shrunk, judged divergence and where it was written."""

    check_id: str
    case: Case
    comparison: Comparison
    verdict: Verdict | None
    report: str
    shrink: ShrinkInfo | None = None
    repro_path: Path | None = None
    corpus_path: Path | None = None
    pictures: list[Path] = field(default_factory=list)
    source: str = "search"  # "search" or "corpus:<id>"

    @property
    def quiet(self) -> bool:
        return self.verdict is not None and self.verdict.label in QUIET


@dataclass
class CheckResult:
    check_id: str
    item_name: str
    backends: tuple[str, str]
    status: str = "passed"  # "passed", "failed", "skipped" or "error"
    cases: int = 0
    discarded: Counter = field(default_factory=Counter)
    divergences: list[Divergence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    compiles: int = 0
    compile_seconds: float = 0.0
    replayed: list[tuple[str, str]] = field(default_factory=list)  # (entry id, "passed"/"failed"/"error")
    wall: float = 0.0
    pair_note: str | None = None  # why these backends (e.g. no GPU)
    budget_skipped: int = 0  # drawn cases skipped because they needed new specializations
    budget_beyond: int = 0  # compiles past the budget (one per SKIPS_PER_COMPILE skipped draws)

    @property
    def failures(self) -> list[Divergence]:
        return [d for d in self.divergences if not d.quiet]

    def report(self) -> str:
        parts = [d.report for d in self.failures]
        parts += [f"tdiff: {n}" for n in self.notes if self.status in ("failed", "error")]
        return "\n\n".join(parts)


class _Diverged(Exception):
    pass


class _Abort(BaseException):
    """tdiff could not run a case at all (not a divergence): stop the search at once."""


def default_pair(check: Check) -> tuple[tuple[str, str], str | None]:
    """The backends to compare, and a note to show when the GPU is missing."""
    if check.backends:
        return (check.backends[0], check.backends[1]), None
    if gpu_available():
        return ("compiled", "interpreter"), None
    if check.reference is not None:
        return ("interpreter", "reference"), ("no CUDA GPU: the compiled backend was skipped; the interpreter "
                                              "was compared with each check's reference")
    return ("interpreter", "interpreter:reversed"), (
        "no CUDA GPU and no reference: the compiled backend was skipped; the interpreter was compared with "
        "itself in reversed program order (finds races, out-of-bounds accesses and crashes only)")


class Runner:
    """Runs checks with one set of options and one executor (worker pool or in-process)."""

    def __init__(self, options: RunOptions | None = None, executor: Any = None) -> None:
        self.options = options or RunOptions()
        if executor is None:
            executor = InProcess() if self.options.isolation == "none" else shared_pool(self.options.gpu)
        self.executor = executor

    # -- one case ----------------------------------------------------------------
    def _target(self, check: Check) -> Any:
        return check if isinstance(self.executor, InProcess) else check.ref()

    def spec(self, check: Check, text: str) -> BackendSpec:
        spec = BackendSpec.parse(text)
        if spec.kind == "interpreter":
            spec = spec.with_(check_pointers=check.check_pointers)
            size = check.sample_programs if check.sample_programs is not None else self.options.sample_size
            if spec.programs is None and spec.order == "forward" and not spec.upcast and size > 0:
                spec = spec.with_(sample=(self.options.sample_threshold, size, 0))
        return spec

    @staticmethod
    def _sampled(o: Outcome) -> bool:
        return o.trace is not None and o.trace.sampled

    def run_specs(self, check: Check, case: Case, specs: Iterable[str | BackendSpec]) -> list[Outcome]:
        target = self._target(check)
        jobs = [Job(target, s if isinstance(s, BackendSpec) else self.spec(check, s), case) for s in specs]
        return self.executor.run_many(jobs, check.timeout or self.options.timeout)

    def evaluate(self, check: Check, case: Case, pair: tuple[str, str], result: CheckResult | None = None,
                 keys: list | None = None) -> tuple[Comparison | None, str | None]:
        """Run a case on both backends; (comparison, None) or (None, reason it cannot be judged).
        `keys`, if given, receives the launch keys the backends reported (one tuple each)."""
        a, b = self.run_specs(check, case, pair)
        if keys is not None:
            keys.extend(o.launch_keys for o in (a, b) if o.launch_keys is not None)
        if any(o.trace is not None and o.trace.sampled and o.trace.atomics for o in (a, b)):
            # atomics accumulate over every program: a sample cannot be compared, interpret them all
            full = [s if not self._sampled(o) else self.spec(check, s).with_(sample=None)
                    for s, o in zip(pair, (a, b))]
            a, b = self.run_specs(check, case, full)
        setup = [o for o in (a, b) if o.error is not None and o.error.kind == "setup"]
        if setup:
            raise _Abort(f"{setup[0].backend} could not run the case: {setup[0].error.message}")
        if result is not None:
            for o in (a, b):
                result.seconds[o.backend] = result.seconds.get(o.backend, 0.0) + o.seconds
                result.compiles += o.compiles
                result.compile_seconds += o.compile_seconds
        limited = [o for o in (a, b) if o.error is not None and o.error.kind == "limitation"]
        if limited:
            other = b if limited[0] is a else a
            reason = f"interpreter limitation: {limited[0].error.message}"
            if len(limited) == 1 and check.reference is not None and not other.backend.startswith("reference") \
                    and other.error is None:
                (ref,) = self.run_specs(check, case, ["reference"])
                return compare(other, ref, case, check.tolerance, check.tolerances), None
            return None, reason
        return compare(a, b, case, check.tolerance, check.tolerances), None

    # -- one check -----------------------------------------------------------------
    def run_check(self, check: Check) -> CheckResult:
        t0 = time.perf_counter()
        pair, note = default_pair(check)
        if self.options.backends and not check.backends:
            pair = self.options.backends
            note = None
        result = CheckResult(check.id, check.item_name, pair, pair_note=note)
        if isinstance(self.executor, Pool):
            self.executor.warm([self.spec(check, s).lane for s in pair])
        budget = self.budget(check, pair)
        try:
            if self.options.replay and self.options.corpus_dir is not None:
                self._replay(check, pair, result, budget)
            found = self._search(check, pair, result, budget)
            result.budget_skipped, result.budget_beyond = budget.skipped, budget.beyond
            if budget.describe():
                result.notes.append(budget.describe())  # type: ignore[arg-type]
            if found is not None:
                result.divergences.append(self._finish(check, pair, *found))
        except DivergenceError:
            raise
        except _Abort as exc:
            result.status = "error"
            result.notes.append(str(exc))
        except Exception as exc:  # tdiff itself or the declaration failed: report, never crash the session
            result.status = "error"
            result.notes.append(f"{type(exc).__name__}: {exc}")
        if result.status != "error":
            if result.failures:
                result.status = "failed"
            elif result.cases - sum(result.discarded.values()) <= 0 and not result.replayed:
                result.status = "skipped"
        result.wall = time.perf_counter() - t0
        return result

    def budget(self, check: Check, pair: tuple[str, str]) -> CompileBudget:
        """The check's compile budget; none when neither backend compiles (interpreter, reference)."""
        limit = check.max_compiles if check.max_compiles is not None else self.options.max_compiles
        compiles = any(BackendSpec.parse(s).kind not in ("interpreter", "reference") for s in pair)
        return CompileBudget(limit if compiles else None)

    def predict_keys(self, check: Check, case: Case) -> tuple | None:
        """The launch keys a case would compile, from a dry launch in a CPU worker (None: unknown)."""
        return self.run_specs(check, case, [SPECIALIZE])[0].launch_keys

    def _evaluate_within(self, check: Check, case: Case, pair: tuple[str, str], result: CheckResult,
                         budget: CompileBudget, predicted: Any = None) -> tuple[Comparison | None, str | None]:
        """`evaluate`, recording the case's launch keys and compiles in the budget: the keys the
        compiled backend reports, else those predicted for the case."""
        reported: list[tuple] = []
        before = result.compiles
        out = self.evaluate(check, case, pair, result, reported if budget.limit else None)
        if budget.limit:
            keys = [k for ks in reported for k in ks]
            if not reported:  # a backend that compiles but does not say what
                predicted = predicted if predicted is not None else self.predict_keys(check, case)
                keys = list(predicted or ())
            budget.ran(keys, result.compiles - before)
        return out

    def _search(self, check: Check, pair: tuple[str, str], result: CheckResult,
                budget: CompileBudget | None = None) -> tuple[Case, Comparison] | None:
        last: dict[str, Any] = {}
        budget = budget or CompileBudget(None)
        pending: dict[str, Any] = {}

        def admit(skeleton: Case) -> bool:
            # past the budget, only cases reusing compiled specializations run; decided before the
            # values are drawn, once per layout (shrinking included)
            layout = layout_of(skeleton)
            ok, keys = budget.decide(layout, lambda: self.predict_keys(check, skeleton))
            if keys is not None:
                pending["drawn"] = (layout, keys)
            return ok

        def test(case: Case) -> None:
            drawn = pending.pop("drawn", None)
            keys = drawn[1] if drawn is not None and drawn[0] == layout_of(case) else None
            cmp, reason = self._evaluate_within(check, case, pair, result, budget, keys)
            result.cases += 1
            if cmp is None:
                result.discarded[reason or "discarded"] += 1
                hypothesis.reject()
            if not cmp.ok:
                last["found"] = (case, cmp)
                raise _Diverged(cmp.summary())

        settings = hypothesis_settings(self.options, check.max_examples)
        wrapped = settings(hypothesis.given(case_strategy(check, admit if budget.limit else None))(test))
        inner = wrapped.hypothesis.inner_test  # type: ignore[attr-defined]
        inner._hypothesis_internal_add_digest = check.id.encode()
        if self.options.seed is not None:
            wrapped = hypothesis.seed(self.options.seed)(wrapped)
        try:
            wrapped()
        except _Diverged:
            return last["found"]
        except herrors.Unsatisfiable:
            reasons = ", ".join(f"{r} ({n}x)" for r, n in result.discarded.most_common(3))
            result.notes.append(f"no case could be judged: {reasons}")
        except (herrors.FlakyFailure, herrors.Flaky) as exc:  # type: ignore[attr-defined]
            if "found" in last:
                result.notes.append(f"the divergence did not reproduce on every run ({type(exc).__name__})")
                return last["found"]
            raise
        for reason, n in result.discarded.items():
            result.notes.append(f"{n} case(s) not judged: {reason}")
        return None

    def _finish(self, check: Check, pair: tuple[str, str], case: Case, cmp: Comparison,
                source: str = "search") -> Divergence:
        info: ShrinkInfo | None = None
        if source == "search" and self.options.shrink_budget > 0:
            case, cmp, info = shrink(case, cmp, lambda c: self.evaluate(check, c, pair)[0],
                                     self.options.shrink_budget)
        verdict = None
        if self.options.verdict:
            def rerun(spec: str) -> Outcome:
                return self.run_specs(check, case, [spec])[0]

            specs = {cmp.a.backend: pair[0], cmp.b.backend: pair[1]}
            verdict = decide(case, cmp, rerun, has_reference=check.reference is not None, specs=specs,
                             tolerance=check.tolerance, tolerances=check.tolerances)
        div = Divergence(check.id, case, cmp, verdict, "", info, source=source)
        extra = []
        if info is not None:
            extra.append(f"shrunk: {info.describe()}")
        if not div.quiet and self.options.repro_dir is not None:
            folder = Path(self.options.repro_dir) / check.kernel_name / case.digest()
            try:
                div.repro_path = repro.write(folder, check, case, cmp, verdict, pair)
                extra.append(f"reproducer: {div.repro_path} (run: python {div.repro_path})")
            except Exception as exc:
                extra.append(f"reproducer: not written ({type(exc).__name__}: {exc})")
            div.pictures = save_pictures(cmp, folder)
            extra += [f"picture: {p}" for p in div.pictures]
        if not div.quiet and self.options.corpus_dir is not None and source == "search":
            try:
                div.corpus_path = corpus_mod.write(Path(self.options.corpus_dir), check, case, cmp, verdict, pair)
                extra.append(f"corpus entry: {div.corpus_path}")
            except Exception as exc:
                extra.append(f"corpus entry: not written ({type(exc).__name__}: {exc})")
        if source != "search":
            extra.append(f"replayed from {source}")
        div.report = render(check.id, case, cmp, verdict, extra)
        return div

    def _replay(self, check: Check, pair: tuple[str, str], result: CheckResult,
                budget: CompileBudget | None = None) -> None:
        for entry in corpus_mod.entries_for(Path(self.options.corpus_dir), check):  # type: ignore[arg-type]
            self.replay_entry(check, pair, entry, result, budget)

    def replay_entry(self, check: Check, pair: tuple[str, str], entry: corpus_mod.Entry, result: CheckResult,
                     budget: CompileBudget | None = None) -> str:
        """Replay one corpus entry into `result`; returns "passed", "failed" or "error"."""
        try:
            case = entry.load_case(check)
        except CorpusError as exc:
            result.replayed.append((entry.id, "error"))
            result.status = "error"
            result.notes.append(str(exc))
            return "error"
        # corpus entries always run; their compiles count towards the search's budget
        cmp, _ = self._evaluate_within(check, case, pair, result, budget or CompileBudget(None))
        known = entry.meta().get("expect") == "divergence"  # a known bug, e.g. in Triton: kept as a watch
        if cmp is None or cmp.ok:
            if known:
                result.notes.append(f"corpus entry {entry.path} no longer diverges: the known bug is fixed; "
                                    f"set its \"expect\" to \"pass\" to keep it as a regression test")
            result.replayed.append((entry.id, "passed"))
            return "passed"
        if known:
            result.replayed.append((entry.id, "known"))
            result.notes.append(f"corpus entry {entry.path} still shows its known divergence: {cmp.summary()}")
            return "known"
        result.replayed.append((entry.id, "failed"))
        result.divergences.append(self._finish(check, pair, case, cmp, source=f"corpus entry {entry.path}"))
        return "failed"


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
