"""`--tdiff-localize`: after a `compiled wrong` verdict, name the compiler pass where the case goes wrong.

The case is rerun on the GPU lane of the check with each IR snapshot (tdiff.execute.stages.localize); a
snapshot agrees when its outcome compares within tolerance with every other opinion the compiled lane was
judged against in the final verdict (the interpreter, the reference).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.case import Case
from ..core.outcome import Outcome
from ..core.rerun import FLOAT64_RUN
from ..execute.stages import StageUnsupported, localize
from ..judge.evidence import Evidence, gather
from ..judge.verdict import Verdict


def wrong_compiled_role(verdict: Verdict, outcomes: Mapping[str, Outcome]) -> str | None:
    """The label of the compiled lane a verdict says is wrong (compiled from source), or None. `outcomes`: the
    verdict's evidence, by label (each outcome's role and spec)."""
    if not verdict.failed or not verdict.label.endswith(" wrong") or verdict.pair is None:
        return None
    for label in verdict.pair:
        o = outcomes.get(label)
        spec = o.spec if o is not None else None
        if o is not None and spec is not None and o.role.kind == "compiled" and verdict.label.startswith("compiled") \
                and not (spec.stage or spec.ir or spec.python):
            return label
    return None


def which_pass(judge: Any, case: Case, verdict: Verdict, ev: Evidence) -> str | None:
    """One line for the report ("which pass: ..."), or None where the verdict is not `compiled wrong`."""
    role = wrong_compiled_role(verdict, ev.outcomes)
    if role is None:
        return None
    others = {k: o for k, o in ev.outcomes.items() if k != role and o.error is None}
    if not others:
        return "which pass: not localized (no other opinion ran without an error)"
    check = judge.check

    def run(spec: Any) -> Outcome:
        return judge.run(case, [spec])[0]

    plays = ev.outcomes[role].role  # (a run standing in for the wrong compiled lane plays its part)

    def agrees(outcome: Outcome) -> bool | None:
        outcome.relabel(plays)
        outs = {**others, role: outcome}
        e = gather(case, check.kernel_name, outs, judge.rules(), [(role, k) for k in others],
                   ev.extra.get(FLOAT64_RUN), ev.extra)  # (the problem's measured scale, where the verdict had it)
        if any(not p.classification.judged for p in e.pairs):
            return None
        return not any(p.disagrees for p in e.pairs)

    try:
        found = localize(check, case, run=run, agrees=agrees, spec=judge.roles[role])
    except StageUnsupported as exc:
        return f"which pass: not localized ({exc})"
    except Exception as exc:  # noqa: BLE001  the localizer failing never hides the divergence
        return f"which pass: not localized ({type(exc).__name__}: {exc})"
    line = f"which pass: {found.sentence()}"
    loc = found.found
    if loc is not None and loc.snapshot is not None:  # pinned IR files: `compiled[ir=<file>]` replays either
        line += f"; the IR after it: {loc.snapshot} (replay it with --tdiff-backends 'compiled[ir={loc.snapshot}]')"
        if loc.before is not None:
            line += f", the last that agrees: {loc.before}"
    return line
