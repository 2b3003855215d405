"""The verdicts that fail a case before its values are compared: a backend's error, a compile the compile-only
opinion saw rejected, what one outcome broke on its own (integrity: out of bounds, a race, ...; undefined masked
lanes or unspecified results behind it), and a structure mismatch."""

from __future__ import annotations

from ..core.backend_spec import COMPILE_ONLY
from ..core.rerun import ZERO_FILL, Rerun
from . import integrity
from .classify import FAIL
from .evidence import Evidence
from .integrity import GAP, GAP_READ, GUARD, OOB, UB
from .integrity import RACE as RACE_FINDING
from .labels import (
    BOTH_FAILED,
    COMPILE_ONLY_ERROR,
    INTEGRITY,
    STRUCTURE,
    UNDECIDED,
    UNDEFINED_LANES,
    UNSPECIFIED,
    Verdict,
)


def errors(ev: Evidence) -> Verdict | None:
    failing = [p for p in ev.pairs if p.classification.action == FAIL]
    if not failing:
        return None
    sides = list(dict.fromkeys(s for p in failing for s in p.classification.sides))
    reasons = [f"{s}: {e.summary()}" for s in sides if (e := ev.outcomes[s].error) is not None]  # (each failed)
    label = BOTH_FAILED if len(sides) > 1 else f"{ev.role(sides[0]).kind} error"
    other = next((r for r in ev.outcomes if r not in sides), None)
    pair = (sides[0], sides[1] if len(sides) > 1 else other or sides[0])
    return Verdict(label, reasons, pair=pair, kind="error", targets=tuple(sides))


def compile_rejected(ev: Evidence) -> Verdict | None:
    """The compile-only opinion's compile error (it holds no results: it is in no pair): the compiler rejects a
    specialization the case launches, which the interpreter ran (one that raised is an error verdict first)."""
    for side, o in ev.outcomes.items():
        if o.role.kind != COMPILE_ONLY or o.error is None:
            continue
        ran = next((r for r, x in ev.outcomes.items() if x.role.kind == "interpreter"), None)
        how = ("the interpreter ran the case" if ran is not None and ev.outcomes[ran].error is None else
               "the interpreter could not run the case (a limitation)" if ran is not None else
               "no other opinion failed")
        return Verdict(COMPILE_ONLY_ERROR, [
            f"{side}: {o.error.summary()}",
            f"Triton's compiler rejects a specialization this case launches (compiled for a GPU without one, not "
            f"run), where {how}: on a GPU the launch fails; the interpreter does not check what the compiler does "
            "(a Python `if` on a block tensor, a runtime value where a tl.constexpr is needed)"],
            pair=(side, ran or side), kind="error", targets=(side,))
    return None


def undefined_loads(ev: Evidence, side: str) -> dict[str, int]:
    """The masked loads without other= whose masked-out lanes `side`'s run poisoned (see
    tdiff.execute.interpreter.undefined): "file:line: code" -> lanes."""
    o = ev.outcomes.get(side)
    if o is None or o.role.kind != "interpreter" or o.trace is None or not o.trace.poisoned:
        return {}
    return o.trace.undefined


def unspecified(ev: Evidence, side: str) -> dict[str, int]:
    """The operations whose results Triton leaves unspecified that `side`'s interpreter run computed."""
    o = ev.outcomes.get(side)
    if o is None or o.role.kind != "interpreter" or o.trace is None:
        return {}
    return o.trace.unspecified


def unspecified_verdict(ev: Evidence, side: str, what: str, pair: tuple[str, str], targets: tuple[str, ...],
                         detail: list[str]) -> Verdict:
    found = sorted(unspecified(ev, side).items(), key=lambda kv: -kv[1])
    where = "; ".join(f"{k} ({n} lane(s))" for k, n in found[:3]) + ("; ..." if len(found) > 3 else "")
    return Verdict(UNSPECIFIED, [
        f"{what} and {side}'s own result changes when the results Triton leaves unspecified take another value: "
        "the kernel's output depends on them (another backend or GPU may give anything there); keep those "
        "operands out of the unspecified domain, or declare the check unspecified='note' if testing the "
        "operation itself", f"unspecified: {where}", *detail], pair=pair, kind="values", targets=targets)


def lanes_verdict(ev: Evidence, side: str, what: str, kind: str, targets: tuple[str, ...],
                   pair: tuple[str, str], detail: list[str], zero_filled_agrees: bool = True) -> Verdict:
    loads = sorted(undefined_loads(ev, side).items(), key=lambda kv: -kv[1])
    where = "; ".join(f"{line} ({n} lane(s))" for line, n in loads[:3]) + ("; ..." if len(loads) > 3 else "")
    if zero_filled_agrees:
        how = (f"{what} only while the masked-out lanes of `tl.load` without `other=` hold a poison value (with "
               "them zero-filled it does not)")
    else:
        how = (f"{what} and the result changes with what the masked-out lanes of `tl.load` without `other=` hold "
               "(poison or zeros; zero-filled it is wrong too)")
    return Verdict(UNDEFINED_LANES, [
        f"{how}: the kernel's result depends on lanes Triton leaves undefined (the NVIDIA backend happens to "
        "fill them with 0, other backends do not); pass other= to these loads, or keep their lanes out of the "
        "result", f"loads: {where}", *detail], pair=pair, kind=kind, targets=targets)


#: integrity findings a poisoned (undefined) value can cause: through an address or a cast
_POISONABLE = (OOB, GUARD, GAP, GAP_READ, UB, RACE_FINDING)


def integrity_verdict(ev: Evidence, final: bool = False) -> Verdict | None:
    for kind, label in INTEGRITY:
        found = [(side, f) for side, r in ev.reports.items() for f in r.findings if f.kind == kind]
        if found:
            side = found[0][0]
            mine = [f for s, f in found if s == side]
            others = sorted({s for s, _ in found if s != side})
            other = next((r for r in ev.outcomes if r != side), side)
            reasons = [f.message for f in mine] + ([f"(also seen in {', '.join(others)})"] if others else [])
            targets = tuple(sorted({f.target for f in mine if f.target}))
            if final and kind in _POISONABLE and undefined_loads(ev, side):
                key = Rerun(ZERO_FILL, side)
                if key not in ev.extra:
                    return Verdict(UNDECIDED, needs=(key,))
                rerun = ev.extra[key]
                again = integrity.check(rerun, ev.case, ev.kernel, runs_kernel=True)
                if rerun.error is None and not any(f.kind == kind for f in again.findings):
                    return lanes_verdict(ev, side, f"{side}: {label},", kind, targets, (side, other), reasons)
            return Verdict(label, reasons, pair=(side, other), kind=kind, targets=targets)
    return None


def structure(ev: Evidence) -> Verdict | None:
    for p in ev.pairs:
        if p.comparison is None:
            continue
        found = [m for m in p.comparison.mismatches if m.kind == "structure"]
        if found:
            return Verdict(STRUCTURE, [m.message for m in found], pair=(p.a, p.b), kind="structure",
                           targets=tuple(sorted({m.target for m in found})))
    return None
