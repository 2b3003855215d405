"""The search: hypothesis draws cases for a check, each is judged, the first failing case stops it.

Cases past the check's compile budget still run every opinion that needs no compile (the
interpreter against the reference, or against itself), so nothing drawn is thrown away. A search draws
at most `max_examples` cases, judged or not, and stops early when none can be judged; a derandomized one
is seeded by the check's id alone.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import hypothesis
from hypothesis import Phase
from hypothesis import errors as herrors
from hypothesis.internal.reflection import function_digest

from ..core.case import Case
from ..core.kernels import jit_function
from ..core.settings import hypothesis_settings
from ..errors import DeclarationError
from ..execute.compile_budget import CompileBudget, layout_of
from ..generate import case_strategy
from ..generate.plan import boundary_plan, seeded_database
from ..generate.thresholds import thresholds
from ..judge.evidence import Evidence
from ..judge.verdict import NOT_JUDGED, Verdict
from .case_judge import CaseJudge, HangBudgetSpent


class _Diverged(Exception):
    pass


class _Hopeless(BaseException):
    """Every case so far was set aside: more draws will not be judged."""


class _Enough(BaseException):
    """The search drew its `max_examples` cases (judged or not)."""


#: stop a search after this many cases in a row that could not be judged, none judged before
GIVE_UP_AFTER = 10
#: stop it sooner, after this many, when each hit the same interpreter limitation (`tdiff.core.limitations`):
#: more cases would only build their inputs to be set aside again
SAME_LIMITATION_STOP = 3
LIMITATION = "interpreter limitation: "


@dataclass
class Found:
    case: Case
    verdict: Verdict
    evidence: Evidence


#: the labels of what each case reports to `hypothesis.target` (search and shrinking climb them)
CLOSENESS = "tdiff: largest difference / tolerance"
LINES_RUN = "tdiff: kernel lines run"


def guide(ev: Evidence) -> None:
    """Tell hypothesis how near this case came to a divergence (the largest difference over
    tolerance among compared float elements) and how much kernel code it ran, so that its
    targeted phase, and HypoFuzz, move toward cases that diverge and code no case reached."""
    near = max((p.comparison.closeness for p in ev.pairs if p.comparison is not None), default=0.0)
    hypothesis.target(min(near, 1e6), label=CLOSENESS)
    lines = max((sum(len(v) for v in o.trace.lines.values()) for o in ev.outcomes.values() if o.trace is not None),
                default=0)
    hypothesis.target(float(lines), label=LINES_RUN)


def stable_seed(check_id: str) -> int:
    """The seed of a derandomized search: the same for a check on every machine and every version of tdiff."""
    return int.from_bytes(hashlib.sha256(check_id.encode()).digest()[:8], "big")


def _hopeless(result: Any, recent: list[str]) -> str | None:
    """Why the search should stop for good, none of its cases judged: the last cases all hit the same
    interpreter limitation, or too many in a row were not judged. None while it may go on."""
    if result.judged > 0:
        return None
    last = recent[-SAME_LIMITATION_STOP:]
    if len(last) == SAME_LIMITATION_STOP and len(set(last)) == 1 and last[0].startswith(LIMITATION):
        return (f"stopped after {len(recent)} cases: each hit the same {last[0]}; no case could be judged, and "
                "more would only build their inputs to be set aside again")
    if len(recent) >= GIVE_UP_AFTER:
        reasons = ", ".join(f"{r} ({n}x)" for r, n in result.discarded.most_common(3))
        return f"no case could be judged: {reasons}; stopped after {GIVE_UP_AFTER} cases"
    return None


def kernel_thresholds(check: Any, options: Any) -> tuple:
    """The sizes and dtypes the kernel branches on, which the size strategies also draw, unless
    `--tdiff-thresholds off` (the search and fuzz targets alike)."""
    return tuple(thresholds(jit_function(check.kernel), check.launch)) if options.thresholds else ()


def planned(check: Any, strategy: Any, settings: hypothesis.settings, options: Any, key: bytes,
            result: Any) -> tuple[hypothesis.settings, Callable[[], None] | None]:
    """`settings` with the check's boundary plan (`tdiff.generate.plan`) in its example database, under the
    search's `key`: hypothesis's reuse phase runs the planned cases first, as ordinary cases; and what puts the
    plan's entries back as they were before a run (None without a plan). The plan's coverage goes to `result`."""
    rows = options.plan if options.plan is not None else 3 * settings.max_examples // 4
    if rows <= 0 or Phase.reuse not in settings.phases:
        return settings, None
    # the same seed as the search's: a derandomized plan is the check id's, a seeded one the seed's
    seed = options.seed if options.seed is not None else stable_seed(check.id) if settings.derandomize \
        else random.getrandbits(64)
    try:
        plan = boundary_plan(strategy, min(rows, settings.max_examples), seed)
    except DeclarationError:
        raise
    except Exception as exc:  # drawing failed: the search proper will say why
        result.notes.append(f"boundary plan: not built ({type(exc).__name__}: {exc}); random search only")
        return settings, None
    result.plan = plan.coverage.as_dict()
    result.plan_line = plan.coverage.line()
    if not plan.choices:
        return settings, None
    # (a derandomized run is seeded by the check's id instead: hypothesis allows no database with derandomize)
    # (a seeded run keeps no database of its own, as hypothesis.seed has it)
    base = settings.database if options.seed is None else None
    try:
        db, planned_part = seeded_database(plan.choices, key, base)
    except ImportError as exc:  # a hypothesis whose database stores no choice sequences
        result.notes.append(f"boundary plan: not run ({exc}); random search only")
        return settings, None
    return hypothesis.settings(settings, derandomize=False, database=db), planned_part.restart


def search(judge: CaseJudge, budget: CompileBudget, predict: Callable[[Case], Any],
           ahead: Callable[[list[Case]], None] | None = None,
           on_case: Callable[[str], None] | None = None) -> Found | None:
    """Run the check's hypothesis search; the first failing case (as hypothesis shrank it), or None.

    The search draws at most `max_examples` cases, judged or not (cases hypothesis runs while shrinking a
    failing one are counted apart, in `search_shrinks`), and stops early when no case can be judged.
    `on_case`, if given, is called after each case with what the search is doing (its phase).

    `ahead`, if given, first sees the cases the search is about to draw: the search runs once with
    a test that only collects them (hypothesis draws the same cases again: the same test function,
    settings and seed), so their specializations can be compiled before they are needed."""
    check, result, options = judge.check, judge.result, judge.options
    last: dict[str, Found] = {}
    pending: dict[str, Any] = {}
    compile_free = judge.opinions.without_compiled()
    settings = hypothesis_settings(options, check.max_examples)
    result.max_examples = settings.max_examples
    not_judged: list[str] = []  # the reasons of the cases not judged, none judged yet

    def unskip(drawn: tuple | None) -> None:
        # the budget counts each layout it turned away; only the search's cases run without the compiled
        # backend count (the caveat), not draws hypothesis discarded, shrinking runs, or cases of another layout
        if drawn is not None and not drawn[1]:
            budget.skipped -= 1

    def admit(skeleton: Case) -> bool:
        # past the budget, cases needing new specializations run without the compiled backend;
        # decided before the values are drawn, once per layout (shrinking included)
        if "preview" in pending:
            return True
        unskip(pending.get("drawn"))  # (hypothesis discarded that draw: its skeleton never ran)
        layout = layout_of(skeleton)
        ok, keys = budget.decide(layout, lambda: predict(skeleton))
        pending["drawn"] = (layout, ok, keys)
        return ok or compile_free is not None

    def test(case: Case) -> None:
        if "preview" in pending:
            pending["preview"].append(case)
            return
        drawn = pending.pop("drawn", None)
        compiled = True
        keys = None
        shrinking = "found" in last  # hypothesis shrinks the failing case: runs apart from the search's cases
        if drawn is not None and drawn[0] == layout_of(case):
            compiled, keys = drawn[1], drawn[2]
        if drawn is not None and (shrinking or drawn[0] != layout_of(case)):
            unskip(drawn)
        opinions = judge.opinions if compiled or compile_free is None else compile_free
        before, before_s = result.compiles, result.compile_seconds
        verdict, ev = judge.verdict(case, opinions=opinions)
        budget.saw(r for o in ev.outcomes.values() for r in o.launches)
        if compiled and budget.active:
            reported = [k for o in ev.outcomes.values() if o.launch_keys is not None for k in o.launch_keys]
            if not reported and any(k == "compiled" for k in opinions.kinds):
                reported = list(keys if keys is not None else (predict(case) or ()))
            budget.ran(reported, result.compiles - before, result.compile_seconds - before_s)
        elif not compiled and not shrinking:
            result.caveat("budget", "past the compile budget: compared without the compiled backend")
        if shrinking:
            result.search_shrinks += 1
        else:
            result.cases += 1
            judge.account(verdict, ev)
        if on_case is not None:
            on_case("shrinking (hypothesis)" if shrinking or verdict.failed else "searching")
        guide(ev)
        if verdict.failed:
            if result.first_failure is None:
                result.first_failure = result.cases
            last["found"] = Found(case, verdict, ev)
            raise _Diverged(str(verdict))  # (one place: hypothesis tells failures apart by where they were raised)
        if verdict.label == NOT_JUDGED and not shrinking:
            reason = verdict.reasons[0] if verdict.reasons else "not judged"
            result.discarded[reason] += 1
            not_judged.append(reason)
            why = _hopeless(result, not_judged)
            if why:
                result.stopped = why
                raise _Hopeless()
        if not shrinking and result.cases >= settings.max_examples:
            raise _Enough()
        if verdict.label == NOT_JUDGED:
            hypothesis.reject()

    found = kernel_thresholds(check, options)
    derandomized = settings.derandomize
    test._hypothesis_internal_add_digest = check.id.encode()  # type: ignore[attr-defined]
    key = function_digest(test)
    settings, restart_plan = planned(check, case_strategy(check, None, found), settings, options, key, result)
    wrapped = settings(hypothesis.given(case_strategy(check, admit if budget.active else None, found))(test))
    wrapped._hypothesis_internal_database_key = key  # type: ignore[attr-defined]
    if options.seed is not None:
        wrapped = hypothesis.seed(options.seed)(wrapped)
    elif derandomized:
        # hypothesis would seed a derandomized run from a digest of `test`'s source: every edit of this
        # function would draw other cases in CI. The check's id alone decides them.
        wrapped = hypothesis.seed(stable_seed(check.id))(wrapped)
    if settings.database is not None:  # (hypothesis.seed drops the database: the plan's is put back)
        wrapped._hypothesis_internal_use_settings = hypothesis.settings(  # type: ignore[attr-defined]
            wrapped._hypothesis_internal_use_settings, database=settings.database)  # type: ignore[attr-defined]
    if ahead is not None:
        pending["preview"] = []
        try:
            wrapped()
        except Exception as exc:  # drawing failed: the search proper will say why
            result.notes.append(f"compiling ahead: drawing the cases failed ({type(exc).__name__}: {exc})")
        ahead(pending.pop("preview")[:settings.max_examples])
        if restart_plan is not None:
            restart_plan()  # (the search proper starts from the plan alone, as the preview did)
    if on_case is not None:
        on_case("searching")
    try:
        try:
            wrapped()
        finally:
            unskip(pending.pop("drawn", None))
    except _Diverged:
        return last["found"]
    except _Enough:
        pass
    except _Hopeless:
        result.notes.append(result.stopped)
        return None
    except HangBudgetSpent:
        result.notes.append(f"hangs cost more than the per-case timeout ({judge.timeouts.base:g} s): the search "
                            "stopped early")
        if "found" in last:
            return last["found"]
        raise
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
