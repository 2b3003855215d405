"""The batched interpreter against program by program: one case run both ways, every difference named.

Any difference is a bug in the batched path (`tdiff.execute.interpreter.batched`): the two runs must write
the same bytes, return the same values, raise the same error and record the same trace (apart from which
programs ran in batches)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings

from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.core.outcome import Outcome
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.generate.cases import case_strategy

#: trace fields that say how the run went, not what it found
HOW = ("batched", "unbatched")


def draw_cases(check: Any, n: int, at: int = 0) -> list[Case]:
    """`n` cases of `check`, the same at every call for the same `at`."""
    cases: list[Case] = []

    @seed(at)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case_strategy(check))
    def collect(case: Case) -> None:
        if len(cases) < n:
            cases.append(case)

    collect()
    return cases


def both(check: Any, case: Case, spec: BackendSpec | None = None) -> tuple[Outcome, Outcome]:
    """`case` interpreted program by program, then in batches."""
    spec = spec or BackendSpec("interpreter")
    one = InterpreterBackend(spec.with_(batched=False)).run(check, case)
    many = InterpreterBackend(spec.with_(batched=True)).run(check, case)
    return one, many


def differences(one: Outcome, many: Outcome) -> list[str]:
    """What differs between a sequential and a batched outcome of one case (empty: identical)."""
    out: list[str] = []
    e1 = None if one.error is None else (one.error.kind, one.error.message)
    e2 = None if many.error is None else (many.error.kind, many.error.message)
    if e1 != e2:
        out.append(f"error: {e1} != {e2}")
    if set(one.storages) != set(many.storages):
        out.append(f"storages: {sorted(one.storages)} != {sorted(many.storages)}")
    for name in set(one.storages) & set(many.storages):
        if one.storages[name].data != many.storages[name].data:
            out.append(f"storage {name}: bytes differ")
    if not _same(one.returned, many.returned):
        out.append("returned values differ")
    if many.trace is not None and one.error is None:  # a batch that raised where no program did is a bug of
        # the batched path (it fell back, which hid it)
        out += [f"a batch raised: {why}" for why in many.trace.unbatched if " in a batch at " in why]
    if one.trace is None or many.trace is None:
        if (one.trace is None) != (many.trace is None):
            out.append("one run has no trace")
        return out
    for f in dataclasses.fields(one.trace):
        if f.name in HOW:
            continue
        a, b = getattr(one.trace, f.name), getattr(many.trace, f.name)
        if not _same(a, b):
            out.append(f"trace.{f.name}: {_show(a)} != {_show(b)}")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape \
            and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        # (an access's address is where that run's memory lies, which differs run to run: `where` says it
        # relative to the allocations)
        loose = {"address"} if hasattr(a, "where") and hasattr(a, "address") else set()
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a) if f.name not in loose)
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return bool(a == b)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) < 300 else text[:300] + "..."
