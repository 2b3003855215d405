"""The verdicts' labels and the `Verdict` value `tdiff.judge.verdict.decide` returns: what a case's judgement says
(passed, a side wrong, a kernel bug, ...), on which pair and targets, and the reruns it still needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.backend_spec import Role
from ..core.outcome import Outcome
from ..core.rerun import Rerun
from . import findings
from .integrity import GAP, GAP_READ, GUARD, OOB, UB, UNLAUNCHED, UNOBSERVED, UNWRITTEN
from .integrity import RACE as RACE_FINDING

if TYPE_CHECKING:
    from .evidence import Evidence

PASSED = "passed"
NOT_JUDGED = "not judged"
COMPILED_WRONG = "compiled wrong"
INTERPRETER_WRONG = "interpreter wrong"
BOTH_WRONG = "both wrong"
KERNEL_BUG = "kernel bug"
UNDECIDED = "undecided"
NONDETERMINISTIC = "nondeterministic"
RACE = "race between programs"
UNDEFINED_LANES = "reads undefined masked lanes"
UNSPECIFIED = "depends on unspecified results"
OUT_OF_BOUNDS = "out of bounds"
OUTSIDE_VIEW = "writes outside its view"
READS_OUTSIDE_VIEW = "reads outside its view"
UNDEFINED = "undefined behaviour"
UNOBSERVED_RESULT = "unobserved result"
NEVER_LAUNCHED = "kernel never launched"
STRUCTURE = "structure mismatch"
BOTH_FAILED = "both failed"
VS_REFERENCE = "disagrees with reference"
#: Triton's compiler rejects the kernel for a GPU (compiled without one) where the interpreter ran it
COMPILE_ONLY_ERROR = "compiled error (compile only)"

#: integrity finding kinds, in the order they are judged, and their verdicts
INTEGRITY = ((UNLAUNCHED, NEVER_LAUNCHED), (OOB, OUT_OF_BOUNDS), (GUARD, OUT_OF_BOUNDS), (GAP, OUTSIDE_VIEW),
             (GAP_READ, READS_OUTSIDE_VIEW), (UB, UNDEFINED), (RACE_FINDING, RACE), (UNWRITTEN, UNOBSERVED_RESULT),
             (UNOBSERVED, UNOBSERVED_RESULT))


@dataclass
class Verdict:
    label: str
    reasons: list[str] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (kind, text): what passed with a caveat
    needs: tuple[Rerun, ...] = ()  # reruns to gather before deciding again
    pair: tuple[str, str] | None = None  # the two sides the verdict is about
    kind: str = ""  # what diverged: "error", an integrity kind, "structure", "values"
    targets: tuple[str, ...] = ()  # the targets involved
    extra: dict[Rerun, Outcome] = field(default_factory=dict)  # the reruns gathered when it was decided
    # what each side it names plays (its pair's, an error verdict's failing sides): kept with the verdict, which
    # may be read where those outcomes are not (a verdict recorded on a GPU, reduced or rendered on a CPU)
    sides: dict[str, Role] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.label not in (PASSED, NOT_JUDGED)

    @property
    def finding(self) -> bool:
        """A finding (the kernel loses accuracy the problem does not: judge.findings), not a bug."""
        return self.label in findings.LABELS

    @property
    def signature(self) -> tuple[str, tuple[str, ...]]:
        """What kind of divergence, on which targets: the same for the same bug (shrinking,
        reproducer verification)."""
        return self.kind, self.targets

    def __str__(self) -> str:
        return self.label if not self.reasons else f"{self.label}: {self.reasons[0]}"

    def role(self, side: str, ev: Evidence) -> Role:
        """What `side` plays: as the verdict recorded it, else its outcome's in `ev`."""
        return self.sides[side] if side in self.sides else ev.role(side)


def wrong(role: Role) -> str:
    """The verdict that blames the side playing `role`."""
    if role.elsewhere or (role.kind == "compiled" and role.variant):  # say which
        return f"{role.lane} wrong"
    if role.kind == "compiled":
        return COMPILED_WRONG
    if role.kind == "interpreter":
        return INTERPRETER_WRONG
    return f"{role.label} wrong"
