"""The one place that decides what a pair of outcomes allows: judge them, set them aside with a
typed reason, or fail.

Only a known interpreter limitation on the interpreter's side, or a lane problem of a compiled stage
lane (`tdiff.core.limitations`), with the other side clean, sets a pair aside. Every other error
fails: the compiled backend's, the reference's, a crash, a timeout, an unknown interpreter exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import limitations
from ..core.outcome import Outcome

JUDGE, DISCARD, FAIL = "judge", "discard", "fail"


@dataclass(frozen=True)
class Classification:
    action: str  # JUDGE, DISCARD or FAIL
    reason: str = ""  # for DISCARD: the limitation's name; for FAIL: what failed
    sides: tuple[str, ...] = ()  # the backends that failed or hit the limitation
    explained: str = ""  # for DISCARD: what the limitation was here, where it can tell (`ErrorInfo.explained`)

    @property
    def judged(self) -> bool:
        return self.action == JUDGE


def is_limitation(o: Outcome) -> bool:
    return o.error is not None and o.error.kind == "limitation" and o.role.kind == "interpreter" \
        and bool(o.error.limitation)


def is_lane_problem(o: Outcome) -> bool:
    """A compiled stage lane that could not give its opinion on this Triton (`compiled[from=ttgir]`)."""
    return o.error is not None and o.error.kind == "lane" and o.role.kind == "compiled" \
        and o.error.limitation in limitations.LANE_PROBLEMS


def set_aside(o: Outcome) -> bool:
    return is_limitation(o) or is_lane_problem(o)


def outcome_failure(o: Outcome) -> str:
    """How an outcome failed, for reports: "compiled error: timeout: ..." and the like."""
    assert o.error is not None
    return f"{o.backend}: {o.error.summary()}"


def classify(a: Outcome, b: Outcome) -> Classification:
    """Judge, set aside, or fail a pair of outcomes of one case."""
    errors = [o for o in (a, b) if o.error is not None]
    if not errors:
        return Classification(JUDGE)
    hard = [o for o in errors if not set_aside(o)]
    if hard:
        return Classification(FAIL, "; ".join(outcome_failure(o) for o in hard), tuple(o.backend for o in hard))
    infos = [o.error for o in errors if o.error is not None]  # (all of them: `errors` holds the failed)
    names = sorted({e.limitation for e in infos})
    explained = sorted({e.explained for e in infos if e.explained})
    return Classification(DISCARD, ", ".join(names), tuple(o.backend for o in errors), "; ".join(explained))


def describe_discard(c: Classification) -> str:
    text = "; ".join(limitations.describe(n) for n in c.reason.split(", "))
    return f"{text}: {c.explained}" if c.explained else text
