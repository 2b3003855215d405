"""Reruns a verdict asks for before it decides: what changes (`how`) in the run of which opinion (`of`).

A `Rerun` is the key of `Evidence.extra` and what `Verdict.needs` lists; the runner turns it into a backend spec
(`CaseJudge.rerun_spec`) and, for a perturbed rerun, a case (`judge.sensitivity.perturbed_case`). Its text (`str`) is
for people only: `zero-fill:compiled`, `fp64`, `perturbed#3`.
"""

from __future__ import annotations

from dataclasses import dataclass

AGAIN = "again"  # the same opinion once more: does it agree with itself?
ZERO_FILL = "zero-fill"  # masked-out lanes of loads without other= read as 0 (NVIDIA's fill) instead of poison
ALT_UNSPECIFIED = "alt-unspecified"  # results Triton leaves unspecified computed the other allowed way
REVERSED = "reversed"  # the interpreter's programs in reversed order
SHUFFLED = "shuffled"  # ... in a shuffled order
FP64 = "fp64"  # the interpreter on inputs upcast to float64 (a third opinion where there is no reference)
REFERENCE = "reference"  # the check's reference, run only when two opinions disagree (metamorphic)
# the check's reference in float64 on the case's inputs perturbed by one rounding at their precision (`k` > 0: which
# perturbation; 0: unperturbed): what the problem allows (see tdiff.judge.sensitivity)
PERTURBED = "perturbed"
# the interpreter with every floating result rounded up or down at random (`k` > 0: which run of the ensemble; 0:
# rounded to nearest, the ensemble's centre): what the kernel's own float program produces
# (see tdiff.execute.interpreter.rounding, tdiff.judge.sensitivity.ensemble)
ROUNDED = "rounded"
# the interpreter computing as compiled Triton does on NVIDIA GPUs (tf32 dots, fused multiply-adds, `div.full`
# division, flushed subnormals), rounded to nearest (`k` = 0) or at random (`k` > 0): which NaNs and infinities
# the GPU's arithmetic makes of the case (see tdiff.execute.interpreter.gpu_arith, tdiff.judge.modelled)
MODELLED = "modelled"
# the interpreter with every value the kernel computes moved within its admissible rounding where it is stored (`k`
# > 0: which run): how far what `launch` computes from the kernel's stores moves (see tdiff.judge.carried)
CARRIED = "carried"

#: program orders an interpreter rerun may take
ORDERS = (REVERSED, SHUFFLED)
#: reruns of one opinion (they name it) and reruns of their own
OF_AN_OPINION = (AGAIN, ZERO_FILL, ALT_UNSPECIFIED, *ORDERS)
STANDALONE = (FP64, REFERENCE, PERTURBED, ROUNDED, MODELLED, CARRIED)
#: standalone reruns that take an index `k`
INDEXED = (PERTURBED, ROUNDED, MODELLED, CARRIED)


@dataclass(frozen=True)
class Rerun:
    """One rerun: `how` (one of `OF_AN_OPINION` or `STANDALONE`) and, for the former, the label of the outcome it
    reruns (`of`); for a perturbed rerun, which perturbation (`k`)."""

    how: str
    of: str | None = None
    k: int = 0

    def __post_init__(self) -> None:
        if self.how in OF_AN_OPINION and not self.of:
            raise ValueError(f"a {self.how} rerun names the opinion it reruns")
        if self.how in STANDALONE and self.of is not None:
            raise ValueError(f"a {self.how} rerun stands alone (of={self.of!r})")
        if self.how not in OF_AN_OPINION and self.how not in STANDALONE:
            raise ValueError(f"unknown rerun {self.how!r}: {', '.join(OF_AN_OPINION + STANDALONE)}")
        if self.k and self.how not in INDEXED:
            raise ValueError(f"only a {' or '.join(INDEXED)} rerun has an index (k={self.k})")

    @property
    def order(self) -> str | None:
        """The program order it runs the interpreter in, if it is an order rerun."""
        return self.how if self.how in ORDERS else None

    def __str__(self) -> str:
        if self.how in INDEXED:
            return f"{self.how}#{self.k}"
        return self.how if self.of is None else f"{self.how}:{self.of}"


FLOAT64_RUN = Rerun(FP64)
REFERENCE_RUN = Rerun(REFERENCE)
