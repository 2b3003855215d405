"""What an outcome holds, as comparable targets: built once per outcome and used by comparison,
integrity checks, verdicts, shrinking, reports and reproducers.

A target is an input's view (by input name; its storage is the input's allocation) or a tensor
the launch returned (by path: "returned", "returned[0]", "returned['y']"). Returned values that are
not tensors are leaves compared as numbers; the returned value's shape (tuple lengths, dict keys,
tensor or number or nothing) is its structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import dtypes
from ..core.case import Case, TensorArg
from ..core.outcome import CANARY, Opaque, Outcome, ReturnedTensor, StorageOutcome


@dataclass
class Target:
    """One target's values in one outcome, and what the interpreter recorded about each element."""

    path: str
    dtype: dtypes.DType
    values: np.ndarray  # float64, shaped like the view or returned tensor
    raw: np.ndarray  # carrier values (bits for bf16 / fp8)
    writers: np.ndarray | None = None  # linear program that last stored each element (-1: none)
    scale: np.ndarray | None = None  # dataflow magnitude of each element (see tdiff.execute.interpreter.dataflow)
    overflow: np.ndarray | None = None  # an overflow happened upstream of the element
    fragile: np.ndarray | None = None  # decided by a comparison of computed values within tolerance
    edge: np.ndarray | None = None  # how close the inputs that fed it were to their dtype's limits
    precision: float = 0.0  # unit roundoff of the narrowest arithmetic behind it (0: unknown)
    loaded: np.ndarray | None = None  # the largest input magnitude the program that stored it loaded

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)


@dataclass
class View:
    """An outcome as targets (tensors by path) and leaves (returned numbers, strings, None)."""

    outcome: Outcome
    targets: dict[str, Target] = field(default_factory=dict)
    leaves: dict[str, Any] = field(default_factory=dict)
    structure: Any = None  # see `structure_of`
    input_views: dict[str, str] = field(default_factory=dict)  # returned path -> the input it is a view of

    @property
    def label(self) -> str:
        return self.outcome.backend


def structure_of(value: Any, inputs: Any = (), path: str = "returned") -> Any:
    """A comparable description of a returned value's shape: nested tuples of kinds. A tensor that
    is a view of a case input (`inputs`: such paths) counts as nothing: an in-place result, compared
    through the input's storage whether it is returned or not."""
    if isinstance(value, ReturnedTensor):
        return ("nothing",) if path in inputs else ("tensor", value.dtype, tuple(value.shape))
    if isinstance(value, (tuple, list)):
        return ("sequence", tuple(structure_of(v, inputs, f"{path}[{i}]") for i, v in enumerate(value)))
    if isinstance(value, dict):
        return ("dict", tuple((k, structure_of(v, inputs, f"{path}[{k!r}]")) for k, v in value.items()))
    if value is None or isinstance(value, Opaque):
        return ("nothing",)
    if isinstance(value, bool):
        return ("bool",)
    if isinstance(value, (int, float)):
        return ("number",)
    return ("other", type(value).__name__)


def describe_structure(s: Any) -> str:
    kind = s[0]
    if kind == "tensor":
        return f"a {s[1]}{list(s[2])} tensor"
    if kind == "sequence":
        return f"a sequence of {len(s[1])} (" + ", ".join(describe_structure(x) for x in s[1]) + ")"
    if kind == "dict":
        return "a dict {" + ", ".join(f"{k!r}: {describe_structure(v)}" for k, v in s[1]) + "}"
    if kind == "nothing":
        return "nothing"
    if kind in ("bool", "number"):
        return f"a {kind}"
    return f"a {s[1]}"


def _storage_values(s: StorageOutcome) -> np.ndarray:
    return np.frombuffer(s.data, np.uint8)[s.guard : len(s.data) - s.guard].view(dtypes.dtype(s.dtype).carrier)


def _from_trace(o: Outcome, key: str, index: np.ndarray | None) -> dict[str, np.ndarray | None]:
    """The trace's per-element maps for a target: storage-level maps (inputs) picked at the view's
    storage indices, or maps already shaped like a returned tensor."""
    t = o.trace
    out: dict[str, np.ndarray | None] = {}
    for attr, src in (("writers", "writers"), ("scale", "scales"), ("overflow", "overflow"), ("edge", "edges"),
                      ("loaded", "loaded"), ("fragile", "fragile")):
        a = getattr(t, src).get(key) if t is not None else None
        if a is not None and index is not None:
            a = a[index]
        out[attr] = a
    return out


def _precision(o: Outcome, key: str) -> float:
    return o.trace.precision.get(key, 0.0) if o.trace is not None else 0.0


def view(outcome: Outcome, case: Case) -> View:
    """The outcome as targets (computed once per outcome and case)."""
    cached: tuple[Case, View] | None = outcome.__dict__.get("_tdiff_view")
    if cached is not None and cached[0] is case:
        return cached[1]
    v = View(outcome)
    tensors = case.tensors()
    for name, arg in tensors.items():
        s = outcome.storages.get(name)
        if s is None:
            continue
        dt = dtypes.dtype(s.dtype)
        raw = _storage_values(s)[arg.view_index()]
        extra = _from_trace(outcome, name, arg.view_index())
        v.targets[name] = Target(name, dt, dtypes.as_float64(raw, dt), raw, **extra,
                                 precision=_precision(outcome, name))
    _visit(outcome.returned, "returned", v)
    for path, where in outcome.returned_args.items():
        if where.get("input"):
            v.input_views[path] = where["input"]
    v.structure = structure_of(outcome.returned, v.input_views)
    outcome.__dict__["_tdiff_view"] = (case, v)
    return v


def _visit(value: Any, path: str, v: View) -> None:
    if isinstance(value, ReturnedTensor):
        dt = dtypes.dtype(value.dtype)
        extra = _from_trace(v.outcome, path, None)
        for k, a in list(extra.items()):
            if a is not None and a.shape != tuple(value.shape):
                extra[k] = None
        v.targets[path] = Target(path, dt, dtypes.as_float64(value.values, dt), value.values, **extra,
                                 precision=_precision(v.outcome, path))
    elif isinstance(value, (tuple, list)):
        for i, x in enumerate(value):
            _visit(x, f"{path}[{i}]", v)
    elif isinstance(value, dict):
        for k, x in value.items():
            _visit(x, f"{path}[{k!r}]", v)
    else:
        v.leaves[path] = value


# ------------------------------------------------------------------ storages

def storage_bytes(s: StorageOutcome) -> np.ndarray:
    """The storage's bytes, guard bands excluded, as a read-only uint8 array (no copy)."""
    return np.frombuffer(s.data, np.uint8)[s.guard : len(s.data) - s.guard]


def storage_values(s: StorageOutcome) -> np.ndarray:
    """Carrier values of a storage outcome (guard bands excluded)."""
    return storage_bytes(s).view(dtypes.dtype(s.dtype).carrier)


def guard_pattern(size: int) -> bytes:
    return (CANARY * (size // len(CANARY) + 1))[:size]


def unchanged(s: StorageOutcome, arg: TensorArg) -> bool:
    """Whether a storage holds exactly the bytes the case put in."""
    if dtypes.dtype(s.dtype).name != arg.dtype:
        return False
    return bool(np.array_equal(storage_bytes(s), np.ascontiguousarray(arg.storage).view(np.uint8).reshape(-1)))


def fill_value(dt: dtypes.DType) -> np.ndarray:
    """What `torch.empty` leaves in new memory under tdiff (see `plan.deterministic_empty`): a NaN
    with tdiff's payload, the largest integer, True."""
    from ..execute.plan import FILL_BITS

    if dt.is_float and dt.torch in FILL_BITS:
        signed, value = FILL_BITS[dt.torch]
        return np.array([value], dtype=np.dtype(f"i{dt.itemsize}")).view(dt.carrier)
    if dt.is_float:
        return dtypes.from_float64(np.array([np.nan]), dt)
    if dt.kind == "bool":
        return np.array([True])
    return np.array([dt.max], dtype=dt.carrier)


def is_fill(t: Target) -> np.ndarray:
    """Elements of a target that hold the fill pattern, bit for bit (a NaN a kernel computed, or one
    copied from an input, has other bits: tdiff draws NaNs with a payload)."""
    fill = fill_value(t.dtype)
    raw = np.ascontiguousarray(t.raw)
    if raw.dtype.kind == "f":
        bits = np.dtype(f"u{raw.dtype.itemsize}")
        same_bits: np.ndarray = raw.view(bits) == fill.view(bits)[0]
        return same_bits
    same: np.ndarray = raw == fill[0]
    return same
