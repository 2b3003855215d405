"""The reduction loop: run each pass's edits on each function still used, keep an edit when the oracle
says the reduced kernel still fails the same way, until a round keeps nothing or the time budget is spent
(then the best kernel so far is the result). As in C-Reduce, after a kept edit a pass's edits are listed
again on the new text and the loop goes on from the same index."""

from __future__ import annotations

import ast
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import candidates
from .source import Function, code_lines, total_lines, used

#: whether a kernel built from these sources (key -> `def` text) still fails the same way
Oracle = Callable[[dict[str, str]], bool]

#: passes whose edits are kept even when they do not make the text shorter (they enable later edits)
_SEMANTIC = ("specialise", "loop")
MAX_ROUNDS = 8


@dataclass
class Reduction:
    """The best sources found, and what it took."""

    sources: dict[str, str]
    before: int  # code lines of the kernel and the device functions it calls
    after: int
    seconds: float = 0.0
    tried: int = 0  # candidates the oracle judged
    kept: int = 0
    out_of_time: bool = False
    steps: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # oracle failures (tdiff's own), first few

    @property
    def reduced(self) -> bool:
        return self.kept > 0 and self.after < self.before


def _size(src: str) -> tuple[int, int]:
    return code_lines(src), len("".join(src.split()))


def _parses(src: str) -> bool:
    try:
        ast.parse(src)
    except SyntaxError:
        return False
    return True


def reduce(functions: dict[str, Function], oracle: Oracle, budget: float,
           constexprs: dict[str, dict[str, Any]] | None = None, estimate: float = 0.0) -> Reduction:
    """Reduce `functions` (kernel first) while `oracle` holds, for at most `budget` seconds; `estimate`: how
    long one oracle call is expected to take (the loop stops before one would overrun the budget)."""
    t0 = time.perf_counter()
    best = {k: f.source for k, f in functions.items()}
    red = Reduction(dict(best), total_lines(best, functions), total_lines(best, functions))
    seen: set[int] = set()
    first = next(iter(functions))
    slowest = [estimate]

    def judge(cand: dict[str, str]) -> bool | None:
        """The oracle's answer; None once the budget cannot fit another call."""
        if time.perf_counter() - t0 + slowest[0] > budget:
            red.out_of_time = True
            return None
        red.tried += 1
        t = time.perf_counter()
        try:
            ok = bool(oracle(cand))
        except Exception as exc:  # noqa: BLE001 - a failing oracle rejects the candidate, and is reported
            if len(red.errors) < 3:
                red.errors.append(f"{type(exc).__name__}: {exc}")
            ok = False
        slowest[0] = max(slowest[0], time.perf_counter() - t)
        return ok

    for _ in range(MAX_ROUNDS):
        progress = False
        for pass_name, _fn in candidates.PASSES:
            for key in used(best, functions):
                if key not in used(best, functions) or pass_name == "parameters" and key != first:
                    continue  # (a device function's parameters: its call sites would need rewriting too)
                edits = candidates.edits(pass_name, best[key], (constexprs or {}).get(key, {}))
                i = 0
                while i < len(edits):
                    text = edits[i].make()
                    cand = {**best, key: text}
                    fp = hash(tuple(sorted(cand.items())))
                    if text == best[key] or fp in seen or not _parses(text) or \
                            (pass_name not in _SEMANTIC and _size(text) >= _size(best[key])):
                        i += 1
                        continue
                    seen.add(fp)
                    ok = judge(cand)
                    if ok is None:
                        break
                    if ok:
                        best = cand
                        red.kept += 1
                        red.steps.append(f"{functions[key].name}: {edits[i].what}")
                        progress = True
                        edits = candidates.edits(pass_name, best[key], (constexprs or {}).get(key, {}))
                    else:
                        i += 1
                if red.out_of_time:
                    break
            if red.out_of_time:
                break
        if red.out_of_time or not progress:
            break
    red.sources = best
    red.after = total_lines(best, functions)
    red.seconds = time.perf_counter() - t0
    return red
