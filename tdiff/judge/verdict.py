"""Verdicts: given all the evidence about one case, did it pass, and if not, which side is wrong
and why. `decide` only decides; when it needs more evidence (a rerun) it says which, and the runner
runs it and asks again.

Order of judgement:
1. errors: a backend that raised, crashed or hung fails the case (a known interpreter limitation
   with the other side clean only sets its pair aside); then a compile the compile-only opinion saw fail
   (no GPU: `compiled error (compile only)`, also where every pair was set aside);
2. what one outcome broke on its own (`tdiff.judge.integrity`): the kernel never launched, out of
   bounds, writes outside its view, undefined behaviour, a data race, results nobody compared;
3. structure: the launch and the reference return different things;
4. values, using every opinion: with the compiled backend, the interpreter and a reference, a
   difference both backends share is a kernel bug; a difference between the backends is blamed on
   the side the reference disagrees with. Without a reference, the interpreter in float64 on
   upcast inputs is the third opinion, and a side is wrong when its RMSE to it is more than twice
   (three times for half types) the other's. Before blaming a backend, a final verdict reruns the
   compiled backend (nondeterminism) and the interpreter in other program orders (races).

`undecided` (the backends differ, and each is within tolerance of the third opinion) passes with a
note: tolerances are not transitive, and neither side is shown wrong. Without any third opinion
(the float64 run failed) it fails.
"""
from __future__ import annotations

from . import caveats, fault_verdicts, findings, value_verdicts
from .classify import DISCARD, describe_discard
from .evidence import Evidence
from .findings import INTERMEDIATE_OVERFLOW, INTERMEDIATE_UNDERFLOW, NUMERICALLY_UNSTABLE
from .labels import (
    BOTH_FAILED,
    BOTH_WRONG,
    COMPILE_ONLY_ERROR,
    COMPILED_WRONG,
    INTEGRITY,
    INTERPRETER_WRONG,
    KERNEL_BUG,
    NEVER_LAUNCHED,
    NONDETERMINISTIC,
    NOT_JUDGED,
    OUT_OF_BOUNDS,
    OUTSIDE_VIEW,
    PASSED,
    RACE,
    READS_OUTSIDE_VIEW,
    STRUCTURE,
    UNDECIDED,
    UNDEFINED,
    UNDEFINED_LANES,
    UNOBSERVED_RESULT,
    UNSPECIFIED,
    VS_REFERENCE,
    Verdict,
    wrong,
)
from .value_verdicts import judge

# (the verdicts' labels, `Verdict` and `wrong` live in labels.py, the steps below in caveats, fault_verdicts and
# value_verdicts; importable from here, as the rest of tdiff and its tests name them)
__all__ = [
    "BOTH_FAILED", "BOTH_WRONG", "COMPILED_WRONG", "COMPILE_ONLY_ERROR", "INTEGRITY", "INTERMEDIATE_OVERFLOW",
    "INTERMEDIATE_UNDERFLOW", "INTERPRETER_WRONG", "KERNEL_BUG", "NEVER_LAUNCHED", "NONDETERMINISTIC", "NOT_JUDGED",
    "NUMERICALLY_UNSTABLE", "OUTSIDE_VIEW", "OUT_OF_BOUNDS", "PASSED", "RACE", "READS_OUTSIDE_VIEW", "STRUCTURE",
    "UNDECIDED", "UNDEFINED", "UNDEFINED_LANES", "UNOBSERVED_RESULT", "UNSPECIFIED", "VS_REFERENCE", "Verdict",
    "decide", "findings", "judge", "wrong",
]


def decide(ev: Evidence, final: bool = False) -> Verdict:
    """The verdict on one case from the evidence; `needs` lists reruns to add before asking again.
    With `final`, a value divergence is first checked for nondeterminism and program-order races."""
    notes = caveats.notes(ev) + caveats.compile_only_notes(ev)
    if ev.pairs and all(p.classification.action == DISCARD for p in ev.pairs):
        rejected = fault_verdicts.compile_rejected(ev)  # (a compile error is never "not judged")
        if rejected is not None:
            rejected.notes = notes
            return _with_sides(rejected, ev)
        return Verdict(NOT_JUDGED, [describe_discard(ev.pairs[0].classification)], notes)
    for step in (fault_verdicts.errors, fault_verdicts.compile_rejected,
                 lambda e: fault_verdicts.integrity_verdict(e, final), fault_verdicts.structure):
        v = step(ev)
        if v is not None:
            v.notes = notes
            if v.needs:
                v.extra = dict(ev.extra)
            return _with_sides(v, ev)
    v = value_verdicts.values(ev, final)
    if v is None:
        return Verdict(PASSED, notes=notes)
    v.notes = notes + v.notes
    v.extra = dict(ev.extra)
    return _with_sides(v, ev)


def _with_sides(v: Verdict, ev: Evidence) -> Verdict:
    named = (*(v.pair or ()), *(v.targets if v.kind == "error" else ()))
    v.sides = {s: ev.role(s) for s in named}
    return v
