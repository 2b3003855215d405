"""A covering plan of mixed strength, built greedily row by row (as AETG and PICT do), from what each row really drew.

First, one row per size that can be 1, every other point at its nominal class (`unit_rows`). Then the
targets: every pair of classes of two choice points (in different slots), and every triple of groups of
three points that decide memory addressing (`Point.addressing`, `Point.group`; at most `TRIPLE_POINTS` of
them: `triple_keys`). Each row starts from a target not yet covered (a triple before a pair: it weighs more)
and gives every other point the class that covers the most weight of targets still missing. Rows are
realized by drawing the case, and only the targets the drawn case really holds count as covered
(`pairs_of`, `triples_of`): a choice point that exists only for some draws, or a class a dependency rules
out, is learnt from the draws, never assumed.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Collection, Iterable, Mapping

from .classes import Point

Cell = tuple[str, str]  # (point key, class name); in a triple, (point key, group name)
Pair = tuple[Cell, Cell]
Triple = tuple[Cell, Cell, Cell]  # sorted

#: the most choice points a plan combines (a composite that draws a list element by element has hundreds, whose pairs
#: no plan would cover; the rest are left to the random search), and the most of them combined three by three
PLAN_POINTS = 48
TRIPLE_POINTS = 12


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


def _usual(p: Point) -> str | None:
    usual = [c for c in p.nominal if c in p.names()]
    return usual[0] if usual else None


#: the order in which a unit row varies the other points: a user's flags and the layouts first (what makes the stride
#: of a size-1 dimension matter), then dtypes, then a user's integers
_VARIED = {"flag": 0, "layout": 1, "dtype": 2, "integer": 3}


def unit_rows(points: Mapping[str, Point], rng: random.Random | None = None) -> list[dict[str, str]]:
    """Rows with one size that can be 1 (a decode step, one head, a batch of one) at 1 and every other size at its
    nominal class (away from 1): first with every other point nominal too (packed layouts, ordinary values; an
    addressing point with no nominal class, a flag, at one drawn with `rng`; a user's float as drawn), then with
    one other addressing point at each other group of its classes (a layout's stride class, a dtype, each value of
    a user's flag or choice), the rest as in the first row. The bug class of a size-1 dimension among larger ones
    with the layout or flag that makes its stride matter: a combination of three that pairs alone leave to the
    classes the rest of a row happens to get. The sizes take turns (the first row of each, then the second, ...),
    so that a plan cut short still has each size at 1 with the flags that come first (`_VARIED`); `rng` also picks
    a class in a group of several."""
    rng = rng or random.Random(0)
    per: list[list[dict[str, str]]] = []
    for k, p in sorted(points.items()):
        if not p.unit:
            continue
        base = {k: "1"}
        varied: list[tuple[int, str, str]] = []
        for q, pq in sorted(points.items()):
            if q == k or pq.slot == p.slot:
                continue
            usual = _usual(pq) or (rng.choice(pq.names()) if pq.addressing and not pq.unit else None)
            if usual is None:
                continue
            base[q] = usual
            if pq.addressing and not pq.unit:
                varied += [(_VARIED.get(pq.kind, 4), q, g) for g in pq.groups() if g != pq.group(usual)]
        rows = [base]
        for _, q, g in sorted(varied):
            members = [c for c in points[q].names() if points[q].group(c) == g]
            rows.append({**base, q: rng.choice(members)})
        per.append(rows)
    return [r for turn in itertools.zip_longest(*per) for r in turn if r is not None]


def single_rows(points: Mapping[str, Point], rng: random.Random) -> list[dict[str, str]]:
    """Rows that give every class of every point other than a size (layouts, dtypes, a user's choices; value
    classes as far as those rows go) once, over nominal sizes: a non-contiguous layout with a tail, an expanded
    input with more than one column, special values in an ordinary shape. Several points take a class in one row
    (a tensor's layout and another's values), each point one class a row, in an order drawn with `rng`."""
    todo: dict[str, list[str]] = {}
    for k, p in sorted(points.items()):
        if p.unit:
            continue
        rest = [c for c in p.names() if c not in p.nominal[:1]]
        rng.shuffle(rest)
        if rest:
            todo[k] = rest
    out = []
    while any(todo[k] for k in todo if points[k].addressing or points[k].weight > 1):
        row: dict[str, str] = {}
        for k, p in sorted(points.items()):
            if todo.get(k):
                row[k] = todo[k].pop(0)
            elif (usual := _usual(p)) is not None:
                row[k] = usual
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

    # (dict.pop's overloads in one signature: a pair's key, an int default)
    def pop(self, pair: Pair, *default: int) -> int:  # type: ignore[override]
        if pair in self:
            a, b = pair
            del self.partners[a][b]
            del self.partners[b][a]
        return super().pop(pair, *default)


def missing_pairs(index: PairIndex, done: Collection[Pair | Triple]) -> Missing:
    """The index's pairs not in `done`, with their weights, in sorted order (what `next_row` takes: kept up to
    date by popping the pairs a row covers, it stays sorted)."""
    return Missing((p, index.weights[p]) for p in index.order if p not in done)


def next_row(points: Mapping[str, Point], missing: Iterable[Pair], rng: random.Random, candidates: int = 8,
             triples: MissingTriples | None = None, least: int = 0) -> tuple[dict[str, str], Pair | Triple] | None:
    """The class of each point for the next row, and the target it was built around (one of the heaviest missing
    triples, else pairs); None when none weighing at least `least` is missing. A row's worth is the weight of the
    missing targets it holds. `missing`: pairs, or (as `missing_pairs` gives them) a `Missing` of pair -> weight in
    sorted order; `triples`: the missing triples (`missing_triples`)."""
    if isinstance(missing, Missing):
        left = missing
    elif isinstance(missing, dict):
        left = Missing(missing.items())
    else:
        left = Missing((p, weight(p, points)) for p in sorted(missing))
    tri = triples if triples else None
    if not left and tri is None:
        return None
    top = max(left.values()) if left else 0
    top3 = max(tri.values()) if tri is not None else 0
    if max(top, top3) < max(least, 1):
        return None
    pool = tri if tri is not None and top3 >= top else left
    heaviest = [p for p, w in pool.items() if w == max(top, top3)]  # (sorted, as `pool` is)
    best: tuple[int, dict[str, str], Pair | Triple] | None = None
    keys = sorted(points)
    for _ in range(candidates):
        seed = heaviest[rng.randrange(len(heaviest))]
        row = _Row(points, left, tri, rng)
        if len(seed) == 2:
            for k, c in seed:
                row.add(k, c)
            gain = left.get(seed, 0)  # the missing targets the row holds: each counted when its last cell joins
        else:
            gain = 0
            for k, g in seed:
                got, c = row.pick(k, g)
                gain += got
                row.add(k, c)
        order = [k for k in keys if k not in row.classes]
        rng.shuffle(order)
        for k in order:
            if points[k].slot in row.slots:
                continue
            got, c = row.pick(k)
            gain += got
            row.add(k, c)
        if best is None or gain > best[0]:
            best = (gain, row.classes, seed)
    assert best is not None
    return best[1], best[2]


_NONE: dict = {}


class _Row:
    """A row being built: its classes, and what each class of a point not in it yet would add (the weight of the
    missing pairs and triples it completes)."""

    def __init__(self, points: Mapping[str, Point], pairs: Missing, triples: MissingTriples | None,
                 rng: random.Random) -> None:
        self.points, self.partners, self.rng = points, pairs.partners, rng
        self.thirds = triples.thirds if triples is not None else _NONE
        self.in3 = triples.keys_in if triples is not None else frozenset()
        self.classes: dict[str, str] = {}
        self.cells: set[Cell] = set()
        self.slots: set[str] = set()
        self.groups: list[Cell] = []  # the row's cells of triple points, as groups
        self.acc: dict[Cell, int] = {}  # group cell -> the weight of the missing triples it completes with the row

    def add(self, k: str, c: str) -> None:
        self.classes[k] = c
        self.cells.add((k, c))
        self.slots.add(self.points[k].slot)
        if k in self.in3:
            x = (k, self.points[k].group(c))
            for y in self.groups:
                for z, w in self.thirds.get(_pair(x, y), _NONE).items():
                    self.acc[z] = self.acc.get(z, 0) + w
            self.groups.append(x)

    def pick(self, k: str, group: str | None = None) -> tuple[int, str]:
        """The class of point `k` (in `group`, if given) that adds the most, and what it adds; ties go to a nominal
        class, then at random."""
        p = self.points[k]
        scores = []
        for c in p.names():
            if group is not None and p.group(c) != group:
                continue
            mates = self.partners.get((k, c), _NONE)
            gain = sum(mates[h] for h in mates.keys() & self.cells)
            if k in self.in3:
                gain += self.acc.get((k, p.group(c)), 0)
            scores.append((gain, c in p.nominal, self.rng.random(), c))
        top = max(scores)
        return top[0], top[3]


# -- triples: the points that decide memory addressing, three by three, over their classes' groups


def _natural(key: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", key))


_OWN = frozenset({"size", "layout", "dtype", "values"})


def first_points(points: Mapping[str, Point], keys: Collection[str], limit: int,
                 where: Callable[[Point], bool] = lambda p: True) -> tuple[str, ...]:
    """`keys` (those chosen before: a plan's points only grow) and more of `points` (those `where` takes), up to
    `limit` in all: tdiff's own (sizes, layouts, dtypes, values) first, then a user's draws in the order drawn."""
    cands = [k for k, p in points.items() if k in keys or where(p)]
    order = sorted(cands, key=lambda k: (k not in keys, points[k].kind not in _OWN, _natural(points[k].slot),
                                         _natural(k)))
    return tuple(sorted(order[:max(limit, len(keys))]))


def triple_keys(points: Mapping[str, Point], keys: Collection[str] = ()) -> tuple[str, ...]:
    """The addressing points combined three by three (`first_points`, at most `TRIPLE_POINTS`); none where fewer
    than three slots have one."""
    chosen = first_points(points, keys, TRIPLE_POINTS, lambda p: p.addressing and len(p.groups()) > 1)
    return chosen if keys or len({points[k].slot for k in chosen}) >= 3 else ()


def all_triples(points: Mapping[str, Point], keys: Collection[str],
                touching: Collection[str] | None = None) -> set[Triple]:
    """Every triple of groups of three of `keys`' points in different slots (`touching`: only those with one of
    these points)."""
    ks = sorted(keys)
    out: set[Triple] = set()
    for a, b, c in itertools.combinations(ks, 3):
        if len({points[a].slot, points[b].slot, points[c].slot}) < 3:
            continue
        if touching is not None and a not in touching and b not in touching and c not in touching:
            continue
        for ga in points[a].groups():
            for gb in points[b].groups():
                for gc in points[c].groups():
                    out.add(((a, ga), (b, gb), (c, gc)))
    return out


def triples_of(seen: Mapping[str, str], points: Mapping[str, Point], keys: Collection[str]) -> set[Triple]:
    """The triples a drawn case holds (the groups of its `keys` points' classes, three by three)."""
    cells = sorted((k, points[k].group(c)) for k, c in seen.items() if k in keys and k in points)
    return {(a, b, c) for a, b, c in itertools.combinations(cells, 3)
            if len({points[a[0]].slot, points[b[0]].slot, points[c[0]].slot}) == 3}


def owner(key: str) -> str:
    """What a point belongs to: the tensor or input it is drawn for (`x` of "x.shape[1]", `inputs` of
    "inputs#3[0..4]"); "" for a named dimension ("S"), which several tensors share."""
    cut = min((i for i in (key.find("."), key.find("#")) if i >= 0), default=-1)
    return key[:cut] if cut >= 0 else ""


#: what a triple of one owner's points weighs on top (a tensor's own size, stride class and dtype; the choices of one
#: composite; the named dimensions): they decide one tensor's addressing together, so they come first
SAME_OWNER = 4


def triple_weight(triple: Triple, points: Mapping[str, Point]) -> int:
    w = points[triple[0][0]].weight * points[triple[1][0]].weight * points[triple[2][0]].weight
    return w + SAME_OWNER if len({owner(k) for k, _ in triple}) == 1 else w


class MissingTriples(dict):
    """Triples -> weight, in sorted order, that no row has covered yet; also, for each pair of their cells, the
    third cells that complete a missing triple (`thirds`), kept in step as triples are popped, so that a row adds
    up a group's gain from the pairs it already holds."""

    def __init__(self, weights: Iterable[tuple[Triple, int]] = (), keys: Collection[str] = ()) -> None:
        super().__init__()
        self.keys_in: frozenset[str] = frozenset()  # the points of its triples
        self.thirds: dict[Pair, dict[Cell, int]] = {}
        self.extend(weights, keys)

    def extend(self, weights: Iterable[tuple[Triple, int]], keys: Collection[str]) -> None:
        """More triples (of points `keys`, some new), kept in sorted order."""
        fresh = sorted(weights)
        if fresh and self and fresh[0][0] < next(reversed(self)):
            merged = sorted([*self.items(), *fresh])
            self.clear()
            self.update(merged)
        else:
            self.update(fresh)
        self.keys_in = self.keys_in | frozenset(keys)
        for (a, b, c), w in fresh:
            self.thirds.setdefault((a, b), {})[c] = w
            self.thirds.setdefault((a, c), {})[b] = w
            self.thirds.setdefault((b, c), {})[a] = w

    def pop(self, triple: Triple, *default: int) -> int:  # type: ignore[override]  # (as Missing.pop)
        if triple in self:
            a, b, c = triple
            del self.thirds[(a, b)][c]
            del self.thirds[(a, c)][b]
            del self.thirds[(b, c)][a]
        return super().pop(triple, *default)


def missing_triples(points: Mapping[str, Point], keys: Collection[str], done: Collection[Pair | Triple],
                    grown: MissingTriples | None = None, new: Collection[str] | None = None) -> MissingTriples:
    """The triples of `keys` not in `done`, with their weights (`grown`: those of the points before, to which the
    triples touching the `new` points are added)."""
    out = grown if grown is not None else MissingTriples()
    out.extend(((t, triple_weight(t, points)) for t in all_triples(points, keys, new if grown is not None else None)
                if t not in done), keys)
    return out
