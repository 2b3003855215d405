"""The search: hypothesis draws cases for a check, each is judged, the first failing case stops it.

Cases past the check's compile budget still run every opinion that needs no compile (the
interpreter against the reference, or against itself), so nothing drawn is thrown away.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import hypothesis
from hypothesis import errors as herrors

from ..core.case import Case
from ..core.kernels import jit_function
from ..core.settings import hypothesis_settings
from ..execute.compile_budget import CompileBudget, layout_of
from ..generate import case_strategy
from ..generate.thresholds import thresholds
from ..judge.evidence import Evidence
from ..judge.verdict import NOT_JUDGED, Verdict
from .case_judge import CaseJudge, HangBudgetSpent


class _Diverged(Exception):
    pass


class _Hopeless(BaseException):
    """Every case so far was set aside for the same known reason: more draws will not be judged."""


#: stop a search after this many cases in a row that could not be judged, none judged before
GIVE_UP_AFTER = 10


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


def search(judge: CaseJudge, budget: CompileBudget, predict: Callable[[Case], Any],
           ahead: Callable[[list[Case]], None] | None = None) -> Found | None:
    """Run the check's hypothesis search; the first failing case (as hypothesis shrank it), or None.

    `ahead`, if given, first sees the cases the search is about to draw: the search runs once with
    a test that only collects them (hypothesis draws the same cases again: the same test function,
    settings and seed), so their specializations can be compiled before they are needed."""
    check, result, options = judge.check, judge.result, judge.options
    last: dict[str, Found] = {}
    pending: dict[str, Any] = {}
    compile_free = judge.opinions.without_compiled()

    def admit(skeleton: Case) -> bool:
        # past the budget, cases needing new specializations run without the compiled backend;
        # decided before the values are drawn, once per layout (shrinking included)
        if "preview" in pending:
            return True
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
        if drawn is not None and drawn[0] == layout_of(case):
            compiled, keys = drawn[1], drawn[2]
        opinions = judge.opinions if compiled or compile_free is None else compile_free
        before, before_s = result.compiles, result.compile_seconds
        verdict, ev = judge.verdict(case, opinions=opinions)
        if compiled and budget.active:
            reported = [k for o in ev.outcomes.values() if o.launch_keys is not None for k in o.launch_keys]
            if not reported and any(k == "compiled" for k in opinions.kinds):
                reported = list(keys if keys is not None else (predict(case) or ()))
            budget.ran(reported, result.compiles - before, result.compile_seconds - before_s)
        elif not compiled:
            result.caveat("budget", "past the compile budget: compared without the compiled backend")
        result.cases += 1
        judge.account(verdict, ev)
        guide(ev)
        if verdict.label == NOT_JUDGED:
            result.discarded[verdict.reasons[0] if verdict.reasons else "not judged"] += 1
            if result.judged == 0 and sum(result.discarded.values()) >= GIVE_UP_AFTER:
                raise _Hopeless()
            hypothesis.reject()
        if verdict.failed:
            if result.first_failure is None:
                result.first_failure = result.cases
            last["found"] = Found(case, verdict, ev)
            raise _Diverged(str(verdict))

    settings = hypothesis_settings(options, check.max_examples)
    found = thresholds(jit_function(check.kernel), check.launch) if options.thresholds else ()
    wrapped = settings(hypothesis.given(case_strategy(check, admit if budget.active else None, found))(test))
    inner = wrapped.hypothesis.inner_test  # type: ignore[attr-defined]
    inner._hypothesis_internal_add_digest = check.id.encode()
    if options.seed is not None:
        wrapped = hypothesis.seed(options.seed)(wrapped)
    if ahead is not None:
        pending["preview"] = []
        try:
            wrapped()
        except Exception as exc:  # drawing failed: the search proper will say why
            result.notes.append(f"compiling ahead: drawing the cases failed ({type(exc).__name__}: {exc})")
        ahead(pending.pop("preview"))
    try:
        wrapped()
    except _Diverged:
        return last["found"]
    except _Hopeless:
        reasons = ", ".join(f"{r} ({n}x)" for r, n in result.discarded.most_common(3))
        result.notes.append(f"no case could be judged: {reasons}; stopped after {GIVE_UP_AFTER} cases")
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
