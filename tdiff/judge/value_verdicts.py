"""The verdict on a value divergence, using every opinion: which side the reference (or the float64 run) blames,
a kernel bug both backends share, a finding (judge.findings), and the reruns asked first (nondeterminism,
program-order races, undefined lanes, unspecified results; the measurements that forgive elements)."""

from __future__ import annotations

import numpy as np

from ..core.backend_spec import COMPILE_ONLY
from ..core.outcome import Outcome
from ..core.rerun import AGAIN, ALT_UNSPECIFIED, FLOAT64_RUN, REFERENCE_RUN, REVERSED, SHUFFLED, ZERO_FILL, Rerun
from ..core.tolerance import Tolerance
from . import carried, findings, modelled, sensitivity
from .closeness import value_mismatch
from .compare import coarse_scale
from .comparison import Comparison
from .evidence import Evidence, Pair
from .fault_verdicts import lanes_verdict, undefined_loads, unspecified, unspecified_verdict
from .labels import BOTH_WRONG, KERNEL_BUG, NONDETERMINISTIC, PASSED, RACE, UNDECIDED, VS_REFERENCE, Verdict, wrong
from .targets import view


def value_targets(c: Comparison) -> tuple[str, ...]:
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
    for target in value_targets(cmp):
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
    targets = value_targets(cmp)
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


def reruns(ev: Evidence, p: Pair, final: bool) -> Verdict | tuple[Rerun, ...] | None:
    """Before blaming a backend: does the compiled side disagree with itself, does the interpreter's
    result depend on program order? (Only for a final verdict.)"""
    if not final:
        return None
    needs: list[Rerun] = []
    for side in (p.a, p.b):
        kind = ev.role(side).kind
        if kind == "reference":
            continue
        if kind == "interpreter" and ev.outcomes[side].trace is not None:
            keys = [Rerun(REVERSED, side), Rerun(SHUFFLED, side)]
            if undefined_loads(ev, side):
                keys.insert(0, Rerun(ZERO_FILL, side))
            if unspecified(ev, side):
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
                    return unspecified_verdict(ev, side, f"{side}'s result differs from {other},", (p.a, p.b),
                                                value_targets(p.comparison) if p.comparison else value_targets(c),
                                                [p.comparison.summary()] if p.comparison else [])
                if key.how == ZERO_FILL:
                    other = p.b if side == p.a else p.a
                    # right with NVIDIA's zeros? The reference says, where there is one; else the other side
                    truth = next((k for k, o in ev.outcomes.items() if o.role.kind == "reference" and o.error is None),
                                 other)
                    agrees = truth not in ev.outcomes or ev.compare(rerun, ev.outcomes[truth]).ok
                    return lanes_verdict(ev, side, f"{side}'s result differs from {other},",
                                          "values", value_targets(p.comparison) if p.comparison else value_targets(c),
                                          (p.a, p.b), [p.comparison.summary()] if p.comparison else [],
                                          zero_filled_agrees=agrees)
                if key.how == AGAIN:
                    return Verdict(NONDETERMINISTIC, [f"a second run of {side} differs from the first: {c.summary()}"],
                                   pair=(side, side), kind="values", targets=value_targets(c))
                order = key.order
                return Verdict(RACE, [f"running the programs {order} instead of 0, 1, 2, ... changes the result: "
                                      f"{c.summary()}"], pair=(side, side), kind="values", targets=value_targets(c))
    return tuple(needs) or None


def values(ev: Evidence, final: bool) -> Verdict | None:
    diverging = [p for p in ev.pairs if p.disagrees]
    if not diverging:
        return None
    if FLOAT64_RUN not in ev.extra and any(m.edge_pending for p in diverging for m in p.compared.mismatches):
        return Verdict(UNDECIDED, needs=(FLOAT64_RUN,))  # differences at the range edge: is the overflow inherent?
    if any(m.measure_pending for p in diverging for m in p.compared.mismatches):
        missing = tuple(r for r in sensitivity.reruns() if r not in ev.extra)
        if missing:  # flagged elements beyond the strict tolerance: what does the problem allow there?
            return Verdict(UNDECIDED, needs=missing)
    if any(m.model_pending for p in diverging for m in p.compared.mismatches):
        missing = tuple(r for r in modelled.reruns() if r not in ev.extra)
        if missing:  # a NaN or an infinity on one side: does the GPU's arithmetic make it of this case?
            return Verdict(UNDECIDED, needs=missing)
    if any(m.carry_pending for p in diverging for m in p.compared.mismatches):
        missing = tuple(r for r in carried.reruns() if r not in ev.extra)
        if missing:  # an output `launch` computed: does the kernel's rounding, carried through it, explain it?
            return Verdict(UNDECIDED, needs=missing)
    refs = ev.roles("reference")
    ref = refs[0] if refs else None
    backends = [r for r, o in ev.outcomes.items() if o.role.kind not in ("reference", COMPILE_ONLY) and o.error is None]
    between = [p for p in diverging if ref not in (p.a, p.b)]
    if between:  # the backends disagree with each other
        p = between[0]
        pc = p.compared
        if ev.role(p.a).kind == ev.role(p.b).kind == "interpreter":  # the same interpreter in another order
            return Verdict(RACE, [f"running the programs in another order changes the result: "
                                  f"{pc.summary()}"], pair=(p.a, p.b), kind="values", targets=value_targets(pc))
        rerun = reruns(ev, p, final)
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
        ca, cb = (pa.comparison, pb.comparison) if pa is not None and pb is not None else (None, None)
        if pa is not None and pb is not None and ca is not None and cb is not None:
            assert truth_ref is not None  # (pairs with the reference: its outcome is there)
            ok_a, ok_b = ca.ok, cb.ok
            reasons = [pc.summary()]
            for side, other, mine_c, other_c in ((p.b, pa, cb, ca), (p.a, pb, ca, cb)):
                if other_c.ok and mine_c.within_tf32 and not other_c.ieee_dots:
                    # the other side agrees with the reference only within tf32's allowance, which this side
                    # (IEEE float32) is not given: no evidence this side is wrong; the kernel may be
                    return Verdict(VS_REFERENCE, [
                        f"{side}'s result differs from the reference beyond float32's tolerance; "
                        f"{other.b if other.a == ref else other.a} agrees with it only within tf32's allowance (its "
                        "tl.dot ran in tf32), which hides an error of that size: a kernel bug (e.g. a float16 "
                        "accumulator), or a reference that rounds like tf32 (declare tolerance=\"tf32\")",
                        *reasons, mine_c.summary()],
                        pair=(side, ref or "reference"), kind="values", targets=value_targets(mine_c))
            if ok_a and not ok_b:
                return Verdict(wrong(ev.role(p.b)), [f"{p.a} agrees with the reference, {p.b} does not", *reasons],
                               pair=(p.a, p.b), kind="values", targets=value_targets(pc))
            if ok_b and not ok_a:
                return Verdict(wrong(ev.role(p.a)), [f"{p.b} agrees with the reference, {p.a} does not", *reasons],
                               pair=(p.a, p.b), kind="values", targets=value_targets(pc))
            if ok_a and ok_b:
                return Verdict(PASSED, notes=[("undecided", f"{p.a} and {p.b} differ slightly, but each agrees with "
                                               f"the reference ({pc.summary()}): undecided, not failed")])
            v = judge(ev, pc, truth_ref, "reference")
            return v if v.label != UNDECIDED else Verdict(BOTH_WRONG, ["neither side agrees with the reference",
                                                                      *v.reasons], pair=v.pair, kind="values",
                                                          targets=v.targets)
        if FLOAT64_RUN not in ev.extra:
            return Verdict(UNDECIDED, needs=(FLOAT64_RUN,))
        truth = ev.extra[FLOAT64_RUN]
        if truth.error is not None:
            return Verdict(UNDECIDED, [f"no third opinion: the float64 run failed: {truth.error.summary()}",
                                       pc.summary()], pair=(p.a, p.b), kind="values", targets=value_targets(pc))
        v = judge(ev, pc, truth, "interpreter:fp64")
        if v.label == UNDECIDED:
            return Verdict(PASSED, notes=[("undecided", f"{p.a} and {p.b} differ slightly, but each agrees with the "
                                                        "float64 run: undecided, not failed")])
        return v
    # the backends agree with each other (or there is one); the reference disagrees
    against = [p for p in diverging if ref in (p.a, p.b)]
    assert ref is not None  # (no pair between the backends diverges: each diverging pair is with the reference)
    p = against[0]
    pc = p.compared
    side = p.a if p.b == ref else p.b
    reasons = [pc.summary()]
    if len(backends) > 1 and all((q := ev.pair(b, ref)) is not None and q.disagrees for b in backends):
        found = finding(ev, p, side, ref, final)
        if found is not None:
            return found
        return Verdict(KERNEL_BUG, [f"{' and '.join(backends)} agree with each other; the reference disagrees with "
                                    "both: a bug in the kernel (or in the reference)", *reasons],
                       pair=(side, ref), kind="values", targets=value_targets(pc))
    rerun = reruns(ev, Pair(side, ref, p.classification, pc), final)
    if isinstance(rerun, Verdict):
        return rerun
    if isinstance(rerun, tuple):
        return Verdict(UNDECIDED, needs=rerun)
    found = finding(ev, p, side, ref, final)
    if found is not None:
        return found
    narrowed = any(m.narrowing for m in pc.mismatches)
    how = "where a narrowing cast fed it" if narrowed else "beyond tolerance"
    return Verdict(VS_REFERENCE, [f"{side}'s result differs from the reference {how}: a kernel bug, or a "
                                  f"backend bug", *reasons], pair=(side, ref), kind="values",
                   targets=value_targets(pc))


def finding(ev: Evidence, p: Pair, side: str, ref: str, final: bool) -> Verdict | None:
    """A finding (judge.findings) on a kernel whose result differs from the reference: an intermediate overflow
    where the result fits, or (final verdicts: it needs the random-rounding ensemble, asked for here) numerical
    instability; None where neither explains it (the caller's verdict, a bug, stands)."""
    cmp = p.comparison
    if cmp is None:
        return None
    found = findings.left_range(ev, cmp, side, ref)
    if isinstance(found, tuple):
        return Verdict(UNDECIDED, needs=found)
    if found is None and final:
        found = findings.unstable(ev, cmp, side, ref)
        if isinstance(found, tuple):
            return Verdict(UNDECIDED, needs=found)
    if found is None:
        return None
    return Verdict(found.label, [found.reason, cmp.summary()], pair=(side, ref), kind="values",
                   targets=value_targets(cmp))
