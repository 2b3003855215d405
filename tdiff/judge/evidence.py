"""Everything known about one case: each backend's outcome, what each broke on its own, how each
pair of outcomes was classified and compared, and the outcomes of reruns.

`gather` builds it from outcomes without running anything; the runner runs backends and adds
reruns (`Evidence.add`) when `tdiff.judge.verdict.decide` asks for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from ..core import dtypes
from ..core.backend_spec import COMPILE_ONLY, Role
from ..core.case import Case
from ..core.outcome import Outcome
from ..core.rerun import FLOAT64_RUN, Rerun
from . import carried, integrity, modelled, sensitivity
from .classify import Classification, classify
from .compare import compare
from .comparison import Comparison
from .rules import Rules
from .targets import view


@dataclass
class Pair:
    a: str
    b: str
    classification: Classification
    comparison: Comparison | None = None  # when judged

    @property
    def disagrees(self) -> bool:
        return self.comparison is not None and not self.comparison.ok

    @property
    def compared(self) -> Comparison:
        """The pair's comparison, for a pair that was judged (a disagreeing one)."""
        if self.comparison is None:
            raise ValueError(f"{self.a} vs {self.b} was not compared ({self.classification.action}): no comparison")
        return self.comparison


@dataclass
class Evidence:
    case: Case
    kernel: str  # the declared kernel's name
    outcomes: dict[str, Outcome]  # by backend label, in the order they were asked for
    rules: Rules
    reports: dict[str, integrity.Report] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)
    extra: dict[Rerun, Outcome] = field(default_factory=dict)  # the reruns a verdict asked for
    # the check's reference runs only when the others disagree (the metamorphic profile)
    reference_on_divergence: bool = False

    def pair(self, a: str, b: str) -> Pair | None:
        for p in self.pairs:
            if {p.a, p.b} == {a, b}:
                return p
        return None

    def role(self, label: str) -> Role:
        """What the side labelled `label` plays: its outcome's role (an opinion's or a rerun's)."""
        o = self.outcomes.get(label) or next((x for x in self.extra.values() if x.backend == label), None)
        if o is None:
            raise KeyError(f"no outcome labelled {label!r} in this case's evidence")
        return o.role

    def roles(self, kind: str) -> list[str]:
        return [r for r, o in self.outcomes.items() if o.role.kind == kind]

    def add(self, key: Rerun, outcome: Outcome) -> None:
        self.extra[key] = outcome

    def compare(self, a: Outcome, b: Outcome) -> Comparison:
        return compare(a, b, self.case, self.rules)


def _guide(outcomes: dict[str, Outcome]) -> Outcome | None:
    """The interpreter run whose trace guides tolerances: the forward, unsampled one if any."""
    best = None
    for o in outcomes.values():
        if o.error is not None or o.trace is None or _reordered_or_upcast(o):
            continue
        if best is None or (best.trace is not None and best.trace.sampled and not o.trace.sampled):
            best = o
    return best


def _reordered_or_upcast(o: Outcome) -> bool:
    """An interpreter run in another program order or in float64 (its trace does not guide tolerances)."""
    if o.spec is not None:
        return o.spec.order != "forward" or o.spec.upcast
    return o.role.options[-1:] in (("reversed",), ("shuffled",), ("fp64",))  # built without a judge (tests)


def same_path(run: Outcome, fp64: Outcome) -> bool:
    """Whether the float64 run launched what the run did: the same kernels, grids, options and
    arguments other than tensor dtypes and floats, and a dtype argument naming the launch's own tensors' dtype
    in both (liger's RMSNorm passes `X_dtype` for its casts). A `launch` that picks a path by dtype (liger's
    group norm passes tl.bfloat16 for every input that is not float32) makes the float64 run
    another computation, which decides nothing about this one."""
    if len(run.launches) != len(fp64.launches):
        return False
    for a, b in zip(run.launches, fp64.launches):
        if (a.kernel, a.grid, a.config, len(a.args), sorted(a.kwargs)) != \
                (b.kernel, b.grid, b.config, len(b.args), sorted(b.kwargs)):
            return False
        own_a, own_b = _tensor_dtypes(a.args, a.kwargs), _tensor_dtypes(b.args, b.kwargs)
        if [_path_part(x, own_a) for x in a.args] != [_path_part(y, own_b) for y in b.args] or \
                any(_path_part(a.kwargs[k], own_a) != _path_part(b.kwargs[k], own_b) for k in a.kwargs):
            return False
    return True


def _tensor_dtypes(args: list[dict[str, Any]], kwargs: dict[str, dict[str, Any]]) -> set[str]:
    """The dtypes of a launch's tensor arguments."""
    return {str(d["dtype"]) for d in [*args, *kwargs.values()] if d.get("kind") in ("input", "tensor")
            and "dtype" in d}


def _dtype_named(d: dict[str, Any]) -> str | None:
    """The dtype a described argument names (a torch dtype, or a Triton one, described by its repr), else None."""
    value = d.get("value")
    if not isinstance(value, str) or d.get("kind") not in ("dtype", "opaque"):
        return None
    try:
        return dtypes.dtype(dtypes.triton_dtype_named(value) or value).name
    except dtypes.UnsupportedDType:
        return None


def _path_part(d: dict[str, Any], own: set[str]) -> Any:
    kind = d.get("kind")
    if kind in ("input", "tensor"):
        return "tensor", tuple(d.get("shape", ())), tuple(d.get("strides", ()))
    if kind == "float":
        return "float"
    if _dtype_named(d) in own:
        return "the launch's own dtype"
    if kind == "tuple":
        return "tuple", tuple(_path_part(i, own) for i in d.get("items", []))
    return kind, d.get("value")


def gather(case: Case, kernel: str, outcomes: dict[str, Outcome], rules: Rules,
           pairs: list[tuple[str, str]] | None = None, fp64: Outcome | None = None,
           perturbed: Mapping[Rerun, Outcome] | None = None) -> Evidence:
    """Classify and compare every pair of outcomes (or the pairs given), and check each outcome.
    `fp64`: the float64 run, when there is one (it decides differences at the range edge); `perturbed`: the reruns
    so far, among them the reference's float64 runs on perturbed inputs, when there are all of them (the problem's
    measured scale, which decides flagged elements: see `sensitivity`), and the modelled runs (the GPU's arithmetic,
    which decides NaNs and infinities on one side: see `modelled`)."""
    guide = _guide(outcomes)
    exact = None
    if fp64 is not None and fp64.error is None and (guide is None or same_path(guide, fp64)):
        exact = view(fp64, case)
    measured = sensitivity.measure(case, perturbed) if perturbed is not None and sensitivity.measured(perturbed) \
        else None
    guided = view(guide, case) if guide is not None else None
    # (the interpreter opinion's own run, rounded to nearest in IEEE arithmetic, beside the modelled runs: never a
    # backend that plays another part, whatever trace it has)
    ieee = next((o for o in outcomes.values() if o.role.kind == "interpreter" and o.error is None
                 and o.trace is not None and not _reordered_or_upcast(o)), None)
    model = modelled.measure(case, perturbed, view(ieee, case) if ieee is not None else None) \
        if perturbed is not None and modelled.measured(perturbed) else None
    carry = carried.measure(case, perturbed, guided) if perturbed is not None and carried.measured(perturbed) \
        else None
    rules = rules.for_case(guided, exact, measured, model, carry)
    ev = Evidence(case, kernel, dict(outcomes), rules)
    if fp64 is not None:
        ev.extra[FLOAT64_RUN] = fp64
    if measured is not None and perturbed is not None:  # (each measured from `perturbed`)
        ev.extra.update({r: perturbed[r] for r in sensitivity.reruns()})
    if model is not None and perturbed is not None:
        ev.extra.update({r: perturbed[r] for r in modelled.reruns()})
    if carry is not None and perturbed is not None:
        ev.extra.update({r: perturbed[r] for r in carried.reruns()})
    for label, o in outcomes.items():
        if o.role.kind == COMPILE_ONLY:  # (no results of its own: `verdict` reads its error)
            continue
        report = ev.reports[label] = integrity.check(o, case, kernel, runs_kernel=o.role.kind != "reference")
        if rules.focus is not None:  # (a returned output not judged may be left unwritten)
            report.findings = [f for f in report.findings if f.kind != integrity.UNWRITTEN or rules.looks_at(f.target)]
    for a, b in pairs if pairs is not None else combinations(outcomes, 2):
        c = classify(outcomes[a], outcomes[b])
        ev.pairs.append(Pair(a, b, c, compare(outcomes[a], outcomes[b], case, rules) if c.judged else None))
    return ev
