"""tdiff checks as plain hypothesis tests, the form HypoFuzz (`hypothesis fuzz`) and other runners of
`@given` tests collect.

`hypothesis_test(check, get_runner)` returns a `@given` function drawing the cases the check's search draws
(`drawn_cases`), whose body is tdiff's whole case pipeline (`CasePipeline`: the compile budget, isolation,
timeouts, comparison, verdict), as the search's is: a divergence raises
`FuzzDivergence` with tdiff's report, after writing the case to the corpus (what CI replays). The
engine shrinks: each smaller failing case of the same divergence replaces the corpus entry the
previous one wrote, so the smallest remains; the reproducer is written for the final example
hypothesis reports (HypoFuzz reports none: `tdiff replay --repro-dir` writes them from the corpus).
Each case reports its closeness and kernel lines to `hypothesis.target`, which HypoFuzz reads; with a
campaign recorder, each case's counts, time and what it reached are recorded (`tdiff.record.campaign`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import hypothesis
from hypothesis.control import current_build_context

from ..core.case import Case
from ..core.settings import RunOptions
from .pipeline import CasePipeline, drawn_cases

if TYPE_CHECKING:
    from ..declaration import Check


class FuzzDivergence(AssertionError):
    """A case diverged; the message is tdiff's report."""


def hypothesis_test(check: Check, get_runner: Callable[[], Any],
                    get_recorder: Callable[[], Any] | None = None, options: Any = None,
                    settings: hypothesis.settings | None = None) -> Callable[[], None]:
    """A hypothesis test running `check`'s cases through the case pipeline of the runner `get_runner()`
    returns (asked once, when the first case is drawn, so that collecting the test starts nothing).
    `get_recorder()`, if given, returns the campaign recorder (`tdiff.record.campaign.Recorder`) each case is
    recorded to, or None. `options` (the run's `RunOptions`) decide what the cases are drawn with, as for the
    search (`drawn_cases`). It runs under `settings` (default: hypothesis's current profile), without a
    deadline."""
    state: dict[str, Any] = {}

    def pipeline() -> tuple[Any, CasePipeline]:
        if "pipeline" not in state:
            runner = get_runner()
            state["runner"], state["pipeline"] = runner, runner.pipeline(check)
        return state["runner"], state["pipeline"]

    def test(case: Case) -> None:
        runner, p = pipeline()
        record = p.drawn(case)
        recorder = get_recorder() if get_recorder is not None else None
        if recorder is not None:
            recorder.case(check.id, case, record.seconds, record.judged, record.failed, record.launch_keys,
                          lambda c: runner.predict_keys(check, c))
        if not record.judged:
            hypothesis.reject()
        if record.failed:
            final = _is_final()
            div = runner.finish(check, p.judge, record, source="fuzz", write_repro=final)
            raise FuzzDivergence(div.report)

    test.__name__ = test.__qualname__ = f"fuzz_{check.kernel_name}_{check.name}"
    strategy = drawn_cases(check, options if options is not None else RunOptions(),
                           lambda skeleton: pipeline()[1].admit(skeleton))
    # (no deadline, as in tdiff's profiles: a case's first compile, here or in a worker, takes up to a second)
    given = hypothesis.settings(settings or hypothesis.settings(), deadline=None)(hypothesis.given(strategy)(test))
    # (hypothesis's own hook for a test's database key: an attribute it reads and does not declare)
    given.hypothesis.inner_test._hypothesis_internal_add_digest = check.id.encode()  # type: ignore[attr-defined]
    return given


def hypofuzz_compat() -> list[str]:
    """HypoFuzz 25.11 reads and sets `slice_comments` on hypothesis's ConjectureData and ConjectureResult,
    which hypothesis 6.158 renamed `span_comments`: without the old name, a fuzz process dies
    (AttributeError) right after shrinking its first failure. Where only the new name exists, the old
    one is added as an alias of it. Returns what was added (the run's header names it)."""
    from hypothesis.internal.conjecture import data as conjecture

    probe = conjecture.ConjectureData.for_choices([])
    if hasattr(probe, "slice_comments") or not hasattr(probe, "span_comments"):
        return []  # an older hypothesis (the old name), or one this alias does not fit
    alias = property(lambda self: self.span_comments, lambda self, value: setattr(self, "span_comments", value))
    for cls in (conjecture.ConjectureData, conjecture.ConjectureResult):
        cls.slice_comments = alias  # type: ignore[union-attr]  # (the old name: an alias hypothesis's classes lack)
    return ["ConjectureData.slice_comments", "ConjectureResult.slice_comments"]


def _is_final() -> bool:
    try:
        return bool(current_build_context().is_final)
    except Exception:  # outside a build context (a direct call): treat it as the one to report
        return True
