"""Shrinking beyond hypothesis: contiguous layouts and zeroed values, while the case still fails
the same way (the same kind of divergence on the same targets), within a time budget.

Hypothesis has already shrunk the draw (shapes, dtypes, specials); here the concrete case is
reduced further.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..core.case import Case, TensorArg, contiguous_strides
from ..judge.evidence import Evidence
from ..judge.verdict import Verdict

Judge = Callable[[Case], "tuple[Verdict, Evidence]"]

MAX_EVALUATIONS = 200  # runs of the case the value-zeroing step may spend (besides the time budget)


@dataclass
class ShrinkInfo:
    before: tuple[int, int, int]  # (tensors, elements in views, programs)
    after: tuple[int, int, int]
    seconds: float
    steps: list[str] = field(default_factory=list)
    evaluations: int = 0
    out_of_time: bool = False

    def describe(self) -> str:
        b, a = self.before, self.after
        text = (f"{b[1]} elements in {b[0]} tensor(s), {b[2]} program(s) -> {a[1]} elements, {a[2]} program(s) "
                f"in {self.seconds:.2f} s ({self.evaluations} runs")
        if self.steps:
            text += "; " + ", ".join(self.steps)
        if self.out_of_time:
            text += "; stopped at the time budget"
        return text + ")"


def same_failure(got: Verdict, want: Verdict) -> bool:
    """The same kind of divergence on (some of) the same targets."""
    if not got.failed or got.kind != want.kind:
        return False
    return not want.targets or bool(set(got.targets) & set(want.targets))


def _programs(ev: Evidence) -> int:
    for o in ev.outcomes.values():
        g = o.grid()
        if g:
            return g[0] * g[1] * g[2]
    return 0


def _size(case: Case, ev: Evidence) -> tuple[int, int, int]:
    t = case.tensors()
    return len(t), sum(x.numel for x in t.values()), _programs(ev)


def contiguous(arg: TensorArg) -> TensorArg:
    """The same values in a fresh contiguous storage."""
    vals = arg.values().reshape(-1)
    storage = vals.copy() if vals.size else np.zeros(1, arg.storage.dtype)
    return TensorArg(arg.dtype, arg.shape, contiguous_strides(arg.shape), 0, storage, "contiguous", arg.tags)


def zero(arg: TensorArg, positions: np.ndarray) -> TensorArg:
    """`arg` with the view elements at flat `positions` set to zero."""
    vals = arg.values().reshape(-1).copy()
    vals[positions] = np.zeros(1, vals.dtype)[0]
    return arg.with_values(vals.reshape(arg.shape))


def shrink(case: Case, verdict: Verdict, evidence: Evidence, judge: Judge,
           budget: float = 60.0) -> tuple[Case, Verdict, Evidence, ShrinkInfo]:
    """Reduce `case` while `judge(case)` still fails like `verdict`; stop after `budget` seconds."""
    t0 = time.perf_counter()
    info = ShrinkInfo(_size(case, evidence), _size(case, evidence), 0.0)
    # a run takes about as long as the case's slowest backend did: stop before one would overrun
    estimate = [max([o.seconds for o in evidence.outcomes.values()] or [0.0])]

    def attempt(candidate: Case) -> tuple[Verdict, Evidence] | None:
        if info.out_of_time or time.perf_counter() - t0 + estimate[0] > budget:
            info.out_of_time = True
            return None
        info.evaluations += 1
        t = time.perf_counter()
        got = judge(candidate)
        estimate[0] = max(estimate[0], time.perf_counter() - t)
        return got if same_failure(got[0], verdict) else None

    # 1. layouts: contiguous wherever that still fails
    for name, arg in case.tensors().items():
        if arg.layout == "contiguous" and arg.offset == 0:
            continue
        candidate = Case({**case.inputs, name: contiguous(arg)}, case.config, case.dims)
        got = attempt(candidate)
        if got is not None:
            case, (verdict, evidence) = candidate, got
            info.steps.append(f"`{name}` made contiguous")
    # 2. values: zero everything that does not matter, in halving chunks
    for name in list(case.tensors()):
        arg = case.tensors()[name]
        n = arg.numel
        if n == 0:
            continue
        zeroed = 0
        chunk = n
        vals = arg.values().reshape(-1)
        while chunk >= 1 and not info.out_of_time:
            nonzero = vals.astype(np.float64) != 0 if vals.dtype != np.bool_ else vals.copy()
            if not nonzero.any():
                break
            for start in range(0, n, chunk):
                if info.out_of_time or info.evaluations > MAX_EVALUATIONS:
                    break
                pos = np.arange(start, min(start + chunk, n))
                pos = pos[nonzero[pos]]
                if pos.size == 0:
                    continue
                arg = case.tensors()[name]
                candidate = Case({**case.inputs, name: zero(arg, pos)}, case.config, case.dims)
                got = attempt(candidate)
                if got is not None:
                    case, (verdict, evidence) = candidate, got
                    zeroed += int(pos.size)
                    nonzero[pos] = False
                    vals = case.tensors()[name].values().reshape(-1)
            if chunk == 1 or info.evaluations > MAX_EVALUATIONS:
                break
            chunk = max(1, chunk // 2)
        if zeroed:
            info.steps.append(f"{zeroed} value(s) of `{name}` zeroed")
    info.after = _size(case, evidence)
    info.seconds = time.perf_counter() - t0
    return case, verdict, evidence, info
