"""A check's boundary plan: the choice sequences of cases that cover every pair of boundary classes it can.

`boundary_plan(strategy, rows, seed)` draws the case strategy a few times to learn its choice points,
then builds rows with `covering.next_row` and draws each one steered (`steer`), keeping the choice
sequence hypothesis would replay. `seeded_database` puts them where hypothesis's reuse phase runs them
first: planned cases are then ordinary cases of the search (judged, counted, shrunk, reproduced, saved).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis.strategies import SearchStrategy

from .classes import Point
from .covering import (
    PLAN_POINTS,
    TRIPLE_POINTS,
    Missing,
    MissingTriples,
    Pair,
    PairIndex,
    Triple,
    all_triples,
    first_points,
    missing_pairs,
    missing_triples,
    next_row,
    pairs_of,
    single_rows,
    triple_keys,
    triples_of,
    unit_rows,
)
from .steer import Steering, steering

#: unsteered draws that learn a strategy's choice points before the plan
DISCOVERY = 4
#: how many missing pairs a report names
NAMED = 3
#: draws of one planned row before it counts as rejected by the strategy
RETRIES = 3
#: the least weight of the targets a plan sized to its triples covers (`boundary_plan`'s `least`): triples (8) and
#: pairs of two addressing points (4), not those with a value class (2, 1), which the random search varies anyway
ADDRESSING_PAIRS = 4


@dataclass
class Coverage:
    """Which targets the planned cases hold: pairs of classes, and triples of the addressing points' groups."""

    rows: int = 0
    points: int = 0
    pairs: int = 0
    covered: int = 0
    missing: list[str] = field(default_factory=list)  # a few, readable
    unreachable: int = 0  # pairs a row aimed at and its draw did not hold (a dependency between choices)
    failed_rows: int = 0  # rows whose draw was rejected (a filter, `assume`, a reject in a composite)
    broken: list[str] = field(default_factory=list)  # scripts hypothesis did not take as planned
    unplanned: dict[str, str] = field(default_factory=dict)  # a user's draws with no classes (slot -> what)
    cap: int = 0  # the most planned cases the plan could make
    triples: int = 0
    triples_covered: int = 0
    triples_missing: list[str] = field(default_factory=list)  # a few, readable
    triple_points: int = 0  # the points combined three by three
    addressing_left: int = 0  # addressing points past `covering.TRIPLE_POINTS`: two by two only
    points_left: int = 0  # choice points past `covering.PLAN_POINTS`: left to the random search

    def line(self) -> str:
        if not self.pairs:
            return f"{self.rows} planned case(s) (cap {self.cap}), no pair of classes to cover"
        parts = []
        if self.triples:
            parts.append(f"triples {self.triples_covered} of {self.triples}")
        parts.append(f"pairs {self.covered} of {self.pairs}")
        text = f"{' and '.join(parts)} covered by {self.rows} planned case(s) (cap {self.cap})"
        missing = self.triples_missing + self.missing
        if missing:
            more = self.triples + self.pairs - self.triples_covered - self.covered - len(missing)
            text += "; missing: " + ", ".join(missing) + (f" and {more} more" if more > 0 else "")
        if self.points_left:
            text += f"; {self.points_left} choice point(s) past the first {PLAN_POINTS} left to the random search"
        if self.addressing_left:
            text += f"; {self.addressing_left} addressing point(s) past the first {TRIPLE_POINTS} in pairs only"
        if self.failed_rows:
            text += f"; {self.failed_rows} planned case(s) rejected by the strategy"
        if self.unplanned:
            text += "; not planned: " + ", ".join(f"{k} ({v})" for k, v in sorted(self.unplanned.items())[:NAMED])
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "cap": self.cap, "points": self.points, "pairs": self.pairs,
                "covered": self.covered, "missing": list(self.missing), "triples": self.triples,
                "triples_covered": self.triples_covered, "triples_missing": list(self.triples_missing),
                "triple_points": self.triple_points, "points_left": self.points_left, "unreachable": self.unreachable,
                "failed_rows": self.failed_rows, "unplanned": dict(self.unplanned)}


@dataclass
class Plan:
    choices: list[tuple]
    coverage: Coverage
    cases: list[Any] = field(default_factory=list)  # what each choice sequence drew, in the same order
    #: the database entries keep the plan's order (`grouped`); else hypothesis's reuse phase runs them in its own
    ordered: bool = False

    def entries(self) -> list[bytes]:
        """The planned cases' database entries (`_entry`); where the plan is `ordered`, each padded with choices no
        draw reads so that hypothesis's order (shortest first, then bytewise) is the plan's."""
        from hypothesis.database import choices_to_bytes

        out: list[bytes] = []
        for c in self.choices:
            raw = choices_to_bytes(_entry(c))
            if self.ordered and out and len(raw) <= len(out[-1]):
                raw = choices_to_bytes(_entry(c) + (False,) * (len(out[-1]) + 1 - len(raw)))  # (one byte each)
            out.append(raw)
        return out

    def replay_order(self) -> list[Any]:
        """The planned cases in the order hypothesis's reuse phase runs them (its database entries, sorted
        shortlex), which is the plan's only where it is `ordered`."""
        keyed = [(e, i) for i, e in enumerate(self.entries())]
        return [self.cases[i] for _, i in sorted(keyed, key=lambda kv: (len(kv[0]), kv[0]))]

    def grouped(self, key: Callable[[Any], Hashable | None]) -> Plan:
        """The plan `ordered` so that cases with the same `key` (a specialization: they compile once) run one after
        another, the groups in the order hypothesis would reach their first case; a case whose key is None is a
        group of its own."""
        order = self.replay_order()
        at = {id(case): i for i, case in enumerate(self.cases)}
        groups: dict[Hashable, list[int]] = {}
        for n, case in enumerate(order):
            k = key(case)
            groups.setdefault(("alone", n) if k is None else ("key", k), []).append(at[id(case)])
        new = [i for g in groups.values() for i in g]
        return Plan([self.choices[i] for i in new], self.coverage, [self.cases[i] for i in new], ordered=True)

    def database(self, key: bytes, base: Any = None) -> Any:
        """`seeded_database` of these entries."""
        return _database(self.entries(), key, base)


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


def _name(target: Pair | Triple) -> str:
    return " with ".join(f"{k}={c}" for k, c in target)


def boundary_plan(strategy: SearchStrategy, rows: int, seed: int, triples: bool = True, least: int = 0) -> Plan:
    """At most `rows` planned cases covering the strategy's triples (`triples`) and pairs (see the module), those
    weighing at least `least` (`ADDRESSING_PAIRS`: triples and pairs of the points that decide addressing, not the
    pairs of value classes); fewer where fewer cover them all."""
    rng = random.Random(seed)
    learnt: dict[str, Point] = {}  # every choice point the draws declared
    unplanned: dict[str, str] = {}
    for i in range(DISCOVERY):
        drawn = realize(strategy, {}, rng.getrandbits(32) ^ i)
        if drawn is not None:
            learnt.update(drawn.steering.points)
            unplanned.update(drawn.steering.unplanned)
    keys = first_points(learnt, (), PLAN_POINTS)
    points = {k: learnt[k] for k in keys}  # those the plan combines
    cov = Coverage(unplanned=unplanned, cap=rows)
    covered: set[Pair] = set()
    covered3: set[Triple] = set()
    tried: dict[Pair | Triple, int] = {}
    unreachable: set[Pair | Triple] = set()
    choices: list[tuple] = []
    cases: list[Any] = []
    seen_choices: set[tuple] = set()
    attempts = 0
    # a size at 1 among ordinary ones, then each other class once over ordinary sizes, then triples and pairs
    units = unit_rows(points, rng)[: max(1, rows // 2)]
    units += single_rows(points, rng)
    index = PairIndex(points)
    tkeys = triple_keys(points) if triples else ()
    left: Missing | None = None  # the pairs neither covered nor unreachable (built at the first greedy row)
    left3: MissingTriples | None = None  # the same of triples
    while len(choices) < rows and attempts < 3 * rows:
        attempts += 1
        if units:
            row = units.pop(0)
            aim: Pair | Triple = min(((k, c), (k, c)) for k, c in row.items())
        else:
            if left is None or index.keys != points.keys():
                index = index.current(points)
                left = missing_pairs(index, covered | unreachable)
                grown = triple_keys(points, tkeys) if triples else ()
                if left3 is None or grown != tkeys:
                    left3 = missing_triples(points, grown, covered3 | unreachable,
                                            left3, set(grown) - set(tkeys))
                    tkeys = grown
            picked = next_row(points, left, rng, triples=left3, least=least)
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
                learnt.setdefault(k, p)
            if len(learnt) > len(points) and (grown := first_points(learnt, keys, PLAN_POINTS)) != keys:
                keys = grown
                points = {k: learnt[k] for k in keys}
            got = pairs_of(drawn.steering.seen, points)
            got3 = triples_of(drawn.steering.seen, points, tkeys)
            unit = aim[0] == aim[1]
            if not unit and aim not in (got if len(aim) == 2 else got3):
                # (a triple missed once is left: a dependency between three choices, e.g. a size-1 stride with every
                # size above 1, is the likely cause, and triples are many)
                tried[aim] = tried.get(aim, 0) + (1 if len(aim) == 2 else 2)
            cov.broken += drawn.steering.broken
            if drawn.choices not in seen_choices and (unit or got - covered or got3 - covered3):
                seen_choices.add(drawn.choices)
                choices.append(drawn.choices)
                cases.append(drawn.value)
                covered |= got
                covered3 |= got3
                if left is not None:
                    for pair in got:
                        left.pop(pair, 0)  # (0: a pair already gone; the weight is not used)
                if left3 is not None:
                    for triple in got3:
                        left3.pop(triple, 0)
        if tried.get(aim, 0) >= 2:
            unreachable.add(aim)
            if left is not None and len(aim) == 2:
                left.pop(aim, 0)
            if left3 is not None and len(aim) == 3:
                left3.pop(aim, 0)
    total = index.current(points).weights.keys()
    cov.rows = len(choices)
    cov.points = len(points)
    cov.points_left = len(learnt) - len(points)
    cov.pairs = len(total)
    cov.covered = len(covered & total)
    cov.unreachable = len(unreachable & total - covered)
    cov.missing = [_name(p) for p in heapq.nsmallest(NAMED, total - covered)]  # (the first of them, sorted)
    if triples:
        tkeys = triple_keys(points, tkeys)
        total3 = all_triples(points, tkeys)
        cov.triples = len(total3)
        cov.triples_covered = len(covered3 & total3)
        cov.triples_missing = [_name(t) for t in heapq.nsmallest(NAMED, total3 - covered3)]
        cov.triple_points = len(tkeys)
        cov.addressing_left = sum(1 for p in points.values() if p.addressing and len(p.groups()) > 1) - len(tkeys)
    return Plan(choices, cov, cases)


def seeded_database(choices: Sequence[tuple], key: bytes, base: Any = None) -> Any:
    """An example database holding `choices` under `key` (hypothesis's reuse phase runs them first), over
    `base` (the run's own database, which keeps what the run saves)."""
    from hypothesis.database import choices_to_bytes

    return _database([choices_to_bytes(_entry(c)) for c in choices], key, base)


def _database(entries: Sequence[bytes], key: bytes, base: Any) -> Any:
    from hypothesis.database import InMemoryExampleDatabase, MultiplexedDatabase

    mem = InMemoryExampleDatabase()
    for e in entries:
        mem.save(key, e)
    return mem if base is None else MultiplexedDatabase(mem, base)
