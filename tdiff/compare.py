"""Comparing two outcomes storage by storage: values within tolerance, gaps and guard bands untouched."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from . import dtypes
from .case import Case, TensorArg
from .outcome import CANARY, Outcome, ReturnedTensor, StorageOutcome
from .tolerance import Tolerance, from_ops, resolve


@dataclass
class Mismatch:
    """One way two outcomes disagree, or one outcome broke something it should not have."""

    target: str  # input name, or a returned path such as "returned[0]"
    kind: str  # "values", "gap", "guard", "shape", "structure", "error"
    message: str
    side: str | None = None  # for gap/guard: the backend that did it
    count: int = 0
    total: int = 0
    special: int = 0  # mismatches where a side is NaN or infinite
    max_abs: float = 0.0
    max_abs_index: tuple = ()
    max_rel: float = 0.0
    max_rel_index: tuple = ()
    examples: list[tuple[tuple, Any, Any]] = field(default_factory=list)
    programs: list[tuple[int, int]] = field(default_factory=list)  # (linear program id, elements)
    tolerance: str = ""
    mask: np.ndarray | None = None  # mismatch positions, shaped like the view
    tol: Tolerance | None = None

    @property
    def share(self) -> float:
        return self.count / self.total if self.total else 0.0


@dataclass
class Comparison:
    a: Outcome
    b: Outcome
    mismatches: list[Mismatch] = field(default_factory=list)

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


# ------------------------------------------------------------------ element comparison

def _finite_max(x: np.ndarray) -> float:
    f = np.abs(x[np.isfinite(x)])
    return float(f.max()) if f.size else 0.0


def close(a: np.ndarray, b: np.ndarray, tol: Tolerance, raw_a: np.ndarray | None = None,
          raw_b: np.ndarray | None = None, input_scale: float = 0.0, terms: float = 1.0) -> np.ndarray:
    """Boolean array: True where a and b agree under `tol` (a, b as float64; raw_* carrier bits).

    `input_scale` is the largest finite magnitude among the case's floating inputs; `terms` the
    growth of rounding with the terms summed into each output (see `reduction_factor`).
    """
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if tol.exact:
        if raw_a is not None and raw_b is not None:
            same = raw_a.view(np.uint8).reshape(*raw_a.shape, -1) == raw_b.view(np.uint8).reshape(*raw_b.shape, -1)
            same = same.all(axis=-1)
        else:
            same = (a == b) & (np.signbit(a) == np.signbit(b))
        return same | (nan_a & nan_b)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
        scale = min(_finite_max(a), _finite_max(b))
        allowed = (tol.atol + tol.rtol * np.minimum(np.abs(a), np.abs(b)) + tol.scale * scale
                   + (tol.inputs * input_scale + tol.products * input_scale * input_scale) * terms)
        ok = diff <= allowed
    both_inf = np.isinf(a) & np.isinf(b)
    ok = np.where(both_inf | (np.isinf(a) != np.isinf(b)), a == b, ok)
    ok = np.where(nan_a | nan_b, nan_a & nan_b, ok)
    if tol.signed_zero:
        zeros = (a == 0) & (b == 0)
        ok = np.where(zeros, np.signbit(a) == np.signbit(b), ok)
    return ok


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def value_mismatch(target: str, a: np.ndarray, b: np.ndarray, dt: dtypes.DType, tol: Tolerance,
                   writers: np.ndarray | None, raw_a: np.ndarray | None = None,
                   raw_b: np.ndarray | None = None, names: tuple[str, str] = ("a", "b"),
                   input_scale: float = 0.0, terms: float = 1.0) -> Mismatch | None:
    """A `Mismatch` if the view values a and b (float64, same shape) disagree, else None."""
    ok = close(a, b, tol, raw_a, raw_b, input_scale, terms)
    if ok.all():
        return None
    bad = ~ok
    count = int(bad.sum())
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        special = bad & ~(np.isfinite(a) & np.isfinite(b))  # NaN or inf on one side, or infinities differ
        finite = bad & ~special
        absd = np.where(finite, np.abs(a - b), 0.0)
        rel = np.where(finite & (np.abs(b) > 0), absd / np.where(np.abs(b) > 0, np.abs(b), 1.0), 0.0)
        rel = np.where(finite & (b == 0) & (absd > 0), np.inf, rel)

    def at(i: np.ndarray | tuple) -> tuple:
        return tuple(int(v) for v in i)

    i_abs = at(np.unravel_index(int(np.argmax(absd)), a.shape)) if a.ndim else ()
    i_rel = at(np.unravel_index(int(np.argmax(rel)), a.shape)) if a.ndim else ()
    examples = []
    for idx in (list(zip(*np.nonzero(bad))) if a.ndim else [()])[:5]:
        idx = at(idx)
        examples.append((idx, float(a[idx]), float(b[idx])))
    programs: list[tuple[int, int]] = []
    if writers is not None and writers.shape == a.shape:
        programs = sorted(Counter(int(p) for p in writers[bad].reshape(-1)).items())
    parts = [f"`{target}`: {count} of {a.size} elements differ ({100 * count / max(a.size, 1):.3g}%)"]
    if finite.any():
        parts.append(f"largest difference {_fmt(float(absd[i_abs]))} at {i_abs}: "
                     f"{names[0]}={_fmt(float(a[i_abs]))}, {names[1]}={_fmt(float(b[i_abs]))}")
    if special.any():
        j = at(np.argwhere(special)[0]) if a.ndim else ()
        parts.append(f"{int(special.sum())} NaN/inf mismatch(es), first at {j}: "
                     f"{names[0]}={_fmt(float(a[j]))}, {names[1]}={_fmt(float(b[j]))}")
    msg = "; ".join(parts)
    return Mismatch(
        target, "values", msg, count=count, total=int(a.size), special=int(special.sum()),
        max_abs=float(absd.max()) if absd.size else 0.0, max_abs_index=i_abs,
        max_rel=float(rel.max()) if rel.size else 0.0, max_rel_index=i_rel,
        examples=examples, programs=programs, tolerance=tol.describe(), mask=bad, tol=tol,
    )


# ------------------------------------------------------------------ storages

def storage_bytes(s: StorageOutcome) -> np.ndarray:
    """The storage's bytes, guard bands excluded, as a read-only uint8 array (no copy)."""
    return np.frombuffer(s.data, np.uint8)[s.guard : len(s.data) - s.guard]


def same_bytes(a: StorageOutcome, b: StorageOutcome) -> bool:
    """Whether two storages (guard bands excluded) hold identical bytes of the same dtype."""
    if a.dtype != b.dtype or len(a.data) != len(b.data) or a.guard != b.guard:
        return False
    return bool(np.array_equal(storage_bytes(a), storage_bytes(b)))


def storage_values(s: StorageOutcome) -> np.ndarray:
    """Carrier values of a storage outcome (guard bands excluded)."""
    return storage_bytes(s).view(dtypes.dtype(s.dtype).carrier)


def view_values(s: StorageOutcome, arg: TensorArg) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, carrier values) of the case's view into a storage outcome."""
    dt = dtypes.dtype(s.dtype)
    raw = storage_values(s)[arg.view_index()]
    return dtypes.as_float64(raw, dt), raw


@lru_cache(maxsize=8)
def _guard_pattern(size: int) -> bytes:
    return (CANARY * (size // len(CANARY) + 1))[:size]


def guard_damage(s: StorageOutcome) -> list[str]:
    """Descriptions of guard-band bytes that no longer hold the canary."""
    out = []
    before, after = s.guards()
    pattern = _guard_pattern(s.guard)
    for label, band in (("before", before), ("after", after)):
        if band == pattern:
            continue
        diff = [i for i in range(len(band)) if band[i] != pattern[i]]
        if label == "before":
            dist = [s.guard - i for i in diff]
            out.append(f"{len(diff)} byte(s) overwritten {min(dist)} to {max(dist)} bytes before the storage")
        else:
            out.append(f"{len(diff)} byte(s) overwritten {min(diff)} to {max(diff)} bytes after the end of "
                       f"the storage")
    return out


def gap_damage(s: StorageOutcome, arg: TensorArg) -> tuple[int, list[int]]:
    """(count, first indices) of storage elements outside the view whose bytes changed."""
    dt = dtypes.dtype(s.dtype)
    if dt.name == arg.dtype:
        now = storage_bytes(s)
        before = np.ascontiguousarray(arg.storage).view(np.uint8).reshape(-1)
        if np.array_equal(now, before):
            return 0, []  # the storage is byte for byte what went in
    mask = ~arg.in_view()
    if not mask.any():
        return 0, []
    if dt.name != arg.dtype:  # an upcast run: compare values, not bytes
        now = dtypes.as_float64(storage_values(s), dt)
        before = dtypes.as_float64(arg.storage, arg.dt)
        changed = mask & ~((now == before) | (np.isnan(now) & np.isnan(before)))
    else:
        n = arg.storage.size
        changed = mask & (now.reshape(n, -1) != before.reshape(n, -1)).any(axis=1)
    idx = np.nonzero(changed)[0]
    return int(idx.size), [int(i) for i in idx[:5]]


def integrity(outcome: Outcome, case: Case) -> list[Mismatch]:
    """What one outcome broke on its own: accesses outside every allocation (seen by the
    interpreter), guard bands, and bytes outside every input's view."""
    out = []
    if outcome.error is not None:
        return out
    for v in (outcome.trace.violations if outcome.trace else []):
        line = f" ({v.line})" if v.line else ""
        out.append(Mismatch(
            "", "oob", f"{outcome.backend}: program {v.program} tried to {v.op} {v.count} element(s) outside "
            f"every allocation, first at {v.where}{line}", side=outcome.backend, count=v.count))
    for name, arg in case.tensors().items():
        s = outcome.storages.get(name)
        if s is None:
            continue
        for text in guard_damage(s):
            out.append(Mismatch(name, "guard", f"{outcome.backend}: allocation `{name}`: {text}",
                                side=outcome.backend))
        count, first = gap_damage(s, arg)
        if count:
            out.append(Mismatch(
                name, "gap", f"{outcome.backend}: {count} element(s) of the storage of `{name}` outside its "
                f"view ({arg.layout}) changed, first at storage index {first}", side=outcome.backend,
                count=count))
    return out


# ------------------------------------------------------------------ outcomes

def input_scale(case: Case) -> float:
    """The largest finite magnitude among the case's floating input views (before the launch)."""
    cached = case.__dict__.get("_input_scale")
    if cached is not None:
        return cached
    best = 0.0
    for arg in case.tensors().values():
        if arg.dt.is_float and arg.numel:
            best = max(best, _finite_max(dtypes.as_float64(arg.values(), arg.dt)))
    for v in case.inputs.values():
        if isinstance(v, float) and np.isfinite(v):
            best = max(best, abs(v))
    case.__dict__["_input_scale"] = best
    return best


def input_numel(case: Case) -> int:
    return max((a.numel for a in case.tensors().values() if a.dt.is_float), default=0)


def reduction_factor(case: Case, target_numel: int) -> float:
    """sqrt(terms per output): an output smaller than the inputs sums over them (row sums, atomics),
    and summation order errors grow with the number of terms."""
    return float(np.sqrt(max(1.0, input_numel(case) / max(1, target_numel))))


def tolerance_for(target: str, dt: str, ops: set[str] | None, default: Any, per_output: Mapping[str, Any]) -> Tolerance:
    base = from_ops(ops, dt)
    base = resolve(default, base, dt)
    return resolve(per_output.get(target), base, dt)


def _ops(a: Outcome, b: Outcome) -> set[str] | None:
    traces = [o.trace for o in (a, b) if o.trace is not None]
    if not traces:
        return None
    out: set[str] = set()
    for t in traces:
        out |= t.ops
    return out


def _writers(a: Outcome, b: Outcome, target: str) -> np.ndarray | None:
    """Which program wrote each element; from the sampled side when one side sampled programs."""
    for o in sorted((a, b), key=lambda o: not (o.trace is not None and o.trace.sampled)):
        if o.trace is not None and target in o.trace.writers:
            return o.trace.writers[target]
    return None


def _sampled(a: Outcome, b: Outcome) -> Outcome | None:
    return next((o for o in (a, b) if o.trace is not None and o.trace.sampled), None)


def _keep(values: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    return values if keep is None else np.where(keep, values, 0)


def _compare_returned(a: Any, b: Any, path: str, ctx: dict, out: list[Mismatch]) -> None:
    if isinstance(a, ReturnedTensor) and isinstance(b, ReturnedTensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            out.append(Mismatch(path, "shape", f"`{path}`: {ctx['names'][0]} returned {a.dtype}{list(a.shape)}, "
                                f"{ctx['names'][1]} returned {b.dtype}{list(b.shape)}"))
            return
        if a.values.tobytes() == b.values.tobytes():
            return
        dt = dtypes.dtype(a.dtype)
        tol = tolerance_for(path, dt.name, ctx["ops"], ctx["default"], ctx["per_output"])
        wr = ctx["writers"](path)
        va, vb = dtypes.as_float64(a.values, dt), dtypes.as_float64(b.values, dt)
        ra, rb = a.values, b.values
        if ctx["sampled"] and wr is not None and wr.shape == va.shape:
            va, vb, ra, rb = _keep(va, wr >= 0), _keep(vb, wr >= 0), None, None
        m = value_mismatch(path, va, vb, dt, tol, wr, ra, rb, ctx["names"],
                           ctx["input_scale"], reduction_factor(ctx["case"], va.size))
        if m:
            out.append(m)
        return
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _compare_returned(x, y, f"{path}[{i}]", ctx, out)
        return
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            _compare_returned(a[k], b[k], f"{path}[{k!r}]", ctx, out)
        return
    if isinstance(a, float) and isinstance(b, float):
        dt = dtypes.dtype("float64")
        tol = tolerance_for(path, "float32", ctx["ops"], ctx["default"], ctx["per_output"])
        m = value_mismatch(path, np.array([a]), np.array([b]), dt, tol, None, names=ctx["names"],
                           input_scale=ctx["input_scale"])
        if m:
            out.append(m)
        return
    if type(a) is not type(b) or a != b:
        if a is None or b is None:  # e.g. a CompiledKernel handle on one side, None on the other
            return
        out.append(Mismatch(path, "structure", f"`{path}`: {ctx['names'][0]} returned {a!r}, "
                            f"{ctx['names'][1]} returned {b!r}"))


def compare(a: Outcome, b: Outcome, case: Case, tolerance: Any = None,
            tolerances: Mapping[str, Any] | None = None) -> Comparison:
    """Compare two outcomes of the same case."""
    cmp = Comparison(a, b)
    names = (a.backend, b.backend)
    if a.error or b.error:
        if a.error and b.error:
            cmp.mismatches.append(Mismatch("", "error", f"both failed: {a.backend}: {a.error.summary()}; "
                                                        f"{b.backend}: {b.error.summary()}"))
        else:
            bad = a if a.error else b
            cmp.mismatches.append(Mismatch("", "error", f"only {bad.backend} failed: {bad.error.summary()}",
                                           side=bad.backend))
        return cmp
    ops = _ops(a, b)
    per_output = dict(tolerances or {})
    scale_in = input_scale(case)
    sampled = _sampled(a, b)
    for name, arg in case.tensors().items():
        sa, sb = a.storages.get(name), b.storages.get(name)
        if sa is None or sb is None or same_bytes(sa, sb):  # identical bytes: nothing to compare
            continue
        va, ra = view_values(sa, arg)
        vb, rb = view_values(sb, arg)
        tol = tolerance_for(name, arg.dtype, ops, tolerance, per_output)
        if sa.dtype != sb.dtype:
            ra = rb = None
        writers = _writers(a, b, name)
        if writers is not None and writers.shape != arg.shape:
            writers = writers[arg.view_index()]
        if sampled is not None:
            # only what the interpreted programs wrote is comparable (None: they wrote nothing here)
            keep = writers >= 0 if writers is not None else np.zeros(arg.shape, bool)
            va, vb = _keep(va, keep), _keep(vb, keep)
            ra = rb = None
        m = value_mismatch(name, va, vb, arg.dt, tol, writers, ra, rb, names,
                           scale_in, reduction_factor(case, arg.numel))
        if m:
            cmp.mismatches.append(m)
    ctx = {"ops": ops, "default": tolerance, "per_output": per_output, "names": names,
           "writers": lambda p: _writers(a, b, p), "input_scale": scale_in, "sampled": sampled is not None,
           "case": case}
    _compare_returned(a.returned, b.returned, "returned", ctx, cmp.mismatches)
    cmp.mismatches.extend(integrity(a, case) + integrity(b, case))
    return cmp
