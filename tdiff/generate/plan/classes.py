"""Boundary classes of a choice point: the values a plan picks from, grouped by what a kernel tells apart.

A `Point` is one choice a case strategy makes (a tensor's side, its layout, its dtype, its value class,
an integer a user strategy draws). Its `classes` are the groups a covering plan combines; each class
names the values (`members`) that realize it. `class_of` says which class a drawn value fell in.

The points that decide memory addressing (`ADDRESSING`: sizes, layouts, dtypes, a user's integers and
flags) are also combined three by three, over coarser groups of their classes (`Point.group`): a size is
1, a multiple of 16 or a tail; a layout packed, transposed, with gaps, misaligned, a size-1 stride or
expanded; a user's integer its least, its most or one between.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: small primes: sizes that are neither a power of two nor near one
PRIMES = (2, 3, 5, 7, 11, 13)
#: integer ranges wider than this are not planned (a seed, an offset into a large buffer)
WIDEST = 1 << 16
#: integer ranges with at most this many values are planned value by value (an index into a choice)
CATEGORICAL = 12
#: the kinds of point that decide memory addressing: combined three by three (`Point.group`); the rest (value
#: classes, a user's floats) two by two
ADDRESSING = frozenset({"size", "layout", "dtype", "integer", "flag"})
#: a layout class's group in triples: its stride class (`tdiff.generate.layouts.layout_class` names the classes)
LAYOUT_GROUPS = {"sliced": "gaps", "split": "gaps", "padded": "gaps", "offset (aligned)": "gaps",
                 "expanded (every)": "expanded", "expanded (some)": "expanded"}


@dataclass(frozen=True)
class Klass:
    name: str
    members: tuple


@dataclass(frozen=True)
class Point:
    """One choice point: `key` names it ("q.shape[2]", "inputs#0[1..64]"), `classes` partition its values."""

    key: str
    classes: tuple[Klass, ...]
    #: points sharing a slot are alternatives (the same draw with other bounds): never paired together
    slot: str = ""
    #: how much its pairs count: shapes, layouts, dtypes and integers (2) before value classes (1), which the
    #: random search after the plan also varies in every case
    weight: int = 2
    #: the classes a row gives this point when no missing pair asks for another: the ordinary value (a
    #: size away from every boundary, a packed layout, ordinary values), so a boundary class elsewhere in the
    #: row stands among ordinary ones
    nominal: tuple[str, ...] = ()
    #: what it chooses: "size", "layout", "dtype", "values" (tdiff's own), "integer", "flag", "float" (drawn
    #: inside a user's strategy); "" where unknown (planned two by two)
    kind: str = ""

    @property
    def addressing(self) -> bool:
        return self.kind in ADDRESSING

    @property
    def unit(self) -> bool:
        """A size that can be 1 (its least) and else something larger: a decode step, one head, a batch of one."""
        names = self.names()
        return self.kind in ("size", "integer") and bool(self.nominal) and len(names) > 1 and names[0] == "1"

    def group(self, name: str) -> str:
        """The group of class `name` in triples (see the module)."""
        groups = self.__dict__.get("_groups")
        if groups is None:
            groups = _groups(self)
            object.__setattr__(self, "_groups", groups)
        return groups.get(name, name)

    def groups(self) -> tuple[str, ...]:
        """Its groups in triples, in the order of its classes."""
        return tuple(dict.fromkeys(self.group(n) for n in self.names()))

    def class_of(self, value: object) -> str | None:
        for k in self.classes:
            if _member(value, k.members):
                return k.name
        return None

    def names(self) -> tuple[str, ...]:
        names = self.__dict__.get("_names")
        if names is None:  # (a plan asks millions of times: kept once made)
            names = tuple(k.name for k in self.classes)
            object.__setattr__(self, "_names", names)
        return names


def _groups(p: Point) -> dict[str, str]:
    if p.kind == "layout":
        return {n: LAYOUT_GROUPS.get(n, n) for n in p.names()}
    if p.kind not in ("size", "integer"):
        return {}
    ints = [k for k in p.classes if all(isinstance(m, int) for m in k.members)]
    if p.kind == "integer" and len(p.classes) <= CATEGORICAL and all(len(k.members) == 1 for k in ints):
        if len(p.classes) <= 3:  # (each value its own group)
            return {}
        first, last = p.classes[0].name, p.classes[-1].name
        inner = f"{p.classes[1].name}..{p.classes[-2].name}"
        return {k.name: k.name if k.name in (first, last) else inner for k in p.classes}
    out = {}
    for k in ints:  # a size's classes: 1 (and the least, 0, negative) as they are; else a multiple of 16 or a tail
        if k.name in ("1", "least", "0", "negative"):
            continue
        out[k.name] = "multiple of 16" if all(m % 16 == 0 for m in k.members) else "tail"
    return out


def _member(value: object, members: tuple) -> bool:
    for m in members:
        if isinstance(m, float) and isinstance(value, float):
            if (math.isnan(m) and math.isnan(value)) or (m == value and math.copysign(1, m) == math.copysign(1, value)):
                return True
        elif type(m) is type(value) and m == value:
            return True
    return False


def size_classes(lo: int, hi: int, edges: Sequence[int] = (), thresholds: Sequence[int] = ()) -> tuple[Klass, ...]:
    """Classes of an integer size or scalar in [lo, hi]: 1 (or the least), 2 and small primes, multiples of 16
    (Triton compiles those apart), their neighbours and the given `edges` (block sizes -1/=/+1), the
    kernel's `thresholds` (and their neighbours), the most. Empty classes are left out; a value is in the
    first class that holds it."""
    out: list[Klass] = []
    taken: set[int] = set()

    def add(name: str, values: Sequence[int]) -> None:
        vals = tuple(sorted({int(v) for v in values if lo <= v <= hi} - taken))
        if vals:
            taken.update(vals)
            out.append(Klass(name, vals))

    add("1" if lo <= 1 <= hi else "least", [1] if lo <= 1 <= hi else [lo])
    if lo <= 0 <= hi:
        add("0", [0])
    if lo < 0:
        add("negative", [-1, lo])
    add("most", [hi])
    add("threshold", thresholds)  # (the sizes on them: C-1, C, C+1 of a comparison, k*M + r of a modulus)
    add("small prime", PRIMES)
    sixteens = [m for m in range(16, min(hi, 16 * 64) + 1, 16)]
    add("multiple of 16", sixteens)
    near = [t + d for t in (*sixteens, *thresholds) for d in (-1, 1)]
    add("block edge", [*edges, *near])
    return tuple(out)


#: the nominal classes of a size: away from 1 and from the range's ends
SIZE_NOMINAL = ("small prime", "block edge", "multiple of 16", "threshold", "most")


def int_classes(lo: int, hi: int) -> tuple[Klass, ...] | None:
    """Classes of an integer a user strategy draws in [lo, hi]: each value where there are few, else the size
    classes; None where the range is too wide to mean a size."""
    if hi - lo + 1 <= CATEGORICAL:
        return tuple(Klass(str(v), (v,)) for v in range(lo, hi + 1))
    if hi - lo > WIDEST:
        return None
    return size_classes(lo, hi)


def float_classes(lo: float, hi: float, allow_nan: bool, smallest: float) -> tuple[Klass, ...]:
    """Classes of a float a user strategy draws: zero, -0.0, the smallest magnitude, one, the bounds, the
    infinities and NaN where allowed."""
    cands = [("0", 0.0), ("-0.0", -0.0), ("tiny", smallest), ("1", 1.0), ("-1", -1.0),
             ("least", lo), ("most", hi)]
    out: list[Klass] = []
    for name, v in cands:
        if math.isfinite(v) and lo <= v <= hi and not (v == 0 and math.copysign(1, v) < 0 and lo >= 0):
            out.append(Klass(name, (v,)))
    if allow_nan:
        out.append(Klass("nan", (math.nan,)))
    return tuple(out)


BOOLS = (Klass("False", (False,)), Klass("True", (True,)))


def categorical(names: Sequence[str], values: Sequence[object] | None = None) -> tuple[Klass, ...]:
    """One class per distinct name (repeats, weights of a draw, fold into the first)."""
    seen: dict[str, Klass] = {}
    for i, n in enumerate(names):
        if n not in seen:
            seen[n] = Klass(n, (values[i] if values is not None else n,))
    return tuple(seen.values())
