"""A pairwise covering plan, built greedily row by row (as AETG and PICT do), from what each row really drew.

First, one row per size that can be 1, every other point at its nominal class (`unit_rows`). Then every
pair of classes of two choice points (in different slots) is a target. Each row starts from a
pair not yet covered and gives every other point the class that covers the most pairs still missing.
Rows are realized by drawing the case, and only the pairs the drawn case really holds count as covered
(`pairs_of`): a choice point that exists only for some draws, or a class a dependency rules out, is
learnt from the draws, never assumed.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping

from .classes import Point

Cell = tuple[str, str]  # (point key, class name)
Pair = tuple[Cell, Cell]


def _pair(a: Cell, b: Cell) -> Pair:
    return (a, b) if a <= b else (b, a)


def all_pairs(points: Mapping[str, Point], touching: Collection[str] | None = None) -> set[Pair]:
    """Every pair of classes of two points in different slots (`touching`: only those with one of these points)."""
    keys = sorted(points)
    out: set[Pair] = set()
    for i, k in enumerate(keys):
        for q in keys[i + 1:]:
            if points[k].slot == points[q].slot or (touching is not None and k not in touching
                                                     and q not in touching):
                continue
            for a in points[k].names():
                for b in points[q].names():
                    out.add(_pair((k, a), (q, b)))
    return out


def pairs_of(seen: Mapping[str, str], points: Mapping[str, Point]) -> set[Pair]:
    """The pairs a drawn case holds (its points' classes, two by two)."""
    cells = sorted((k, c) for k, c in seen.items() if k in points)
    return {_pair(a, b) for i, a in enumerate(cells) for b in cells[i + 1:]
            if points[a[0]].slot != points[b[0]].slot}


def unit_rows(points: Mapping[str, Point]) -> list[dict[str, str]]:
    """One row per size that can be 1 (a decode step, one head, a batch of one): that point at 1, every other
    at its nominal class (sizes away from 1, packed layouts, ordinary values). The bug class of a size-1
    dimension among larger ones, which pairs alone leave to the classes the rest of a row happens to get."""
    out = []
    for k, p in sorted(points.items()):
        if not p.nominal or "1" not in p.names() or len(p.names()) < 2:
            continue
        row = {k: "1"}
        for q, pq in sorted(points.items()):
            if q == k or pq.slot == p.slot:
                continue
            usual = [c for c in pq.nominal if c in pq.names()]
            if usual:
                row[q] = usual[0]
        out.append(row)
    return out


def _is_size(p: Point) -> bool:
    return "1" in p.names() and bool(p.nominal)


def single_rows(points: Mapping[str, Point], rng: random.Random) -> list[dict[str, str]]:
    """Rows that give every class of every point other than a size (layouts, dtypes, value classes, a user's
    choices) once, over nominal sizes: a non-contiguous layout with a tail, an expanded input with more than
    one column, special values in an ordinary shape. Several points take a class in one row (a tensor's
    layout and another's values), each point one class a row, in an order drawn with `rng`."""
    todo: dict[str, list[str]] = {}
    for k, p in sorted(points.items()):
        if _is_size(p):
            continue
        rest = [c for c in p.names() if c not in p.nominal[:1]]
        rng.shuffle(rest)
        if rest:
            todo[k] = rest
    out = []
    while any(todo.values()):
        row: dict[str, str] = {}
        for k, p in sorted(points.items()):
            if todo.get(k):
                row[k] = todo[k].pop(0)
            else:
                usual = [c for c in p.nominal if c in p.names()]
                if usual:
                    row[k] = usual[0]
        out.append(row)
    return out


def weight(pair: Pair, points: Mapping[str, Point]) -> int:
    return points[pair[0][0]].weight * points[pair[1][0]].weight


class PairIndex:
    """Every pair of `points` (`all_pairs`) in sorted order, with its weight: made once for the points a plan
    knows, and grown only when a draw teaches it a new point (a plan of 150 points holds 10^5 pairs)."""

    def __init__(self, points: Mapping[str, Point]) -> None:
        self.keys: frozenset[str] = frozenset()
        self.weights: dict[Pair, int] = {}
        self.order: list[Pair] = []
        self._grow(points)

    def current(self, points: Mapping[str, Point]) -> PairIndex:
        """This index, grown in place where `points` has points it lacks (their pairs merged in)."""
        self._grow(points)
        return self

    def _grow(self, points: Mapping[str, Point]) -> None:
        new = {k: p for k, p in points.items() if k not in self.keys}
        if not new:
            return
        fresh = all_pairs(points, new if self.keys else None)
        for p in fresh:
            self.weights[p] = weight(p, points)
        self.order = sorted(self.order + sorted(fresh))  # (two sorted runs: merged, not sorted again)
        self.keys = frozenset(points)


class Missing(dict):
    """Pairs -> weight, in sorted order, that no row has covered yet; also each cell's missing partners, kept in
    step as pairs are popped, so that `next_row` adds up a class's gain with one set intersection per class."""

    def __init__(self, weights: Iterable[tuple[Pair, int]] = ()) -> None:
        super().__init__(weights)
        self.partners: dict[Cell, dict[Cell, int]] = {}
        for (a, b), w in self.items():
            self.partners.setdefault(a, {})[b] = w
            self.partners.setdefault(b, {})[a] = w

    def pop(self, pair: Pair, *default: int) -> int:  # type: ignore[override]
        if pair in self:
            a, b = pair
            del self.partners[a][b]
            del self.partners[b][a]
        return super().pop(pair, *default)


def missing_pairs(index: PairIndex, done: set[Pair]) -> Missing:
    """The index's pairs not in `done`, with their weights, in sorted order (what `next_row` takes: kept up to
    date by popping the pairs a row covers, it stays sorted)."""
    return Missing((p, index.weights[p]) for p in index.order if p not in done)


def next_row(points: Mapping[str, Point], missing: Iterable[Pair], rng: random.Random,
             candidates: int = 8) -> tuple[dict[str, str], Pair] | None:
    """The class of each point for the next row, and the pair it was built around (one of the heaviest
    missing); None when none is missing. A row's worth is the weight of the missing pairs it holds. `missing`:
    pairs, or (as `missing_pairs` gives them) a `Missing` of pair -> weight in sorted order."""
    if isinstance(missing, Missing):
        left = missing
    elif isinstance(missing, dict):
        left = Missing(missing.items())
    else:
        left = Missing((p, weight(p, points)) for p in sorted(missing))
    if not left:
        return None
    top = max(left.values())
    heaviest = [p for p, w in left.items() if w == top]  # (sorted, as `left` is)
    partners = left.partners
    none: dict[Cell, int] = {}
    best: tuple[int, dict[str, str], Pair] | None = None
    keys = sorted(points)
    for _ in range(candidates):
        seed = heaviest[rng.randrange(len(heaviest))]
        row = {seed[0][0]: seed[0][1], seed[1][0]: seed[1][1]}
        cells = set(row.items())
        gain = left.get(seed, 0)  # the missing pairs the row holds: each counted when its second cell joins
        slots = {points[k].slot for k in row}
        order = [k for k in keys if k not in row]
        rng.shuffle(order)
        for k in order:
            if points[k].slot in slots:
                continue
            scores = []
            for c in points[k].names():
                mates = partners.get((k, c), none)
                scores.append((sum(mates[h] for h in mates.keys() & cells), c in points[k].nominal, rng.random(), c))
            top_score = max(scores)
            row[k] = top_score[3]
            gain += top_score[0]
            cells.add((k, top_score[3]))
            slots.add(points[k].slot)
        if best is None or gain > best[0]:
            best = (gain, row, seed)
    assert best is not None
    return best[1], best[2]
