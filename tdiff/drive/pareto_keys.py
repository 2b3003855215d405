"""Hypothesis's Pareto front at the cost of one sort key per test case.

A search hands hypothesis an example database (the boundary plan, `search.planned`), and with a database hypothesis
keeps a Pareto front of the cases it runs (its `ParetoFront`): each case is compared with tens of members of the
front, and each comparison (`pareto.dominance`) computes both cases' sort keys again, `choice_to_index` of every
choice. In a test process that was about 4 ms per case (`docs/explanation/performance.md`), on the critical path of
every case. `install` memoizes the sort key of the Pareto module by the identity of the choice sequence it is given
(immutable; the cache holds it, so its identity is not reused while cached): the same keys, the same front, the same
draws from hypothesis's random generator, so the same cases.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

#: sort keys kept (a front rarely holds more than a few hundred cases)
SIZE = 4096


class MemoKey:
    """`key(seq)`, each result kept for the last `SIZE` sequences by their identity."""

    def __init__(self, key: Callable[[Any], Any], size: int = SIZE) -> None:
        self.key, self.size = key, size
        self.kept: OrderedDict[int, tuple[Any, Any]] = OrderedDict()  # id -> (the sequence, its key)

    def __call__(self, seq: Any) -> Any:
        hit = self.kept.get(id(seq))
        if hit is not None and hit[0] is seq:
            self.kept.move_to_end(id(seq))
            return hit[1]
        value = self.key(seq)
        self.kept[id(seq)] = (seq, value)
        if len(self.kept) > self.size:
            self.kept.popitem(last=False)
        return value


def install() -> MemoKey | None:
    """Memoize `hypothesis.internal.conjecture.pareto.sort_key` (once per process); the memo, or None where this
    hypothesis has no such function (its Pareto front is then kept as it keeps it)."""
    try:
        from hypothesis.internal.conjecture import pareto
    except ImportError:  # pragma: no cover  (a hypothesis without a Pareto front)
        return None
    key = getattr(pareto, "sort_key", None)
    if isinstance(key, MemoKey):
        return key
    if not callable(key):
        return None
    memo = MemoKey(key)
    pareto.sort_key = memo  # type: ignore[assignment]  # (the same function of a choice sequence, memoized)
    return memo
