"""What a backend returns: final storages, returned values, the error, and what the interpreter saw.

Plain data only, so outcomes cross process boundaries and can be compared anywhere.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend_spec import BackendSpec, Role
from .rerun import Rerun

CANARY = b"\xa5" * 4  # repeated over every guard band; an odd finite value in every float type (read + write shows)
GUARD_BYTES = 256  # before and after each storage; a multiple of every alignment Triton assumes


@dataclass
class StorageOutcome:
    """The final bytes of one input's whole allocation: guard band, storage, guard band."""

    name: str
    dtype: str
    guard: int
    data: bytes

    def guards(self) -> tuple[bytes, bytes]:
        return self.data[: self.guard], self.data[len(self.data) - self.guard :]


@dataclass
class ReturnedTensor:
    """A tensor the launch returned, as carrier values in its logical shape."""

    dtype: str
    shape: tuple[int, ...]
    values: np.ndarray


class Opaque:
    """A returned object that is not data (e.g. the CompiledKernel handle a launch returns): it
    counts as returning nothing."""

    def __init__(self, what: str = "") -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"<{self.what or 'not data'}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque)

    __hash__ = object.__hash__


@dataclass
class ErrorInfo:
    """Why a backend produced no outcome.

    kind: "exception", "crash" (the worker died), "timeout", "cuda" (the GPU context failed),
    "limitation" (a known gap of Triton's interpreter, see `tdiff.core.limitations`) or "setup" (tdiff
    could not run the case).
    """

    kind: str
    message: str
    where: str = ""
    details: str = ""
    limitation: str = ""  # for kind "limitation": the name of the known interpreter gap (tdiff.core.limitations)
    explained: str = ""  # for kind "limitation": what this occurrence is, where the limitation can tell (a builtin)

    def summary(self) -> str:
        loc = f" at {self.where}" if self.where else ""
        return f"{self.kind}{loc}: {self.message}"


@dataclass
class LaunchRecord:
    """One kernel launch made by the user's `launch` function."""

    kernel: str
    grid: tuple[int, int, int]
    args: list[dict[str, Any]]
    kwargs: dict[str, dict[str, Any]]
    config: dict[str, Any] | None = None  # launch options (num_warps, ...) passed besides the kernel's arguments
    module: str = ""


@dataclass
class Violation:
    """An access the interpreter stopped: outside every allocation, or into a guard band."""

    op: str  # "load", "store" or "atomic"
    program: tuple[int, int, int]
    count: int
    address: int
    where: str  # human description: "12 bytes after the storage of `y`" or "no allocation"
    line: str = ""


@dataclass
class UBEvent:
    """Undefined behaviour the interpreter saw, e.g. a float-to-int cast out of range."""

    what: str
    program: tuple[int, int, int]
    count: int
    example: str
    line: str = ""


@dataclass
class Race:
    """Two programs of one launch touched the same element without atomics, one of them writing.

    `first` and `second` are linear program ids; `index` the storage element of `target` (an input
    name, or a tensor `launch` allocated), `count` the elements with such conflicts."""

    target: str
    kind: str
    index: int
    first: int
    second: int
    launch: int
    count: int
    line: str = ""


class Precision(float):
    """A unit roundoff (the value) that remembers the narrowing float casts behind it: `casts` holds
    (`file:line: code`, dtype name) of each cast to a float type with fewer significand bits than its
    operand (`x.to(tl.bfloat16)` of a float32 value), as the interpreter's dataflow saw them. It rides
    the dataflow's precision shadow through memory into `Trace.precision` (see
    tdiff.execute.interpreter.dataflow), so a plain float works wherever it goes."""

    casts: tuple[tuple[str, str], ...] = ()

    def __new__(cls, value: float, casts: tuple[tuple[str, str], ...] = ()) -> Precision:
        self = super().__new__(cls, value)
        self.casts = tuple(casts)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return Precision, (float(self), self.casts)

    def __repr__(self) -> str:
        return f"Precision({float(self)!r}, casts={self.casts!r})"


def narrowing_casts(precision: float) -> tuple[tuple[str, str], ...]:
    """The narrowing casts a precision shadow remembers ((line, dtype) pairs; none for a plain float)."""
    return precision.casts if isinstance(precision, Precision) else ()


@dataclass
class Trace:
    """What the instrumented interpreter recorded during a run."""

    ops: set[str] = field(default_factory=set)
    # per input name: int32 array over storage elements; -1 = not written, else linear program id
    writers: dict[str, np.ndarray] = field(default_factory=dict)
    # per input name: elements written by more than one program (non-atomic stores)
    conflicts: dict[str, int] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    ub: list[UBEvent] = field(default_factory=list)
    programs_run: list[tuple[int, int, int]] = field(default_factory=list)
    sampled: bool = False
    atomics: bool = False
    shims: Counter[str] = field(default_factory=Counter)  # shim name -> uses (see tdiff.execute.interpreter.shims)
    # per input name or returned path, like `writers`: see tdiff.execute.interpreter.dataflow
    scales: dict[str, np.ndarray] = field(default_factory=dict)  # dataflow magnitude of each element
    overflow: dict[str, np.ndarray] = field(default_factory=dict)  # an overflow upstream of the element
    # decided by a comparison of computed values within tolerance (an argmax among near-ties; see dataflow)
    fragile: dict[str, np.ndarray] = field(default_factory=dict)
    edges: dict[str, np.ndarray] = field(default_factory=dict)  # inputs near the dtype's limits fed it
    # unit roundoff of the arithmetic behind it; a `Precision` where narrowing casts set it (their lines, dtypes)
    precision: dict[str, float] = field(default_factory=dict)
    loaded: dict[str, np.ndarray] = field(default_factory=dict)  # the storing program's largest input
    # a random-rounding run (execute.interpreter.rounding): per source line, samples of the values it computed, as
    # (values, their ulps); judge.sensitivity.growth reads where an ensemble's spread grows from them
    rounded: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    # a modelled run (`interpreter:gpu`, execute.interpreter.gpu_arith): what the GPU's arithmetic changed
    # ("tf32 dot", "fma contraction", "ftz")
    modelled: set[str] = field(default_factory=set)
    # "file:line: code" -> lanes where finite operands gave a non-finite result (a value left its dtype's range), in
    # the order the run met them (see tdiff.execute.interpreter.dataflow)
    overflowed: dict[str, int] = field(default_factory=dict)
    # ... where a product, quotient, exponential or narrowing cast of nonzero operands fell below the smallest normal
    underflowed: dict[str, int] = field(default_factory=dict)
    races: list[Race] = field(default_factory=list)
    # per input name: loads of its storage outside its view: (elements, first storage index, program, line)
    outside_reads: dict[str, tuple[int, int, int, str]] = field(default_factory=dict)
    sync: list[str] = field(default_factory=list)  # how programs synchronize: "atomic_cas", "atomic_xchg", ...
    empty_launches: int = 0  # launches whose grid had no program
    # tensors `launch` allocated that the kernel wrote: (label, elements written, returned or read back)
    scratch: list[tuple[str, int, bool]] = field(default_factory=list)
    # kernel coverage (see tdiff.execute.interpreter.coverage): "file:line:function" -> lines run, and the
    # lines of its statements
    lines: dict[str, set[int]] = field(default_factory=dict)
    executable: dict[str, frozenset[int]] = field(default_factory=dict)
    # "file:line: code" of each masked load without other= -> its masked-out lanes, which Triton leaves
    # undefined; `poisoned`: the run filled them with a poison value (see tdiff.execute.interpreter.undefined)
    undefined: dict[str, int] = field(default_factory=dict)
    poisoned: bool = False
    # "what at file:line: code" -> lanes whose result Triton leaves unspecified (integer division by zero,
    # shifts by the width or more, NaN in min/max under propagate_nan=NONE; see tdiff.execute.interpreter.unspecified);
    # `alternate`: the run gave those lanes another value
    unspecified: dict[str, int] = field(default_factory=dict)
    alternate: bool = False
    # programs run in batches (see tdiff.execute.interpreter.batched); "reason at file:line: code" -> launches
    # that ran program by program because a batch stopped there
    batched: int = 0
    unbatched: dict[str, int] = field(default_factory=dict)


@dataclass
class Outcome:
    """Everything one backend produced for one case."""

    backend: str
    storages: dict[str, StorageOutcome] = field(default_factory=dict)
    returned: Any = None
    error: ErrorInfo | None = None
    launches: list[LaunchRecord] = field(default_factory=list)
    trace: Trace | None = None
    static_ops: frozenset[str] = frozenset()  # the dots the launched kernels' source has (see tdiff.core.static_ops)
    seconds: float = 0.0
    output: str = ""
    notes: list[str] = field(default_factory=list)
    # what the backend plays in the case (compiled, interpreter, reference, ...): given by the backend that made the
    # outcome (its spec's, `BackendSpec.role`, or the part it plays), else the `spec`'s; `relabel` replaces it
    role: Role = field(default=None)  # type: ignore[assignment]  # (None only until __post_init__ sets it)
    compiles: int = 0  # specializations compiled by this run
    compile_seconds: float = 0.0
    cache_loads: int = 0  # specializations loaded from Triton's on-disk cache (compiled by an earlier run)
    compile_wait: float = 0.0  # seconds waiting for another process's compile of a specialization (compile_claims)
    # compile-only: launches not compiled, their every class compiled before in other combinations
    compile_skipped: int = 0
    # each launch's specialization (see tdiff.execute.launch_keys), where known
    launch_keys: tuple[Any, ...] | None = None
    device: str = ""  # e.g. "NVIDIA H100 80GB HBM3" for the compiled backend, "cpu" otherwise
    environment: str = ""  # another environment's versions (a `backend@python` lane), else ""
    # returned path -> where its storage came from: {"launch": i, "arg": key, "offset", "shape", "strides"}
    returned_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    # set by the judge of the case, beside the display label `backend`: the spec that made this outcome, and
    # for a rerun a verdict asked for, which one (`Rerun`: what changed in the run of which opinion)
    spec: BackendSpec | None = None
    rerun: Rerun | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def __post_init__(self) -> None:
        if self.role is None:
            if self.spec is None:
                raise TypeError(f"Outcome({self.backend!r}) needs the role its backend plays (role=spec.role) or "
                                "the spec that made it (spec=)")
            self.role = self.spec.role

    @classmethod
    def of(cls, spec: BackendSpec, **fields: Any) -> Outcome:
        """An outcome of `spec`, labelled and playing as the spec says."""
        return cls(spec.label, role=spec.role, **fields)

    def relabel(self, role: Role) -> None:
        """Give this outcome another role (and its label): a repeated opinion primed, a run standing in for another."""
        self.backend, self.role = role.label, role

    def grid(self) -> tuple[int, int, int] | None:
        return self.launches[-1].grid if self.launches else None
