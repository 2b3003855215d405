"""What comparing two outcomes of one case finds: the `Comparison`, its `Mismatch`es (one per target
and way they disagree), and the elements let pass at the edge of the range or as near-ties (`Forgiven`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.outcome import Outcome
from ..core.tolerance import Tolerance


@dataclass
class Mismatch:
    """One way two outcomes disagree on a target."""

    target: str  # input name, or a returned path such as "returned[0]"
    kind: str  # "values" or "structure"
    message: str
    side: str | None = None
    count: int = 0
    total: int = 0
    special: int = 0  # mismatches where a side is NaN or infinite
    max_abs: float = 0.0
    max_abs_index: tuple[int, ...] = ()
    max_rel: float = 0.0
    max_rel_index: tuple[int, ...] = ()
    examples: list[tuple[tuple[int, ...], Any, Any]] = field(default_factory=list)
    programs: list[tuple[int, int]] = field(default_factory=list)  # (linear program id, elements)
    tolerance: str = ""
    mask: np.ndarray | None = None  # mismatch positions, shaped like the target
    tol: Tolerance | None = None
    scale: np.ndarray | None = None  # each element's dataflow magnitude (the tolerance's `scale` term)
    edge_pending: int = 0  # elements at the range edge that the float64 run may show to be legitimate
    measure_pending: int = 0  # flagged elements that wait for the problem's measured scale (judge.sensitivity)
    model_pending: int = 0  # NaN or infinite elements that wait for the modelled runs (judge.modelled)
    carry_pending: int = 0  # elements of an output `launch` computed that wait for the carried runs (judge.carried)
    within_tf32: bool = False  # every element would pass with the tf32 allowance this pair was not given
    narrowing: tuple[tuple[str, str], ...] = ()  # undeclared narrowing casts (line, dtype) that fed the target

    @property
    def share(self) -> float:
        return self.count / self.total if self.total else 0.0


@dataclass
class Forgiven:
    """Elements of a target let pass beyond the strict tolerance: their exact result does not fit the dtype
    (`range-edge`), or the difference lies within the problem's measured sensitivity (`measured`, see
    `tdiff.judge.sensitivity`), or, where nothing could measure it (`unmeasured` says why), a flag marked them."""

    target: str
    count: int
    example: tuple[tuple[int, ...], float, float]
    coarse: bool = False  # decided without the interpreter's dataflow (inputs at the limits somewhere)
    why: str = "range-edge"  # "fragile": decided by a comparison of computed values within tolerance; "measured"
    flags: tuple[str, ...] = ()  # the flags that marked them (named in the caveat; none passes an element)
    spread: float = 0.0  # measured: the reference's spread at the example
    measured: int = 0  # measured: over how many input perturbations
    unmeasured: str = ""  # forgiven by a flag because nothing measured the problem's scale: why
    detail: str = ""  # modelled: which runs give each side's value


@dataclass
class Comparison:
    a: Outcome
    b: Outcome
    mismatches: list[Mismatch] = field(default_factory=list)
    forgiven: list[Forgiven] = field(default_factory=list)
    coarse: list[str] = field(default_factory=list)  # targets judged with the coarse scale
    closeness: float = 0.0  # the largest |a - b| / allowed over finite float elements (>= 1: beyond tolerance)
    tf32_from_source: bool = False  # no interpreter trace: tf32 allowed because the source has a tf32 tl.dot
    ieee_dots: bool = False  # the kernel's tf32 tl.dot judged as IEEE float32: neither side ran tf32
    # by target: elements that differ beyond what the problem's measured scale allows (judge.sensitivity); an
    # ensemble of the kernel's own float program under random rounding says whether it explains them
    beyond_problem: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def within_tf32(self) -> bool:
        """Disagreeing only by what tf32's allowance (not given to this pair) would forgive."""
        return self.ieee_dots and bool(self.mismatches) and all(m.within_tf32 for m in self.mismatches)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def kinds(self) -> set[str]:
        return {m.kind for m in self.mismatches}

    def summary(self) -> str:
        if self.ok:
            return f"{self.a.backend} and {self.b.backend} agree"
        return "; ".join(m.message for m in self.mismatches[:4]) + (
            f"; and {len(self.mismatches) - 4} more" if len(self.mismatches) > 4 else "")
