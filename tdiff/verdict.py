"""Verdicts: which side of a divergence is wrong, and why.

Evidence is gathered by running more backends on the same case: the interpreter with its
programs in another order (races between programs), the compiled backend again
(nondeterminism), and a third opinion (the user's reference, or the interpreter in float64 on
upcast inputs) to decide which side is closer to the truth, as PyTorch's accuracy checker does:
a side is judged wrong when its RMSE to the truth exceeds twice (three times for half types)
the other side's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import dtypes
from .case import Case
from .compare import Comparison, compare, input_scale, reduction_factor, value_mismatch, view_values
from .outcome import Outcome, returned_at
from .tolerance import Tolerance

COMPILED_WRONG = "compiled wrong"
INTERPRETER_WRONG = "interpreter wrong"
BOTH_WRONG = "both wrong"
UNDECIDED = "undecided"
NONDETERMINISTIC = "nondeterministic"
RACE = "race between programs"
OUT_OF_BOUNDS = "out of bounds"
UNDEFINED = "undefined behaviour"
LIMITATION = "interpreter limitation"
BOTH_FAILED = "both failed"
VS_REFERENCE = "disagrees with reference"

#: verdicts that never fail a run: the interpreter cannot run the case
QUIET = {LIMITATION}


@dataclass
class Verdict:
    label: str
    reasons: list[str] = field(default_factory=list)
    extra: dict[str, Outcome] = field(default_factory=dict)  # outcomes of the reruns, by label

    def __str__(self) -> str:
        return self.label if not self.reasons else f"{self.label}: {self.reasons[0]}"


Rerun = Callable[[str], Outcome]  # runs a backend spec ("interpreter:reversed", ...) on the same case


def _wrong(backend: str) -> str:
    kind = backend.split(":")[0]
    if kind == "compiled":
        return COMPILED_WRONG
    if kind == "interpreter":
        return INTERPRETER_WRONG
    return f"{backend} wrong"


def _interpreter_side(cmp: Comparison) -> Outcome | None:
    for o in (cmp.a, cmp.b):
        if o.backend.startswith("interpreter") and o.error is None:
            return o
    return None


def _rmse(side: np.ndarray, truth: np.ndarray) -> float:
    keep = np.isfinite(truth)
    if not keep.any():
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        d = side[keep] - truth[keep]
    if not np.isfinite(d).all():
        return float("inf")
    return float(np.sqrt(np.mean(d * d)))


def _targets(cmp: Comparison) -> list[str]:
    return sorted({m.target for m in cmp.mismatches if m.kind == "values" and m.target})


def _values(o: Outcome, case: Case, target: str) -> np.ndarray | None:
    tensors = case.tensors()
    if target in tensors and target in o.storages:
        return view_values(o.storages[target], tensors[target])[0]
    node = returned_at(o.returned, target)
    if node is None or not hasattr(node, "values"):
        return None
    return dtypes.as_float64(node.values, dtypes.dtype(node.dtype))


def decide(case: Case, cmp: Comparison, rerun: Rerun, *, has_reference: bool, specs: dict[str, str] | None = None,
           tolerance=None, tolerances=None) -> Verdict:
    """Decide a divergence, running more backends through `rerun(spec)` where that helps.

    `specs` maps each side's backend label to the spec that produced it (default: the label).
    """
    specs = specs or {}
    a, b = cmp.a, cmp.b
    kinds = cmp.kinds()
    # errors on one or both sides
    if "error" in kinds:
        failed = [o for o in (a, b) if o.error]
        if len(failed) == 2:
            return Verdict(BOTH_FAILED, [f"{o.backend}: {o.error.summary()}" for o in failed])
        o = failed[0]
        if o.error.kind == "limitation":
            return Verdict(LIMITATION, [f"the interpreter does not support this: {o.error.message}"])
        return Verdict(f"{o.backend.split(':')[0]} error", [o.error.summary()])
    # out of bounds: the interpreter stopped an access, or a guard band was written
    oob = [m for m in cmp.mismatches if m.kind in ("oob", "guard")]
    if oob:
        return Verdict(OUT_OF_BOUNDS, [m.message for m in oob])
    interp = _interpreter_side(cmp)
    if interp is not None and interp.trace is not None and interp.trace.ub:
        return Verdict(UNDEFINED, [f"{e.what}: {e.count} value(s), e.g. {e.example}, in program {e.program}"
                                   + (f" ({e.line})" if e.line else "") for e in interp.trace.ub])
    verdict_extra: dict[str, Outcome] = {}
    # races between programs: the interpreter's result depends on program order
    if interp is not None:
        base = specs.get(interp.backend, interp.backend)
        for order in ("reversed", "shuffled"):
            other = rerun(f"{base}:{order}")
            verdict_extra[f"{interp.backend}:{order}"] = other
            c = compare(interp, other, case, tolerance, tolerances)
            if other.error is None and not c.ok:
                return Verdict(RACE, [f"running the programs {order} instead of 0, 1, 2, ... changes the result: "
                                      f"{c.summary()}"], verdict_extra)
    # nondeterminism: the compiled backend disagrees with itself
    for o in (a, b):
        if o.backend.startswith("compiled"):
            again = rerun(specs.get(o.backend, o.backend))
            verdict_extra[f"{o.backend} (again)"] = again
            c = compare(o, again, case, tolerance, tolerances)
            if again.error is None and not c.ok:
                return Verdict(NONDETERMINISTIC, [f"a second compiled run differs from the first: {c.summary()}"],
                               verdict_extra)
    if b.backend.startswith("reference") or a.backend.startswith("reference"):
        return Verdict(VS_REFERENCE, [
            "the kernel's result differs from the reference beyond tolerance: a kernel bug, or a backend bug "
            "(compare with the other backend to tell which)"], verdict_extra)
    # a third opinion
    truth_spec = "reference" if has_reference else "interpreter:fp64"
    truth = rerun(truth_spec)
    verdict_extra[truth_spec] = truth
    if truth.error is not None:
        return Verdict(UNDECIDED, [f"no third opinion: {truth_spec} failed: {truth.error.summary()}"],
                       verdict_extra)
    return _judge(case, cmp, truth, truth_spec, verdict_extra)


def _judge(case: Case, cmp: Comparison, truth: Outcome, truth_spec: str, extra: dict) -> Verdict:
    a, b = cmp.a, cmp.b
    reasons = []
    worse_a = worse_b = 0
    close_a = close_b = True
    for target in _targets(cmp):
        va, vb, vt = _values(a, case, target), _values(b, case, target), _values(truth, case, target)
        if va is None or vb is None or vt is None or vt.shape != va.shape:
            continue
        m = next(m for m in cmp.mismatches if m.target == target and m.kind == "values")
        dt_name = case.tensors()[target].dtype if target in case.tensors() else "float32"
        dt = dtypes.dtype(dt_name)
        mult = 3.0 if dt.is_half else 2.0
        if m.mask is not None and m.mask.shape == va.shape:  # judge where the two sides differ
            va, vb, vt = va[m.mask], vb[m.mask], vt[m.mask]
        ea, eb = _rmse(va, vt), _rmse(vb, vt)
        tol = Tolerance.preset("reduce", dt) if dt.is_float else Tolerance(exact=True)
        if m.tolerance and "tf32" in m.tolerance:
            tol = Tolerance.preset("tf32", dt)
        elif m.tolerance and "dot" in m.tolerance and dt.is_float:
            tol = Tolerance.preset("dot", dt)
        tol = tol.loosened(4)
        scale_in, terms = input_scale(case), reduction_factor(case, vt.size)
        close_a &= value_mismatch(target, va, vt, dt, tol, None, input_scale=scale_in, terms=terms) is None
        close_b &= value_mismatch(target, vb, vt, dt, tol, None, input_scale=scale_in, terms=terms) is None
        reasons.append(f"`{target}`: RMSE to the {truth_spec} result: {a.backend} {ea:.3g}, {b.backend} {eb:.3g}")
        if ea > mult * eb + 1e-300:
            worse_a += 1
        elif eb > mult * ea + 1e-300:
            worse_b += 1
    if worse_a and not worse_b and not close_a:
        return Verdict(_wrong(a.backend), reasons, extra)
    if worse_b and not worse_a and not close_b:
        return Verdict(_wrong(b.backend), reasons, extra)
    if not close_a and not close_b:
        return Verdict(BOTH_WRONG, ["neither side is close to the third opinion (a kernel bug)", *reasons], extra)
    return Verdict(UNDECIDED, ["both sides are close to the third opinion; the difference between them is just "
                               "beyond tolerance (consider loosening it)", *reasons], extra)
