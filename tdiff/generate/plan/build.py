"""A check's boundary plan: the choice sequences of cases that cover every pair of boundary classes it can.

`boundary_plan(strategy, rows, seed)` draws the case strategy a few times to learn its choice points,
then builds rows with `covering.next_row` and draws each one steered (`steer`), keeping the choice
sequence hypothesis would replay. `seeded_database` puts them where hypothesis's reuse phase runs them
first: planned cases are then ordinary cases of the search (judged, counted, shrunk, reproduced, saved).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis.strategies import SearchStrategy

from .classes import Point
from .covering import Pair, PairIndex, missing_pairs, next_row, pairs_of, single_rows, unit_rows
from .steer import Steering, steering

#: unsteered draws that learn a strategy's choice points before the plan
DISCOVERY = 4
#: how many missing pairs a report names
NAMED = 3
#: draws of one planned row before it counts as rejected by the strategy
RETRIES = 3


@dataclass
class Coverage:
    """Which pairs of classes the planned cases hold."""

    rows: int = 0
    points: int = 0
    pairs: int = 0
    covered: int = 0
    missing: list[str] = field(default_factory=list)  # a few, readable
    unreachable: int = 0  # pairs a row aimed at and its draw did not hold (a dependency between choices)
    failed_rows: int = 0  # rows whose draw was rejected (a filter, `assume`, a reject in a composite)
    broken: list[str] = field(default_factory=list)  # scripts hypothesis did not take as planned
    unplanned: dict[str, str] = field(default_factory=dict)  # a user's draws with no classes (slot -> what)

    def line(self) -> str:
        if not self.pairs:
            return f"boundary plan: {self.rows} planned case(s), no pair of classes to cover"
        text = (f"pairs of classes: {self.covered} of {self.pairs} covered by {self.rows} planned case(s)")
        if self.missing:
            more = self.pairs - self.covered - len(self.missing)
            text += "; missing: " + ", ".join(self.missing) + (f" and {more} more" if more > 0 else "")
        if self.failed_rows:
            text += f"; {self.failed_rows} planned case(s) rejected by the strategy"
        if self.unplanned:
            text += "; not planned: " + ", ".join(f"{k} ({v})" for k, v in sorted(self.unplanned.items())[:NAMED])
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "points": self.points, "pairs": self.pairs, "covered": self.covered,
                "missing": list(self.missing), "unreachable": self.unreachable, "failed_rows": self.failed_rows,
                "unplanned": dict(self.unplanned)}


@dataclass
class Plan:
    choices: list[tuple]
    coverage: Coverage
    cases: list[Any] = field(default_factory=list)  # what each choice sequence drew, in the same order

    def replay_order(self) -> list[Any]:
        """The planned cases in the order hypothesis's reuse phase runs them (its database entries, sorted
        shortlex), which is not the plan's."""
        from hypothesis.database import choices_to_bytes

        keyed = [(choices_to_bytes(_entry(c)), case) for c, case in zip(self.choices, self.cases)]
        return [case for _, case in sorted(keyed, key=lambda kv: (len(kv[0]), kv[0]))]


@dataclass
class Drawn:
    choices: tuple
    steering: Steering
    value: Any = None


def _entry(choices: tuple) -> tuple:
    """A planned case's database entry: one choice more than the case draws (hypothesis takes an entry it
    replays exactly for one it shrank before and would not shrink it again; a planned case that fails is shrunk
    like a drawn one)."""
    return (*choices, 0)


def realize(strategy: SearchStrategy, wants: dict[str, Any], seed: int) -> Drawn | None:
    """Draw `strategy` once with its choice points steered to `wants`; None where the draw was rejected."""
    from hypothesis.control import BuildContext
    from hypothesis.errors import StopTest, UnsatisfiedAssumption
    from hypothesis.internal.conjecture.data import ConjectureData

    data = ConjectureData(random=random.Random(seed))
    s = Steering(wants)
    provider = data.provider
    for kind in ("integer", "boolean", "float"):
        delegate = getattr(provider, f"draw_{kind}")
        setattr(provider, f"draw_{kind}",
                lambda _k=kind, _d=delegate, **c: s.primitive(_k, c, _d))
    try:
        with steering(s), _build_context(BuildContext, data):
            value = data.draw(strategy)
        data.freeze()
    except (StopTest, UnsatisfiedAssumption):
        return None
    return Drawn(tuple(data.choices), s, value)


def _build_context(cls: Any, data: Any) -> Any:
    try:
        return cls(data, is_final=False, wrapped_test=None)
    except TypeError:  # (older hypothesis: no wrapped_test)
        return cls(data, is_final=False)


def _name(pair: Pair) -> str:
    (a, ca), (b, cb) = pair
    return f"{a}={ca} with {b}={cb}"


def boundary_plan(strategy: SearchStrategy, rows: int, seed: int) -> Plan:
    """At most `rows` planned cases covering pairs of the strategy's boundary classes (see the module)."""
    rng = random.Random(seed)
    points: dict[str, Point] = {}
    unplanned: dict[str, str] = {}
    for i in range(DISCOVERY):
        drawn = realize(strategy, {}, rng.getrandbits(32) ^ i)
        if drawn is not None:
            points.update(drawn.steering.points)
            unplanned.update(drawn.steering.unplanned)
    cov = Coverage(unplanned=unplanned)
    covered: set[Pair] = set()
    tried: dict[Pair, int] = {}
    unreachable: set[Pair] = set()
    choices: list[tuple] = []
    cases: list[Any] = []
    seen_choices: set[tuple] = set()
    attempts = 0
    # a size at 1 among ordinary ones, then each other class once over ordinary sizes, then pairs
    units = unit_rows(points)[: max(1, rows // 2)]
    units += single_rows(points, rng)
    index = PairIndex(points)
    left: dict[Pair, int] | None = None  # the pairs neither covered nor unreachable (built at the first pair row)
    while len(choices) < rows and attempts < 3 * rows:
        attempts += 1
        if units:
            row = units.pop(0)
            aim = min(((k, c), (k, c)) for k, c in row.items())
        else:
            if left is None or index.keys != points.keys():
                index = index.current(points)
                left = missing_pairs(index, covered | unreachable)
            picked = next_row(points, left, rng)
            if picked is None:
                break
            row, aim = picked
        wants = {k: rng.choice(points[k].classes[points[k].names().index(c)].members) for k, c in row.items()}
        drawn = None
        for _ in range(RETRIES):  # (a filter inside the strategy may reject one draw of the row and not another)
            drawn = realize(strategy, wants, rng.getrandbits(32))
            if drawn is not None:
                break
        if drawn is None:
            cov.failed_rows += 1
            tried[aim] = tried.get(aim, 0) + 2
        else:
            for k, p in drawn.steering.points.items():
                points.setdefault(k, p)
            got = pairs_of(drawn.steering.seen, points)
            unit = aim[0] == aim[1]
            if not unit and aim not in got:
                tried[aim] = tried.get(aim, 0) + 1
            cov.broken += drawn.steering.broken
            if drawn.choices not in seen_choices and (unit or got - covered):
                seen_choices.add(drawn.choices)
                choices.append(drawn.choices)
                cases.append(drawn.value)
                covered |= got
                for p in got if left is not None else ():
                    left.pop(p, None)
        if tried.get(aim, 0) >= 2:
            unreachable.add(aim)
            if left is not None:
                left.pop(aim, None)
    total = index.current(points).weights.keys()
    cov.rows = len(choices)
    cov.points = len(points)
    cov.pairs = len(total)
    cov.covered = len(covered & total)
    cov.unreachable = len(unreachable & total - covered)
    cov.missing = [_name(p) for p in heapq.nsmallest(NAMED, total - covered)]  # (the first of them, sorted)
    return Plan(choices, cov, cases)


def seeded_database(choices: Sequence[tuple], key: bytes, base: Any = None) -> Any:
    """An example database holding `choices` under `key` (hypothesis's reuse phase runs them first), over
    `base` (the run's own database, which keeps what the run saves)."""
    from hypothesis.database import InMemoryExampleDatabase, MultiplexedDatabase, choices_to_bytes

    mem = InMemoryExampleDatabase()
    for c in choices:
        mem.save(key, choices_to_bytes(_entry(c)))
    return mem if base is None else MultiplexedDatabase(mem, base)
