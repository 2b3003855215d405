"""The rules one case is judged by.

`Declared` holds a check's own tolerances and resolves each target's tolerance once per check (a target, its
dtype, the operations that computed it and whether a reference is judged); `Rules` adds what one case brings
(the interpreter run that guides the scales, the float64 run, the problem's measured sensitivity); `TargetRule`
is what one compared target is judged by, resolved once when the comparison of that target starts (as
`torch.testing`'s pairs resolve their tolerances in their constructor)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.static_ops import ORDER_TAG
from ..core.tolerance import Tolerance, from_ops, resolve
from .carried import Carried
from .modelled import Modelled
from .sensitivity import Sensitivity
from .targets import View

TF32_OPS = ("dot:tf32", "tf32")


@dataclass(frozen=True)
class Declared:
    """A check's declared tolerances (`tolerance=`, `tolerances={path: ...}`), and whether it has a reference whose
    inputs can be perturbed (then elements within tolerance only by the dataflow scale wait for the measured one)."""

    tolerance: Any = None
    tolerances: Mapping[str, Any] = field(default_factory=dict)
    measurable: bool = False
    _resolved: dict[tuple[Any, ...], Tolerance] = field(default_factory=dict, compare=False, repr=False)

    def of(self, path: str) -> Any:
        """What the check declares for `path`: its own entry, else the check-wide tolerance, else None."""
        return self.tolerances.get(path, self.tolerance)

    def declares(self, path: str) -> bool:
        return self.tolerance is not None or self.tolerances.get(path) is not None

    def tolerance_for(self, path: str, dt: str, ops: set[str] | frozenset[str] | None,
                      reference: bool = False) -> Tolerance:
        """The tolerance of a target, from the ops the kernel ran and the target's dtype (arithmetic in a narrower
        type than the output's is not forgiven: accumulating in fp16 is a classic bug; a check whose kernel does it
        on purpose declares the tolerance it accepts); the check's own tolerances override it. Resolved once per
        (path, dtype, ops, reference) for the check."""
        key = (path, dt, None if ops is None else frozenset(ops), reference)
        tol = self._resolved.get(key)
        if tol is None:
            base = resolve(self.tolerance, from_ops(ops, dt, reference), dt)
            tol = self._resolved[key] = resolve(self.tolerances.get(path), base, dt)
        return tol


@dataclass(frozen=True)
class TargetRule:
    """How one target of one comparison is judged: its tolerance, the tolerance a tf32 `tl.dot` would have allowed
    (when the comparison judged one as IEEE float32), and whether the problem's measured scale decides elements that
    are within tolerance only by the dataflow scale."""

    path: str
    tolerance: Tolerance
    tf32: Tolerance | None = None
    measured: bool = False


@dataclass(frozen=True)
class Rules:
    """How to judge one case: the check's declared tolerances, and the interpreter runs that guide them."""

    declared: Declared = field(default_factory=Declared)
    guide: View | None = None  # an interpreter outcome of the case: ops, per-element scales, edges
    fp64: View | None = None  # the interpreter in float64 on upcast inputs: is a range-edge difference inherent?
    sensitivity: Sensitivity | None = None  # the problem's measured scale (tdiff.judge.sensitivity), once run
    modelled: Modelled | None = None  # the GPU's arithmetic run on the case (tdiff.judge.modelled), once run
    carried: Carried | None = None  # the kernel's rounding carried through `launch` (tdiff.judge.carried), once run
    # the targets judged (None: all); kernel reduction judges a candidate on the targets that diverged
    focus: frozenset[str] | None = None

    def looks_at(self, path: str) -> bool:
        """Whether `path` is judged (see `focus`)."""
        return self.focus is None or path in self.focus

    @property
    def measurable(self) -> bool:
        """The check has a reference to perturb: flagged elements wait for `sensitivity`."""
        return self.declared.measurable

    def for_case(self, guide: View | None, fp64: View | None, sensitivity: Sensitivity | None,
                 modelled: Modelled | None = None, carried: Carried | None = None) -> Rules:
        return replace(self, guide=guide, fp64=fp64, sensitivity=sensitivity, modelled=modelled, carried=carried)

    def target(self, path: str, dt: Any, ops: set[str] | None, reference: bool,
               tf32_ops: set[str] | None = None) -> TargetRule:
        """The `TargetRule` of `path` (dtype `dt`) in a comparison: resolved once, here."""
        tol = self.declared.tolerance_for(path, dt.name, ops, reference)
        tf32 = self.declared.tolerance_for(path, dt.name, tf32_ops, reference) if tf32_ops is not None else None
        return TargetRule(path, tol, tf32, self._measured(path, dt, tol, ops, reference))

    def _measured(self, path: str, dt: Any, tol: Tolerance, ops: set[str] | None, reference: bool) -> bool:
        """Whether elements within `tol` only by its dataflow scale wait for the problem's measured scale: against the
        check's reference, for a floating target whose tolerance tdiff chose (a declared one is the precision the
        check accepts), unless a tf32 `tl.dot` fed it (a precision the kernel chose, which perturbing the inputs does
        not model). (An undeclared narrowing cast is judged on its own: see `judge.compare`.)"""
        if tol.exact or not dt.is_float or not reference or not self.measurable:
            return False
        if self.declared.declares(path):
            return False
        return ops is None or not any(o in TF32_OPS for o in ops)

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


def _same_code(views: tuple[View, ...]) -> bool:
    """Whether the views are compiled runs of one kernel that compute with the same instructions: plain
    compiled or variants that change warps, stages, CTAs, registers or the config, not fp fusion (which
    decides whether `a * b + c` rounds once or twice), and that ran the kernel (its source is known)."""
    for v in views:
        role = v.outcome.role
        if role.kind != "compiled" or "fp_fusion" in role.lane or role.elsewhere:
            return False
        if not v.outcome.launches:
            return False
    return True
