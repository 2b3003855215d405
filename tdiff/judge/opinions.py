"""Which opinions a check asks for on every case, and which of them are compared.

With a GPU: the compiled backend and the interpreter; without one: the interpreter, and (unless
`--tdiff-compile-only off`) the compile-only opinion, which compiles the specializations for a GPU and is
compared with nothing (a compile error fails the case). A declared reference is always an opinion too, on
every case and every machine. Without a reference and without a GPU, the interpreter is compared with itself
in reversed program order (its trace still sees races, out-of-bounds accesses and undefined behaviour in one
run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

from ..core import kernels
from ..core.backend_spec import COMPILE_ONLY, COMPILE_ONLY_ARCH, METAMORPHIC, BackendSpec, default_backends, labels
from ..core.declared import DeclaredCheck

REFERENCE = BackendSpec("reference")
COMPILE_ONLY_SPEC = BackendSpec(COMPILE_ONLY)
#: what the compile-only opinion adds to the note of a check without a GPU
COMPILE_ONLY_NOTE = (f" (compile-only: the specializations the cases launch were compiled for sm_{COMPILE_ONLY_ARCH}, "
                     "each class once, not run; a kernel the compiler rejects fails)")


@dataclass(frozen=True)
class Opinions:
    backends: tuple[BackendSpec, ...]  # the backends run on every case (parsed where the run or the check named them)
    pairs: tuple[tuple[int, int], ...]  # which of them are compared (indices into backends)
    note: str | None = None  # why these (e.g. no GPU)
    on_divergence: tuple[BackendSpec, ...] = ()  # third opinions run only when the others disagree (the reference)

    def __post_init__(self) -> None:
        object.__setattr__(self, "backends", tuple(self.backends))
        object.__setattr__(self, "on_divergence", tuple(self.on_divergence))
        if not all(isinstance(b, BackendSpec) for b in (*self.backends, *self.on_divergence)):
            raise TypeError("Opinions hold BackendSpecs, parsed where users named them (the run's options, @check)")

    @property
    def labels(self) -> tuple[str, ...]:
        """The backends as displayed."""
        return tuple(b.label for b in self.backends)

    @property
    def reference_on_divergence(self) -> bool:
        return REFERENCE in self.on_divergence

    @property
    def kinds(self) -> list[str]:
        return [b.kind for b in self.backends]

    def describe(self) -> str:
        """What a pass means: the opinions compared, e.g. "compiled, interpreter (+trace), reference"."""
        return ", ".join(b.label + (" (+trace)" if b.kind == "interpreter" and b.order == "forward" else "")
                         for b in self.backends)

    def without_compiled(self) -> Opinions | None:
        """The same opinions minus those that compile (for cases past the compile budget); None if
        fewer than two would remain."""
        keep = [i for i, k in enumerate(self.kinds) if k != "compiled"]
        if len(keep) < 2:
            return None
        index = {old: new for new, old in enumerate(keep)}
        pairs = tuple((index[a], index[b]) for a, b in self.pairs if a in index and b in index)
        return Opinions(tuple(self.backends[i] for i in keep), pairs, self.note, self.on_divergence)


#: at most this many autotune configs are compared with each other per check
MAX_CONFIGS = 4
#: the option variants of a kernel that is not autotuned
VARIANT_SPECS = (BackendSpec("compiled"), *(BackendSpec("compiled", launch=(option,))
                                           for option in (("num_warps", 2), ("num_warps", 8), ("num_stages", 1))))
OPTION_VARIANTS = labels(VARIANT_SPECS)  # as displayed: compiled, compiled[num_warps=2], ...


def metamorphic(check: DeclaredCheck) -> Opinions:
    """Compiled against compiled at GPU speed: an autotuned kernel's configs with each other (the
    check's `configs=`, or the first `MAX_CONFIGS`), else a few launch-option variants; no reference
    or interpreter on every case: the verdict of a divergence calls the interpreter (in float64) as
    the third opinion."""
    n = len(kernels.configs(check.kernel))
    if n >= 2:
        indices = list(check.configs) if check.configs else list(range(n))
        chosen = [BackendSpec("compiled", config=i) for i in indices[:MAX_CONFIGS]]
        note = f"metamorphic: autotune configs {', '.join(map(str, indices[:MAX_CONFIGS]))} of {n} compared"
    else:
        chosen = list(VARIANT_SPECS)
        note = "metamorphic: launch-option variants compared"
    if len(chosen) < 2:
        chosen = list(VARIANT_SPECS)
    third = (REFERENCE,) if check.reference is not None else ()
    note += "; the reference is asked only when they disagree" if third else "; no reference: a disagreement is " \
        "judged against the interpreter in float64"
    return Opinions(tuple(chosen), tuple(combinations(range(len(chosen)), 2)), note, third)


def choose(check: DeclaredCheck, backends: tuple[BackendSpec, ...] | None, gpu_available: Callable[[], bool],
           compile_only: bool = False) -> Opinions:
    """The opinions for a check: its own `backends=`, else the run's, else the machine's default,
    plus its reference. Where the default skips the compiled backend (no GPU), `compile_only` adds the
    compile-only opinion (the specializations compiled for a GPU, not run), which is compared with nothing:
    a case fails where the compiler rejects the kernel. One named among the backends is added the same way."""
    named = list(check.backends or backends or ())
    chosen = [b for b in named if b.kind != COMPILE_ONLY]
    compile_alone = [b for b in named if b.kind == COMPILE_ONLY][:1]
    note = None
    if [b.kind for b in chosen] == [METAMORPHIC]:
        if gpu_available():
            return metamorphic(check)
        chosen = []
        note = "no CUDA GPU: the metamorphic profile (compiled variants) was not run"
    if not chosen:
        gpu = gpu_available()
        chosen = list(default_backends(gpu))
        if not gpu:
            note = (note + "; " if note else "") + "no CUDA GPU: the compiled backend was skipped"
            if compile_only and not compile_alone:
                compile_alone = [COMPILE_ONLY_SPEC]
    if compile_alone and note:
        note += COMPILE_ONLY_NOTE
    kinds = [s.kind for s in chosen]
    if check.reference is not None and "reference" not in kinds:
        chosen.append(REFERENCE)
    if len(chosen) == 1:
        chosen.append(chosen[0].with_(order="reversed") if kinds[0] == "interpreter" else BackendSpec("interpreter"))
        if note:
            note += ("; no reference: the interpreter was compared with itself in reversed program order (finds "
                     "races, out-of-bounds accesses, undefined behaviour and crashes, not wrong values)")
    elif note and check.reference is not None:
        note += "; the interpreter was compared with the check's reference"
    # (compile-only holds no results: it runs on every case, after the opinions compared)
    return Opinions((*chosen, *compile_alone), tuple(combinations(range(len(chosen)), 2)), note)
