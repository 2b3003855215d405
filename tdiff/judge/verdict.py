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

from dataclasses import dataclass, field

import numpy as np

from ..core.backend_spec import COMPILE_ONLY, Role
from ..core.outcome import Outcome
from ..core.rerun import AGAIN, ALT_UNSPECIFIED, FLOAT64_RUN, REFERENCE_RUN, REVERSED, SHUFFLED, ZERO_FILL, Rerun
from ..core.tolerance import Tolerance
from . import carried, edges, findings, integrity, modelled, sensitivity
from .classify import DISCARD, FAIL, describe_discard
from .closeness import value_mismatch
from .compare import coarse_scale
from .comparison import Comparison, Forgiven
from .evidence import Evidence, Pair
from .findings import INTERMEDIATE_OVERFLOW, INTERMEDIATE_UNDERFLOW, NUMERICALLY_UNSTABLE
from .integrity import GAP, GAP_READ, GUARD, OOB, UB, UNLAUNCHED, UNOBSERVED, UNWRITTEN
from .integrity import RACE as RACE_FINDING
from .rules import Rules
from .targets import view

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
    extra: dict[str, Outcome] = field(default_factory=dict)
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


def _wrong(ev: Evidence, side: str) -> str:
    return wrong(ev.role(side))


def _kind(ev: Evidence, side: str) -> str:
    """What the side labelled `side` plays in the case: compiled, interpreter, reference, ... (`Role.kind`)."""
    return ev.role(side).kind


def _notes(ev: Evidence) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for p in ev.pairs:
        if p.classification.action == DISCARD:
            out.append((f"discard:{p.a} vs {p.b}", f"{p.a} vs {p.b} not compared: "
                                                   f"{describe_discard(p.classification)}"))
        if p.comparison is None:
            continue
        for f in p.comparison.forgiven:
            out.append(_forgiven_note(p, f))
        if p.comparison.coarse:
            tf32 = ", tf32 rounding allowed (a tl.dot at default precision in the kernel's source)" \
                if p.comparison.tf32_from_source else ""
            out.append(("coarse", f"{p.a} vs {p.b}: `{', '.join(sorted(set(p.comparison.coarse)))}` judged with a "
                                  f"coarse tolerance scale (no interpreter dataflow for those elements){tf32}"))
    for r in ev.reports.values():
        out += r.notes
    return out


def _forgiven_note(p: Pair, f: Forgiven) -> tuple[str, str]:
    """The caveat (kind, text) for elements a comparison let pass beyond the strict tolerance."""
    (j, x, y) = f.example
    head = f"{p.a} vs {p.b}: {f.count} element(s) of `{f.target}`"
    if f.why == sensitivity.FLOAT32_COMPUTATION:
        flagged = f"; flagged {', '.join(f.flags)}" if f.flags else ""
        return ("float32 computation",
                f"{head} differ from the float64 reference beyond what one rounding of the inputs explains, within "
                f"what a float32 computation of the reference gives ({sensitivity.ACCUMULATION:g} times its error, "
                f"for an index or integer any value such a computation gives, rounded faithfully ones included; or "
                f"what one gives whose math functions flush subnormals to zero, as a GPU's do: "
                f"{f.spread:.3g} at {j}: {x:.6g} vs {y:.6g}; or {sensitivity.LOADED_ROUNDINGS:g} float32 roundings "
                f"of the largest input loaded){flagged}: the kernel is as accurate as float32 "
                "arithmetic of your reference's formula, not more; not failed")
    if f.why == carried.CARRIED:
        return ("kernel rounding through launch",
                f"{head}, which `launch` computes from what the kernel wrote, differ beyond the strict tolerance "
                f"(e.g. at {j}: {x:.6g} vs {y:.6g}), within what the kernel's own rounding does to them: "
                f"{f.spread:.3g} there, over {f.measured} runs of the case whose stores move each value the kernel "
                f"computed by {sensitivity.LOADED_ROUNDINGS:g} float32 roundings of the largest input its program "
                "loaded: not failed")
    if f.why == edges.UNDERFLOW_EDGE:
        return ("range-edge (underflow)",
                f"{head} differ within {edges.BOTTOM_TINIES} of float32's smallest normal values of zero (e.g. at {j}: "
                f"{x:.6g} vs {y:.6g}), where a value on their way fell below the normal range: float32 arithmetic "
                "keeps nothing finer there; not failed")
    if f.why == modelled.MODELLED:
        return ("GPU arithmetic (NaN/inf)",
                f"{head} differ in a NaN or an infinity (e.g. at {j}: {x:.6g} vs {y:.6g}) that the kernel's own "
                f"arithmetic gives on this case, each value in a run of it: {f.detail} (modelled runs: the "
                "interpreter computing as the GPU does, tf32 dot operands, fused multiply-adds, flushed subnormals, "
                "rounded to nearest and at random): a rounding dispute, not failed")
    if f.why == "measured":
        return ("measured", f"{head} differ beyond the strict tolerance but within the problem's measured sensitivity "
                            f"(e.g. at {j}: {x:.6g} vs {y:.6g}, where the problem moves by {f.spread:.3g} "
                            f"over {f.measured} runs of the reference on inputs moved by one rounding, in float64 and "
                            f"computed in float32); flagged {', '.join(f.flags)}: "
                            "not failed")
    if f.why == sensitivity.SCALE:
        return ("dataflow scale, unmeasured",
                f"{head} differ from the reference beyond the strict tolerance, within the kernel's dataflow scale "
                f"(e.g. at {j}: {x:.6g} vs {y:.6g}), and nothing measured what the problem allows there "
                f"({f.unmeasured}): not failed")
    if f.why == sensitivity.FLOAT32_OVERFLOW:
        return ("range-edge (float32 overflow)",
                f"{head} differ where {'the case holds' if f.coarse else 'the kernel computed from'} inputs at the "
                f"limits of float32's range and an overflow happened on the way, while the exact result fits (e.g. at "
                f"{j}: {x:.6g} vs {y:.6g}): float32 arithmetic, the widest kernels use, gives no better there, and "
                "perturbing the inputs does not measure it: not failed")
    unmeasured = f" (not measured: {f.unmeasured}; the flag forgave them)" if f.unmeasured else ""
    kind = ("near-tie" if f.why == "fragile" else "range-edge") + (", unmeasured" if f.unmeasured else "")
    if f.why == "fragile":
        return (kind, f"{head} were decided by comparing computed values within tolerance of each other (e.g. an "
                      "argmax among near-ties), or computed from a value within its rounding error of a pole (e.g. the "
                      f"rsqrt of a variance that is rounding noise; at {j}: {x:.6g} vs {y:.6g}){unmeasured}: "
                      "not failed")
    how = "the case's inputs reach the dtype's limits" if f.coarse and f.unmeasured else \
        "values at the dtype's limits overflowed on the way" if f.unmeasured else \
        "the exact result does not fit the dtype"
    return (kind, f"{head} differ only at the range edge (e.g. at {j}: {x:.6g} vs {y:.6g}; {how}){unmeasured}: "
                  "not failed")


def _errors(ev: Evidence) -> Verdict | None:
    failing = [p for p in ev.pairs if p.classification.action == FAIL]
    if not failing:
        return None
    sides = list(dict.fromkeys(s for p in failing for s in p.classification.sides))
    reasons = [f"{s}: {ev.outcomes[s].error.summary()}" for s in sides]  # type: ignore[union-attr]
    label = BOTH_FAILED if len(sides) > 1 else f"{_kind(ev, sides[0])} error"
    other = next((r for r in ev.outcomes if r not in sides), None)
    pair = (sides[0], sides[1] if len(sides) > 1 else other or sides[0])
    return Verdict(label, reasons, pair=pair, kind="error", targets=tuple(sides))


def _compile_rejected(ev: Evidence) -> Verdict | None:
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


def _compile_only_notes(ev: Evidence) -> list[tuple[str, str]]:
    return [("compile-only", text) for o in ev.outcomes.values() if o.role.kind == COMPILE_ONLY for text in o.notes]


def _undefined_loads(ev: Evidence, side: str) -> dict[str, int]:
    """The masked loads without other= whose masked-out lanes `side`'s run poisoned (see
    tdiff.execute.interpreter.undefined): "file:line: code" -> lanes."""
    o = ev.outcomes.get(side)
    if o is None or o.role.kind != "interpreter" or o.trace is None or not o.trace.poisoned:
        return {}
    return o.trace.undefined


def _unspecified(ev: Evidence, side: str) -> dict[str, int]:
    """The operations whose results Triton leaves unspecified that `side`'s interpreter run computed."""
    o = ev.outcomes.get(side)
    if o is None or o.role.kind != "interpreter" or o.trace is None:
        return {}
    return o.trace.unspecified


def _unspecified_verdict(ev: Evidence, side: str, what: str, pair: tuple[str, str], targets: tuple[str, ...],
                         detail: list[str]) -> Verdict:
    found = sorted(_unspecified(ev, side).items(), key=lambda kv: -kv[1])
    where = "; ".join(f"{k} ({n} lane(s))" for k, n in found[:3]) + ("; ..." if len(found) > 3 else "")
    return Verdict(UNSPECIFIED, [
        f"{what} and {side}'s own result changes when the results Triton leaves unspecified take another value: "
        "the kernel's output depends on them (another backend or GPU may give anything there); keep those "
        "operands out of the unspecified domain, or declare the check unspecified='note' if testing the "
        "operation itself", f"unspecified: {where}", *detail], pair=pair, kind="values", targets=targets)


def _lanes_verdict(ev: Evidence, side: str, what: str, kind: str, targets: tuple[str, ...],
                   pair: tuple[str, str], detail: list[str], zero_filled_agrees: bool = True) -> Verdict:
    loads = sorted(_undefined_loads(ev, side).items(), key=lambda kv: -kv[1])
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


def _integrity(ev: Evidence, final: bool = False) -> Verdict | None:
    for kind, label in INTEGRITY:
        found = [(side, f) for side, r in ev.reports.items() for f in r.findings if f.kind == kind]
        if found:
            side = found[0][0]
            mine = [f for s, f in found if s == side]
            others = sorted({s for s, _ in found if s != side})
            other = next((r for r in ev.outcomes if r != side), side)
            reasons = [f.message for f in mine] + ([f"(also seen in {', '.join(others)})"] if others else [])
            targets = tuple(sorted({f.target for f in mine if f.target}))
            if final and kind in _POISONABLE and _undefined_loads(ev, side):
                key = Rerun(ZERO_FILL, side)
                if key not in ev.extra:
                    return Verdict(UNDECIDED, needs=(key,))
                rerun = ev.extra[key]
                again = integrity.check(rerun, ev.case, ev.kernel, runs_kernel=True)
                if rerun.error is None and not any(f.kind == kind for f in again.findings):
                    return _lanes_verdict(ev, side, f"{side}: {label},", kind, targets, (side, other), reasons)
            return Verdict(label, reasons, pair=(side, other), kind=kind, targets=targets)
    return None


def _structure(ev: Evidence) -> Verdict | None:
    for p in ev.pairs:
        if p.comparison is None:
            continue
        found = [m for m in p.comparison.mismatches if m.kind == "structure"]
        if found:
            return Verdict(STRUCTURE, [m.message for m in found], pair=(p.a, p.b), kind="structure",
                           targets=tuple(sorted({m.target for m in found})))
    return None


def _targets(c: Comparison) -> tuple[str, ...]:
    return tuple(sorted({m.target for m in c.mismatches if m.kind == "values"}))


def _rmse(side: np.ndarray, truth: np.ndarray) -> float:
    keep = np.isfinite(truth)
    if not keep.any():
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        d = side[keep] - truth[keep]
    if not np.isfinite(d).all():
        return float("inf")
    return float(np.sqrt(np.mean(d * d)))


def judge(ev: Evidence, cmp: Comparison, truth: Outcome, truth_name: str) -> Verdict:
    """Which side of a value divergence is closer to a third opinion (reference or float64 run)."""
    a, b = cmp.a, cmp.b
    va, vb, vt = (view(o, ev.case) for o in (a, b, truth))
    reasons = []
    worse_a = worse_b = 0
    close_a = close_b = True
    for target in _targets(cmp):
        ta, tb, tt = va.targets.get(target), vb.targets.get(target), vt.targets.get(target)
        if ta is None or tb is None or tt is None or tt.shape != ta.shape:
            continue
        m = next(m for m in cmp.mismatches if m.target == target and m.kind == "values")
        x, y, t = ta.values, tb.values, tt.values
        if m.mask is not None and m.mask.shape == x.shape:  # judge where the two sides differ
            x, y, t = x[m.mask], y[m.mask], t[m.mask]
        mult = 3.0 if ta.dtype.is_half else 2.0
        ea, eb = _rmse(x, t), _rmse(y, t)
        tol = (m.tol or Tolerance.preset("reduce", ta.dtype)).loosened(4)
        if m.scale is not None and m.mask is not None and m.scale.shape == m.mask.shape:
            scale = m.scale[m.mask]
        else:
            scale = coarse_scale(ev.case, ta.values.size, None)
        close_a &= value_mismatch(target, x, t, tol, scale) is None
        close_b &= value_mismatch(target, y, t, tol, scale) is None
        reasons.append(f"`{target}`: RMSE to the {truth_name} result: {a.backend} {ea:.3g}, {b.backend} {eb:.3g}")
        if ea > mult * eb + 1e-300:
            worse_a += 1
        elif eb > mult * ea + 1e-300:
            worse_b += 1
    targets = _targets(cmp)
    if worse_a and not worse_b and not close_a:
        return Verdict(wrong(a.role), reasons, pair=(a.backend, b.backend), kind="values", targets=targets)
    if worse_b and not worse_a and not close_b:
        return Verdict(wrong(b.role), reasons, pair=(a.backend, b.backend), kind="values", targets=targets)
    if not close_a and not close_b:
        return Verdict(BOTH_WRONG, ["neither side is close to the third opinion (a kernel bug)", *reasons],
                       pair=(a.backend, b.backend), kind="values", targets=targets)
    return Verdict(UNDECIDED, [f"both sides are within tolerance of the {truth_name} result; the difference between "
                               "them is just beyond tolerance", *reasons], pair=(a.backend, b.backend),
                   kind="values", targets=targets)


def _reruns(ev: Evidence, p: Pair, final: bool) -> Verdict | tuple[Rerun, ...] | None:
    """Before blaming a backend: does the compiled side disagree with itself, does the interpreter's
    result depend on program order? (Only for a final verdict.)"""
    if not final:
        return None
    needs: list[Rerun] = []
    for side in (p.a, p.b):
        kind = _kind(ev, side)
        if kind == "reference":
            continue
        if kind == "interpreter" and ev.outcomes[side].trace is not None:
            keys = [Rerun(REVERSED, side), Rerun(SHUFFLED, side)]
            if _undefined_loads(ev, side):
                keys.insert(0, Rerun(ZERO_FILL, side))
            if _unspecified(ev, side):
                keys.insert(0, Rerun(ALT_UNSPECIFIED, side))
        elif kind != "interpreter":
            keys = [Rerun(AGAIN, side)]
        else:
            keys = []
        for key in keys:
            if key not in ev.extra:
                needs.append(key)
                continue
            rerun = ev.extra[key]
            if rerun.error is not None:
                continue
            c = ev.compare(ev.outcomes[side], rerun)
            if not c.ok:
                if key.how == ALT_UNSPECIFIED:
                    other = p.b if side == p.a else p.a
                    return _unspecified_verdict(ev, side, f"{side}'s result differs from {other},", (p.a, p.b),
                                                _targets(p.comparison) if p.comparison else _targets(c),
                                                [p.comparison.summary()] if p.comparison else [])
                if key.how == ZERO_FILL:
                    other = p.b if side == p.a else p.a
                    # right with NVIDIA's zeros? The reference says, where there is one; else the other side
                    truth = next((k for k, o in ev.outcomes.items() if o.role.kind == "reference" and o.error is None),
                                 other)
                    agrees = truth not in ev.outcomes or ev.compare(rerun, ev.outcomes[truth]).ok
                    return _lanes_verdict(ev, side, f"{side}'s result differs from {other},",
                                          "values", _targets(p.comparison) if p.comparison else _targets(c),
                                          (p.a, p.b), [p.comparison.summary()] if p.comparison else [],
                                          zero_filled_agrees=agrees)
                if key.how == AGAIN:
                    return Verdict(NONDETERMINISTIC, [f"a second run of {side} differs from the first: {c.summary()}"],
                                   pair=(side, side), kind="values", targets=_targets(c))
                order = key.order
                return Verdict(RACE, [f"running the programs {order} instead of 0, 1, 2, ... changes the result: "
                                      f"{c.summary()}"], pair=(side, side), kind="values", targets=_targets(c))
    return tuple(needs) or None


def _values(ev: Evidence, final: bool) -> Verdict | None:
    diverging = [p for p in ev.pairs if p.disagrees]
    if not diverging:
        return None
    if FLOAT64_RUN not in ev.extra and any(m.edge_pending for p in diverging for m in p.comparison.mismatches):  # type: ignore[union-attr]
        return Verdict(UNDECIDED, needs=(FLOAT64_RUN,))  # differences at the range edge: is the overflow inherent?
    if any(m.measure_pending for p in diverging for m in p.comparison.mismatches):  # type: ignore[union-attr]
        missing = tuple(r for r in sensitivity.reruns() if r not in ev.extra)
        if missing:  # flagged elements beyond the strict tolerance: what does the problem allow there?
            return Verdict(UNDECIDED, needs=missing)
    if any(m.model_pending for p in diverging for m in p.comparison.mismatches):  # type: ignore[union-attr]
        missing = tuple(r for r in modelled.reruns() if r not in ev.extra)
        if missing:  # a NaN or an infinity on one side: does the GPU's arithmetic make it of this case?
            return Verdict(UNDECIDED, needs=missing)
    if any(m.carry_pending for p in diverging for m in p.comparison.mismatches):  # type: ignore[union-attr]
        missing = tuple(r for r in carried.reruns() if r not in ev.extra)
        if missing:  # an output `launch` computed: does the kernel's rounding, carried through it, explain it?
            return Verdict(UNDECIDED, needs=missing)
    refs = ev.roles("reference")
    ref = refs[0] if refs else None
    backends = [r for r, o in ev.outcomes.items() if o.role.kind not in ("reference", COMPILE_ONLY) and o.error is None]
    between = [p for p in diverging if ref not in (p.a, p.b)]
    if between:  # the backends disagree with each other
        p = between[0]
        if _kind(ev, p.a) == _kind(ev, p.b) == "interpreter":  # the same interpreter in another order
            return Verdict(RACE, [f"running the programs in another order changes the result: "
                                  f"{p.comparison.summary()}"], pair=(p.a, p.b), kind="values",
                           targets=_targets(p.comparison))  # type: ignore[arg-type]
        rerun = _reruns(ev, p, final)
        if isinstance(rerun, Verdict):
            return rerun
        if isinstance(rerun, tuple):
            return Verdict(UNDECIDED, needs=rerun)
        pa, pb = (ev.pair(p.a, ref), ev.pair(p.b, ref)) if ref else (None, None)
        truth_ref = ev.outcomes[ref] if ref else None
        if ref is None and ev.reference_on_divergence:  # the reference, asked now that they disagree
            if REFERENCE_RUN not in ev.extra:
                return Verdict(UNDECIDED, needs=(REFERENCE_RUN,))
            truth_ref = ev.extra[REFERENCE_RUN]
            if truth_ref.error is None:
                pa = Pair(p.a, "reference", p.classification, ev.compare(ev.outcomes[p.a], truth_ref))
                pb = Pair(p.b, "reference", p.classification, ev.compare(ev.outcomes[p.b], truth_ref))
        if pa is not None and pb is not None and pa.comparison is not None and pb.comparison is not None:
            ok_a, ok_b = pa.comparison.ok, pb.comparison.ok
            reasons = [p.comparison.summary()]  # type: ignore[union-attr]
            for side, mine, other in ((p.b, pb, pa), (p.a, pa, pb)):
                if other.comparison.ok and mine.comparison.within_tf32 \
                        and not other.comparison.ieee_dots:  # type: ignore[union-attr]
                    # the other side agrees with the reference only within tf32's allowance, which this side
                    # (IEEE float32) is not given: no evidence this side is wrong; the kernel may be
                    return Verdict(VS_REFERENCE, [
                        f"{side}'s result differs from the reference beyond float32's tolerance; "
                        f"{other.b if other.a == ref else other.a} agrees with it only within tf32's allowance (its "
                        "tl.dot ran in tf32), which hides an error of that size: a kernel bug (e.g. a float16 "
                        "accumulator), or a reference that rounds like tf32 (declare tolerance=\"tf32\")",
                        *reasons, mine.comparison.summary()],  # type: ignore[union-attr]
                        pair=(side, ref), kind="values", targets=_targets(mine.comparison))  # type: ignore[arg-type]
            if ok_a and not ok_b:
                return Verdict(_wrong(ev, p.b), [f"{p.a} agrees with the reference, {p.b} does not", *reasons],
                               pair=(p.a, p.b), kind="values", targets=_targets(p.comparison))  # type: ignore[arg-type]
            if ok_b and not ok_a:
                return Verdict(_wrong(ev, p.a), [f"{p.b} agrees with the reference, {p.a} does not", *reasons],
                               pair=(p.a, p.b), kind="values", targets=_targets(p.comparison))  # type: ignore[arg-type]
            if ok_a and ok_b:
                return Verdict(PASSED, notes=[("undecided", f"{p.a} and {p.b} differ slightly, but each agrees with "
                                               f"the reference ({p.comparison.summary()}): undecided, not failed")])  # type: ignore[union-attr]
            v = judge(ev, p.comparison, truth_ref, "reference")  # type: ignore[arg-type]
            return v if v.label != UNDECIDED else Verdict(BOTH_WRONG, ["neither side agrees with the reference",
                                                                      *v.reasons], pair=v.pair, kind="values",
                                                          targets=v.targets)
        if FLOAT64_RUN not in ev.extra:
            return Verdict(UNDECIDED, needs=(FLOAT64_RUN,))
        truth = ev.extra[FLOAT64_RUN]
        if truth.error is not None:
            return Verdict(UNDECIDED, [f"no third opinion: the float64 run failed: {truth.error.summary()}",
                                       p.comparison.summary()], pair=(p.a, p.b), kind="values",  # type: ignore[union-attr]
                           targets=_targets(p.comparison))  # type: ignore[arg-type]
        v = judge(ev, p.comparison, truth, "interpreter:fp64")  # type: ignore[arg-type]
        if v.label == UNDECIDED:
            return Verdict(PASSED, notes=[("undecided", f"{p.a} and {p.b} differ slightly, but each agrees with the "
                                                        "float64 run: undecided, not failed")])
        return v
    # the backends agree with each other (or there is one); the reference disagrees
    against = [p for p in diverging if ref in (p.a, p.b)]
    p = against[0]
    side = p.a if p.b == ref else p.b
    reasons = [p.comparison.summary()]  # type: ignore[union-attr]
    if len(backends) > 1 and all((q := ev.pair(b, ref)) is not None and q.disagrees for b in backends):
        found = _finding(ev, p, side, ref, final)
        if found is not None:
            return found
        return Verdict(KERNEL_BUG, [f"{' and '.join(backends)} agree with each other; the reference disagrees with "
                                    "both: a bug in the kernel (or in the reference)", *reasons],
                       pair=(side, ref), kind="values", targets=_targets(p.comparison))  # type: ignore[arg-type]
    rerun = _reruns(ev, Pair(side, ref, p.classification, p.comparison), final)  # type: ignore[arg-type]
    if isinstance(rerun, Verdict):
        return rerun
    if isinstance(rerun, tuple):
        return Verdict(UNDECIDED, needs=rerun)
    found = _finding(ev, p, side, ref, final)
    if found is not None:
        return found
    narrowed = any(m.narrowing for m in p.comparison.mismatches)  # type: ignore[union-attr]
    how = "where a narrowing cast fed it" if narrowed else "beyond tolerance"
    return Verdict(VS_REFERENCE, [f"{side}'s result differs from the reference {how}: a kernel bug, or a "
                                  f"backend bug", *reasons], pair=(side, ref), kind="values",
                   targets=_targets(p.comparison))  # type: ignore[arg-type]


def _finding(ev: Evidence, p: Pair, side: str, ref: str, final: bool) -> Verdict | None:
    """A finding (judge.findings) on a kernel whose result differs from the reference: an intermediate overflow
    where the result fits, or (final verdicts: it needs the random-rounding ensemble, asked for here) numerical
    instability; None where neither explains it (the caller's verdict, a bug, stands)."""
    cmp = p.comparison
    if cmp is None:
        return None
    found = findings.left_range(ev, cmp, side, ref)  # type: ignore[assignment]
    if isinstance(found, tuple):
        return Verdict(UNDECIDED, needs=found)
    if found is None and final:
        found = findings.unstable(ev, cmp, side, ref)  # type: ignore[assignment]
        if isinstance(found, tuple):
            return Verdict(UNDECIDED, needs=found)
    if found is None:
        return None
    return Verdict(found.label, [found.reason, cmp.summary()], pair=(side, ref), kind="values",
                   targets=_targets(cmp))


def decide(ev: Evidence, final: bool = False) -> Verdict:
    """The verdict on one case from the evidence; `needs` lists reruns to add before asking again.
    With `final`, a value divergence is first checked for nondeterminism and program-order races."""
    notes = _notes(ev) + _compile_only_notes(ev)
    if ev.pairs and all(p.classification.action == DISCARD for p in ev.pairs):
        rejected = _compile_rejected(ev)  # (a compile error is never "not judged")
        if rejected is not None:
            rejected.notes = notes
            return _with_sides(rejected, ev)
        return Verdict(NOT_JUDGED, [describe_discard(ev.pairs[0].classification)], notes)
    for step in (_errors, _compile_rejected, lambda e: _integrity(e, final), _structure):
        v = step(ev)
        if v is not None:
            v.notes = notes
            if v.needs:
                v.extra = dict(ev.extra)
            return _with_sides(v, ev)
    v = _values(ev, final)
    if v is None:
        return Verdict(PASSED, notes=notes)
    v.notes = notes + v.notes
    v.extra = dict(ev.extra)
    return _with_sides(v, ev)


def _with_sides(v: Verdict, ev: Evidence) -> Verdict:
    named = (*(v.pair or ()), *(v.targets if v.kind == "error" else ()))
    v.sides = {s: ev.role(s) for s in named}
    return v


__all__ = ["Verdict", "decide", "judge", "wrong", "Rules", "NUMERICALLY_UNSTABLE", "INTERMEDIATE_OVERFLOW",
           "INTERMEDIATE_UNDERFLOW"]
