"""The search: hypothesis draws cases for a check, each is judged (`CasePipeline`), the first failing case stops it.

Cases past the check's compile budget still run every opinion that needs no compile (the
interpreter against the reference, or against itself), so nothing drawn is thrown away. A search runs the
check's planned cases (a budget of their own, `--tdiff-plan`) and draws at most `max_examples` more, judged or
not, and stops early when none can be judged; a derandomized one is seeded by the check's id alone.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import hypothesis
from hypothesis import Phase
from hypothesis import errors as herrors
from hypothesis.internal.reflection import function_digest

from ..core.case import Case
from ..core.settings import hypothesis_settings
from ..errors import DeclarationError, DivergenceError
from ..generate.plan import ADDRESSING_PAIRS, boundary_plan
from ..record.tally import Tally
from . import pareto_keys, plan_cache
from .case_judge import HangBudgetSpent, SetupError, error_text
from .pipeline import CasePipeline, CaseRecord, drawn_cases

#: a planned case's specialization (None: not known): those sharing one run one after another
Grouping = Callable[[Case], Hashable | None]


class _Diverged(Exception):
    pass


class _Hopeless(BaseException):
    """Every case so far was set aside: more draws will not be judged."""


class _Enough(BaseException):
    """The search drew its planned cases and `max_examples` more (judged or not)."""


#: stop a search after this many cases in a row that could not be judged, none judged before
GIVE_UP_AFTER = 10
#: stop it sooner, after this many, when each hit the same interpreter limitation (`tdiff.core.limitations`):
#: more cases would only build their inputs to be set aside again
SAME_LIMITATION_STOP = 3
LIMITATION = "interpreter limitation: "

def stable_seed(check_id: str) -> int:
    """The seed of a derandomized search: the same for a check on every machine and every version of tdiff."""
    return int.from_bytes(hashlib.sha256(check_id.encode()).digest()[:8], "big")


def _hopeless(tally: Tally, recent: list[str]) -> str | None:
    """Why the search should stop for good, none of its cases judged: the last cases all hit the same
    interpreter limitation, or too many in a row were not judged. None while it may go on."""
    if tally.judged > 0:
        return None
    last = recent[-SAME_LIMITATION_STOP:]
    if len(last) == SAME_LIMITATION_STOP and len(set(last)) == 1 and last[0].startswith(LIMITATION):
        return (f"stopped after {len(recent)} cases: each hit the same {last[0]}; no case could be judged, and "
                "more would only build their inputs to be set aside again")
    if len(recent) >= GIVE_UP_AFTER:
        reasons = ", ".join(f"{r} ({n}x)" for r, n in tally.discarded.most_common(3))
        return f"no case could be judged: {reasons}; stopped after {GIVE_UP_AFTER} cases"
    return None


#: the most planned cases a check gets unless `--tdiff-plan` says otherwise (and at most half its `max_examples`): a
#: plan stops sooner where fewer cover its triples and the pairs of its addressing points
PLAN_CAP = 64


def plan_budget(options: Any, max_examples: int) -> tuple[int, int]:
    """The most planned cases a check gets, and the least weight of the targets they cover (`boundary_plan`):
    `--tdiff-plan N`, every target; by default as many as cover the triples and the pairs of the points that decide
    addressing, at most half the check's `max_examples` (a check that declares a few costly examples keeps them
    few; the CPU main job grew by a fifth) and `PLAN_CAP`."""
    if options.plan is not None:
        return options.plan, 0
    return min(PLAN_CAP, max_examples // 2), ADDRESSING_PAIRS


def planned(check: Any, strategy: Any, settings: hypothesis.settings, options: Any, key: bytes,
            run: _Run, group: Grouping | None = None) -> tuple[hypothesis.settings, list[Case]]:
    """`settings` with the check's boundary plan (`tdiff.generate.plan`) in its example database, under the
    search's `key`, and `max_examples` grown by the planned cases (a budget of their own): hypothesis's reuse phase
    runs the planned cases first, as ordinary cases, then draws its `max_examples` at random; and those cases, in
    the order it runs them (with `group`, a case's specialization, those sharing one one after another: `Plan.grouped`).
    The plan's coverage and what went wrong building it go to `run`."""
    rows, least = plan_budget(options, settings.max_examples)
    if rows <= 0 or Phase.reuse not in settings.phases:
        return settings, []
    # a plan is a function of the check's declaration (`plan_cache`): seeded by `--tdiff-seed`, else by the check's
    # id, in every profile (the random search after it draws at random where the profile does)
    seed = options.seed if options.seed is not None else stable_seed(check.id)
    t0 = time.perf_counter()
    try:
        plan_key: str | None = plan_cache.key(check, (rows, least, seed, options.thresholds))
    except Exception:  # noqa: BLE001 - a declaration whose parts cannot be read back: built, not kept
        plan_key = None
    plan = plan_cache.load(options.run_dir, plan_key, strategy) if plan_key is not None else None
    cache = "built" if plan is None else "loaded"
    if plan is None:
        try:
            plan = boundary_plan(strategy, rows, seed, least=least)
        except DeclarationError:
            raise
        except Exception as exc:  # drawing failed: the search proper will say why
            run.notes.append(f"boundary plan: not built ({type(exc).__name__}: {exc}); random search only")
            return settings, []
        if plan_key is not None:
            plan_cache.store(options.run_dir, plan_key, plan)
    # (the plan's build or load time, and whether it was loaded from an earlier run: `plan_cache`)
    run.plan = {**plan.coverage.as_dict(), "seconds": round(time.perf_counter() - t0, 3), "cache": cache}
    run.plan_line = plan.coverage.line()
    if not plan.choices:
        return settings, []
    # (a derandomized run is seeded by the check's id instead: hypothesis allows no database with derandomize)
    # (a seeded run keeps no database of its own, as hypothesis.seed has it)
    base = settings.database if options.seed is None else None
    try:
        if group is not None:
            plan = plan.grouped(group)
        db = plan.database(key, base)
    except ImportError as exc:  # a hypothesis whose database stores no choice sequences
        run.notes.append(f"boundary plan: not run ({exc}); random search only")
        return settings, []
    return hypothesis.settings(settings, derandomize=False, database=db,
                               max_examples=settings.max_examples + len(plan.choices)), plan.replay_order()


@dataclass(frozen=True)
class SearchReport:
    """What a search found: the failing case (as hypothesis shrank it) or None, which searched case failed first
    (1: the first drawn), why it stopped early, the boundary plan's coverage (`Coverage.as_dict`) and its line,
    its notes in the order made, and its own error (a setup error, hangs, an exception: its message), if any.
    Its counts (cases, not judged, shrinking runs) are in the check's `Tally`."""

    found: CaseRecord | None = None
    first_failure: int | None = None
    stopped: str = ""
    plan: dict[str, Any] = field(default_factory=dict)
    plan_line: str = ""
    notes: tuple[str, ...] = ()
    error: str | None = None


@dataclass
class _Run:
    """What a search keeps between the cases hypothesis hands its test."""

    found: CaseRecord | None = None  # the failing case: later runs are hypothesis shrinking it
    limit: int = 0  # the cases the search draws: the planned ones and `max_examples` more
    not_judged: list[str] = field(default_factory=list)  # the reasons of the cases not judged, none judged yet
    first_failure: int | None = None
    stopped: str = ""
    plan: dict[str, Any] = field(default_factory=dict)
    plan_line: str = ""
    notes: list[str] = field(default_factory=list)

    def report(self, found: CaseRecord | None, error: str | None = None) -> SearchReport:
        return SearchReport(found, self.first_failure, self.stopped, self.plan, self.plan_line, tuple(self.notes),
                            error)


#: what the search calls with its planned cases to compile them ahead: it returns what to call at the search's end,
#: or why the compile workers did not start (a note)
Ahead = Callable[[list[Case]], "Callable[[], None] | str"]


def search(pipeline: CasePipeline, on_case: Callable[[str], None] | None = None, ahead: Ahead | None = None,
           group: Grouping | None = None) -> SearchReport:
    """Run the check's hypothesis search, each case through `pipeline`; what it found (`SearchReport`: the first
    failing case, as hypothesis shrank it, or None). Its own error (`error_text`) ends it with the notes made so
    far; tdiff's (a `DivergenceError`) and an interrupt propagate.

    The search draws the planned cases and at most `max_examples` more, judged or not (cases hypothesis runs while
    shrinking a failing one are counted apart, in `search_shrinks`), and stops early when no case can be judged.
    `on_case`, if given, is called after each case with what the search is doing (its phase). `ahead`, if given,
    gets the planned cases before the search runs them (to compile their specializations ahead of use) and returns
    what to call when the search is over; `group`, if given, the key of a case's specialization (planned cases
    sharing one run one after another)."""
    run = _Run()
    try:
        found = _search(pipeline, run, on_case, ahead, group)
    except DivergenceError:
        raise
    except (Exception, SetupError, HangBudgetSpent) as exc:
        return run.report(None, error_text(exc))
    return run.report(found)


def _search(pipeline: CasePipeline, run: _Run, on_case: Callable[[str], None] | None, ahead: Ahead | None,
            group: Grouping | None) -> CaseRecord | None:
    judge = pipeline.judge
    check, result, options = judge.check, judge.tally, judge.options
    pareto_keys.install()  # (with a database, hypothesis keeps a Pareto front of the cases: its keys once per case)
    settings = hypothesis_settings(options, check.max_examples)
    if check.expects_failure() and not options.shrink_expected:  # (an xfail's first divergence confirms it)
        settings = hypothesis.settings(settings, phases=[p for p in settings.phases if p is not Phase.shrink])
    result.max_examples = settings.max_examples

    def test(case: Case) -> None:
        shrinking = run.found is not None
        record = pipeline.drawn(case, shrinking=shrinking)
        if shrinking:
            result.search_shrinks += 1
        else:
            result.cases += 1
        if on_case is not None:
            on_case("shrinking (hypothesis)" if shrinking or record.failed else "searching")
        if record.failed:
            if run.first_failure is None:
                run.first_failure = result.cases
            run.found = record
            # (raised in one place: hypothesis tells failures apart by where they were raised)
            raise _Diverged(str(record.verdict))
        if not record.judged and not shrinking:
            reason = record.verdict.reasons[0] if record.verdict.reasons else "not judged"
            result.discarded[reason] += 1
            run.not_judged.append(reason)
            why = _hopeless(result, run.not_judged)
            if why:
                run.stopped = why
                raise _Hopeless()
        if not shrinking and result.cases >= run.limit:
            raise _Enough()
        if not record.judged:
            hypothesis.reject()

    if on_case is not None:
        on_case("planning the boundaries")
    wrapped, planned_cases = _hypothesis_test(check, options, settings, test, pipeline.admit, run, group)
    run.limit = result.max_examples = settings.max_examples + len(planned_cases)
    if on_case is not None:
        on_case("searching")
    stop = ahead(planned_cases) if ahead is not None and planned_cases else None
    if isinstance(stop, str):  # (the compile workers did not start: the GPU worker compiles everything itself)
        run.notes.append(stop)
        stop = None
    try:
        wrapped()
    except _Diverged:
        return run.found
    except _Enough:
        pass
    except _Hopeless:
        run.notes.append(run.stopped)
        return None
    except HangBudgetSpent:
        run.notes.append(f"hangs cost more than the per-case timeout ({judge.timeouts.base:g} s): the search "
                            "stopped early")
        if run.found is not None:
            return run.found
        raise
    except herrors.Unsatisfiable:
        reasons = ", ".join(f"{r} ({n}x)" for r, n in result.discarded.most_common(3))
        run.notes.append(f"no case could be judged: {reasons}")
    except (herrors.FlakyFailure, herrors.Flaky) as exc:
        if run.found is not None:
            run.notes.append(f"the divergence did not reproduce on every run ({type(exc).__name__})")
            return run.found
        raise
    finally:
        if stop is not None:
            stop()
    for reason, n in result.discarded.items():
        run.notes.append(f"{n} case(s) not judged: {reason}")
    return None


def _hypothesis_test(check: Any, options: Any, settings: hypothesis.settings, test: Callable[[Case], None],
                     admit: Callable[[Case], bool], run: _Run,
                     group: Grouping | None = None) -> tuple[Callable[[], None], list[Case]]:
    """`test` as the search's hypothesis test: drawing `drawn_cases`, under `settings` with the boundary plan in
    its example database, seeded by `--tdiff-seed` or, derandomized, by the check's id."""
    # (hypothesis's private hooks, here and below: attributes its stubs lack)
    test._hypothesis_internal_add_digest = check.id.encode()  # type: ignore[attr-defined]
    key = function_digest(test)
    derandomized = settings.derandomize  # (the plan's settings derandomize nothing: they have a database)
    settings, cases = planned(check, drawn_cases(check, options), settings, options, key, run, group)
    wrapped = settings(hypothesis.given(drawn_cases(check, options, admit))(test))
    wrapped._hypothesis_internal_database_key = key  # type: ignore[attr-defined]  # (as above)
    if options.seed is not None:
        wrapped = hypothesis.seed(options.seed)(wrapped)
    elif derandomized:
        # hypothesis would seed a derandomized run from a digest of `test`'s source: every edit of this
        # function would draw other cases in CI. The check's id alone decides them.
        wrapped = hypothesis.seed(stable_seed(check.id))(wrapped)
    if settings.database is not None:  # (hypothesis.seed drops the database: the plan's is put back)
        kept = wrapped._hypothesis_internal_use_settings  # type: ignore[attr-defined]  # (as above)
        wrapped._hypothesis_internal_use_settings = hypothesis.settings(  # type: ignore[attr-defined]  # (as above)
            kept, database=settings.database)
    return wrapped, cases
