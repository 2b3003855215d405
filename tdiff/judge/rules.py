"""The rules one case is judged by (`Rules`): the check's tolerances, the interpreter runs that guide them
(the operations, per-element scales, the float64 run), the problem's measured sensitivity (what lets a flagged
element pass), and the tolerance each target gets from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.backend_spec import in_other_environment, label_kind, label_lane
from ..core.static_ops import ORDER_TAG
from ..core.tolerance import Tolerance, from_ops, resolve
from .sensitivity import Sensitivity
from .targets import View


@dataclass
class Rules:
    """How to judge one case: the check's tolerances, and the interpreter run that guides them."""

    tolerance: Any = None
    tolerances: Mapping[str, Any] = field(default_factory=dict)
    guide: View | None = None  # an interpreter outcome of the case: ops, per-element scales, edges
    fp64: View | None = None  # the interpreter in float64 on upcast inputs: is a range-edge difference inherent?
    measurable: bool = False  # the check has a reference to perturb: flagged elements wait for `sensitivity`
    sensitivity: Sensitivity | None = None  # the problem's measured scale (tdiff.judge.sensitivity), once run

    def ops(self, *views: View) -> set[str] | None:
        """The operations the kernel ran, from the interpreter's trace; None when no interpreter ran
        (then every floating class is assumed, and tf32 where the source has a tf32 `tl.dot`)."""
        found: set[str] | None = None
        for v in ([self.guide] if self.guide is not None else []) + list(views):
            t = v.outcome.trace
            if t is not None:
                found = (found or set()) | t.ops
        if found is None:
            static = set().union(*(getattr(v.outcome, "static_ops", frozenset()) for v in views))
            if views and _same_code(views) and ORDER_TAG not in static:
                return set()  # compiled variants of an order-free kernel run the same operations: bit for bit
            dots = {k for k in static if k.startswith("dot")}
            if dots:
                found = {"farith", "transcendental", "reduce", *dots}
        return found

    def tolerance_for(self, path: str, dt: str, ops: set[str] | None, reference: bool = False) -> Tolerance:
        """The tolerance of a target, from the ops the kernel ran and the target's dtype (arithmetic
        in a narrower type than the output's is not forgiven: accumulating in fp16 is a classic bug;
        a check whose kernel does it on purpose declares the tolerance it accepts); the check's own
        tolerances override it."""
        base = resolve(self.tolerance, from_ops(ops, dt, reference), dt)
        return resolve(self.tolerances.get(path), base, dt)


def _same_code(views: tuple[View, ...]) -> bool:
    """Whether the views are compiled runs of one kernel that compute with the same instructions: plain
    compiled or variants that change warps, stages, CTAs, registers or the config, not fp fusion (which
    decides whether `a * b + c` rounds once or twice), and that ran the kernel (its source is known)."""
    for v in views:
        label = v.outcome.backend
        if label_kind(label) != "compiled" or "fp_fusion" in label_lane(label) or in_other_environment(label):
            return False
        if not v.outcome.launches:
            return False
    return True
