"""Dense tensor values with special values sprinkled in on purpose.

A draw is small and shrink-friendly: a distribution, a seed for dense values, a structure
(`STRUCTURES`: dense, or one that dense values hide bugs behind; for tensors of two or more
dimensions that may hold infinities, also a row of infinities, `INFINITE_ROWS`), and a short list of
(special kind, position). Shrinking removes specials and moves towards dense small integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

from ..core.dtypes import DType, from_float64
from . import hints
from .cached import choice, integers
from .plan import steer
from .plan.classes import Klass

FLOAT_SPECIALS = ("nan", "inf", "-inf", "-0.0", "subnormal", "max", "lowest", "tiny")
INT_SPECIALS = ("int-min", "int-max", "zero", "minus-one")
DISTRIBUTIONS = ("smallint", "normal", "uniform", "wide")
#: the structure of a float tensor's dense values; "dense" (as drawn) is the most common and what a
#: draw shrinks to. The others are where kernels hide bugs that dense values mask: shifted (the largest
#: value is not 0, so a forgotten max subtraction shows), negative (every value below 0: a running max
#: started at 0), constant (every value equal: variance 0), sparse (mostly 0, a few large values)
STRUCTURES = ("dense", "dense", "dense", "shifted", "negative", "constant", "sparse")
#: a structure of 2-D and larger float tensors whose values may be infinite: one row (along the last
#: dimension) of infinities, where reductions go wrong (a max-subtracting logsumexp gives NaN for a row
#: of -inf, a fully masked row, where torch gives -inf); drawn as two of nine structures
INFINITE_ROWS = "infinite rows"
#: the rows it draws (each needs the infinities it holds to be allowed): every element -inf, one +inf
#: among dense values, every element +inf or -inf (both present)
ROW_KINDS = ("row of -inf", "row of -inf", "row with one +inf", "row of +inf and -inf")
#: a structure drawn where the kernel compares values with float constants (`tdiff.generate.thresholds`: `x > 20.0`, a
#: softplus threshold): half the values (at least three) on one of them and either side of it (relative steps
#: of 2^-9 and 2^-6, which float16 keeps apart), the others dense; two of nine or eleven structures
NEAR = "near a constant"
#: a value class of the boundary plan: a normal draw of scale 2^-8 to 2^-6
SMALL = "small"
#: a structure, and a value class of the boundary plan, of float tensors: every value a common offset plus noise a
#: few to a few thousand ulps of it wide (`offset_values`): activations after a bias, timestamps, probabilities near
#: 1; where statistics cancel (a variance as E[x^2] - E[x]^2, a sum of differences taken as a difference of sums)
#: and normalisations divide by a spread that is small against the values; one of eight to twelve structures
OFFSET = "offset"


@dataclass(frozen=True)
class Values:
    """What values a tensor may hold. Narrow with bounds and by switching special kinds off."""

    min_value: float | None = None
    max_value: float | None = None
    nan: bool = True
    inf: bool = True
    neg_zero: bool = True
    subnormal: bool = True
    extremes: bool = True  # the dtype's max and lowest, integers at the dtype's edges
    specials: bool = True  # False: no special values at all
    tiny: bool = True  # the dtype's smallest normal value

    def kinds(self, dt: DType) -> list[str]:
        """The special kinds allowed for `dt` under these bounds."""
        if not self.specials or dt.kind == "bool":
            return []
        lo = -math.inf if self.min_value is None else self.min_value
        hi = math.inf if self.max_value is None else self.max_value
        out: list[str] = []
        if dt.is_float:
            if self.nan and dt.has_nan:
                out.append("nan")
            if self.inf and dt.has_inf:
                out += [k for k, v in (("inf", math.inf), ("-inf", -math.inf)) if lo <= v <= hi]
            if self.neg_zero and lo <= 0 <= hi:
                out.append("-0.0")
            if self.subnormal and hi > 0:
                out.append("subnormal")
            if self.extremes:
                out += [k for k, v in (("max", float(dt.max)), ("lowest", float(dt.min))) if lo <= v <= hi]
            if self.tiny and hi > 0 and lo <= dt.tiny:
                out.append("tiny")
        else:
            for k, v in (("int-min", dt.min), ("int-max", dt.max), ("zero", 0), ("minus-one", -1)):
                if lo <= v <= hi and dt.min <= v <= dt.max and (self.extremes or k in ("zero", "minus-one")):
                    out.append(k)
        return out


def values(min_value: float | None = None, max_value: float | None = None, *, nan: bool = True,
           inf: bool = True, neg_zero: bool = True, subnormal: bool = True, extremes: bool = True,
           specials: bool = True, tiny: bool = True) -> Values:
    """Narrow the values of `tensors(values=...)`: bounds, and which special values may appear (`tiny`: the
    dtype's smallest normal value)."""
    if min_value is not None and max_value is not None and min_value > max_value:
        raise ValueError(f"min_value {min_value} > max_value {max_value}")
    return Values(min_value, max_value, nan, inf, neg_zero, subnormal, extremes, specials, tiny)


DEFAULT = Values()


def special_value(kind: str, dt: DType) -> float:
    return {
        "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0.0": -0.0,
        "subnormal": dt.smallest_subnormal * 3 if dt.is_float else 0.0,
        "max": float(dt.max), "lowest": float(dt.min), "tiny": dt.tiny if dt.is_float else 0.0,
        "int-min": float(dt.min), "int-max": float(dt.max), "zero": 0.0, "minus-one": -1.0,
    }[kind]


#: NaNs tdiff draws carry a payload, so a NaN that came from an input is told from torch.empty's fill
NAN_BITS = {"float32": (np.uint32, 0x7FC00ABC), "float16": (np.uint16, 0x7E05), "bfloat16": (np.uint16, 0x7FC5),
            "float64": (np.uint64, 0x7FF8000000000ABC)}


def special_carrier(kind: str, dt: DType) -> np.generic:
    """The carrier value of a special kind for a dtype (exact for 64-bit integer edges)."""
    if kind == "nan" and dt.name in NAN_BITS:
        bits, value = NAN_BITS[dt.name]
        return np.array([value], dtype=bits).view(dt.carrier)[0]
    if dt.is_float:
        return to_carrier(np.array([special_value(kind, dt)]), dt)[0]
    value = {"int-min": int(dt.min), "int-max": int(dt.max), "zero": 0, "minus-one": -1}[kind]
    carrier: np.generic = np.array(value, dtype=dt.carrier)[()]  # type: ignore[assignment]  # (numpy types [()] as an array)
    return carrier


def dense(dist: str, seed: int, scale: int, n: int, dt: DType, spec: Values) -> np.ndarray:
    """`n` dense values as float64 (ints exact), in the requested bounds."""
    rng = np.random.default_rng(seed)
    if dt.kind == "bool":
        return rng.integers(0, 2, n).astype(np.float64)
    lo = spec.min_value
    hi = spec.max_value
    if dt.is_float:
        if dist == "smallint":
            x = rng.integers(-16, 17, n).astype(np.float64)
        elif dist == "normal":
            x = rng.standard_normal(n) * 2.0**scale
        elif dist == "uniform":
            a = -1.0 if lo is None else lo
            b = 1.0 if hi is None else hi
            x = rng.uniform(a, b, n) if b > a else np.full(n, a)
        else:  # wide: magnitudes over a large part of the dtype's range
            emax = min(60.0, math.log2(float(dt.max)) / 2)
            x = rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-emax, emax, n))
    else:
        dlo, dhi = int(dt.min), int(dt.max)
        if dist == "smallint":
            a, b = max(dlo, -16), min(dhi, 16)
        elif dist in ("normal", "uniform"):
            a, b = max(dlo, -1000), min(dhi, 1000)
        else:
            a, b = dlo, dhi
        if lo is not None:
            a = max(a, math.ceil(lo))
        if hi is not None:
            b = min(b, math.floor(hi))
        x = rng.integers(a, b, n, endpoint=True, dtype=np.int64).astype(np.float64) if b >= a \
            else np.full(n, float(a))
        return x
    if lo is not None and lo >= 0:
        x = np.abs(x)
    if hi is not None and hi <= 0:
        x = -np.abs(x)
    if lo is not None or hi is not None:
        x = np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    return x


def structure(kind: str, x: np.ndarray, seed: int, dt: DType, spec: Values) -> np.ndarray:
    """Dense float values `x` given one of `STRUCTURES` (within the bounds of `spec`)."""
    if kind == "dense" or not dt.is_float or not x.size:
        return x
    rng = np.random.default_rng(seed ^ 0x5EED)
    if kind == NEAR and hints.levels():
        # at least three values (all where fewer): on a constant, just above, just below, and so on
        at = rng.permutation(x.size)[:max(min(3, x.size), x.size // 2)]
        levels = np.array(hints.levels())
        steps = np.array([0.0, 2.0**-9, -2.0**-9, 2.0**-6, -2.0**-6])
        x = x.copy()
        x[at] = levels[np.arange(at.size) // steps.size % levels.size] * (1 + steps[np.arange(at.size) % steps.size])
    elif kind == OFFSET:
        x = offset_values(x, rng, dt, spec)
    elif kind == "shifted":
        x = x + rng.choice([-8.0, -1.5, 1.5, 8.0])
    elif kind == "negative":
        x = -np.abs(x) - rng.uniform(0.25, 4.0)
    elif kind == "constant":
        x = np.full_like(x, x[0] if x[0] != 0 else 1.0)
    elif kind == "sparse":
        k = min(3, x.size)
        x = np.zeros_like(x)
        x[rng.choice(x.size, k, replace=False)] = rng.choice([-1.0, 1.0], k) * rng.uniform(4.0, 64.0, k)
    lo = -np.inf if spec.min_value is None else spec.min_value
    hi = np.inf if spec.max_value is None else spec.max_value
    return np.clip(x, lo, hi)


def offset_values(x: np.ndarray, rng: np.random.Generator, dt: DType, spec: Values) -> np.ndarray:
    """`OFFSET`: c + c * 2^-j * z, z the dense values `x` scaled to at most 1 in magnitude; c of magnitude 1 to 8192
    (inside the bounds where `spec` has them), j from a third of the dtype's mantissa bits (at least 4) to all of
    them less one: a third or more of the precision lost to the offset (float32: a relative spread of 2^-7 down to
    a few ulps; float16: 2^-4 to 2^-9)."""
    lo = -8192.0 if spec.min_value is None else max(spec.min_value, -8192.0)
    hi = 8192.0 if spec.max_value is None else min(spec.max_value, 8192.0)
    if spec.min_value is None and spec.max_value is None:
        c = float(rng.choice([-1.0, 1.0]) * 2.0 ** rng.integers(0, 13) * rng.uniform(1.0, 2.0))
    else:
        c = float(rng.uniform(lo, hi)) if hi > lo else lo
    finite = np.isfinite(x)
    top = float(np.abs(x[finite]).max()) if finite.any() else 0.0
    z = np.where(finite, x, 0.0) / top if top > 0 else np.zeros_like(x)
    bits = int(round(-math.log2(dt.eps)))  # the mantissa's
    return c + abs(c) * 2.0 ** -float(rng.integers(max(4, bits // 3), max(bits, 5))) * z


def to_carrier(x: np.ndarray, dt: DType) -> np.ndarray:
    if dt.kind in ("int", "uint"):
        return x.astype(np.int64).astype(dt.carrier)
    return from_float64(x, dt)


@lru_cache(maxsize=4096)
def _placements(kinds: tuple[str, ...], n: int) -> st.SearchStrategy[list[tuple[str, int]]]:
    return st.lists(st.tuples(choice(kinds), integers(0, n - 1)), max_size=min(6, n))


@st.composite
def draw_values(draw: st.DrawFn, n: int, dt: DType, spec: Values = DEFAULT) -> tuple[np.ndarray, tuple[str, ...]]:
    """(carrier values of length n, special kinds placed)."""
    return values_of(draw, n, dt, spec)


def row_kinds(dt: DType, spec: Values) -> tuple[str, ...]:
    """The infinite rows `spec` allows for `dt` (none where it rules out the infinities they hold)."""
    allowed = set(spec.kinds(dt))
    need = {"row of -inf": {"-inf"}, "row with one +inf": {"inf"}, "row of +inf and -inf": {"inf", "-inf"}}
    return tuple(k for k in ROW_KINDS if need[k] <= allowed)


def values_of(draw: st.DrawFn, n: int, dt: DType, spec: Values = DEFAULT,
              rows: np.ndarray | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """`draw_values` as a plain function of `draw` (cheaper inside other composites). `rows`: the
    row (along the last dimension) of each of the n values, for tensors of two or more dimensions:
    they may draw the `INFINITE_ROWS` structure."""
    dists = DISTRIBUTIONS if spec.min_value is None or dt.is_float else DISTRIBUTIONS[:-1]
    if steer.active() and n:
        with steer.semantic():
            out, drawn, form = _planned(draw, n, dt, spec, rows, dists)
            steer.saw_class("", value_class((*drawn, form)))
            return out, drawn
    return _values(draw, n, dt, spec, rows, dists)[:2]


#: the value classes of a boundary plan (`value_class`), each with the special kinds that make it
SPECIAL_CLASSES = {"special": ("nan", "inf", "-inf", "-0.0"), "tiny": ("subnormal", "tiny"),
                   "extremes": ("max", "lowest", "int-min", "int-max"), "zero or -1": ("zero", "minus-one")}


def forms(by_row: bool) -> tuple[str, ...]:
    """The structures a float tensor's values are drawn from (see `STRUCTURES`, `OFFSET`, `INFINITE_ROWS`, `NEAR`)."""
    out = STRUCTURES + (OFFSET,) + ((INFINITE_ROWS,) * 2 if by_row else ())
    return out + (NEAR,) * 2 if hints.levels() else out


def value_class(drawn: tuple[str, ...]) -> str:
    """The class of a tensor's values in a boundary plan: an infinite row (of each `ROW_KINDS`), special
    values, tiny values, extremes, a structure (shifted, negative, constant, sparse), small values (a
    normal draw of scale 2^-8 to 2^-6: rows whose mean square is tiny, where eps matters), values around an
    offset (`OFFSET`) or ordinary."""
    for d in drawn:
        if d in ROW_KINDS:
            return d
    if NEAR in drawn:
        return NEAR
    if OFFSET in drawn:
        return OFFSET
    for name, kinds in SPECIAL_CLASSES.items():
        if any(d in kinds for d in drawn):
            return name
    if any(d in STRUCTURES[3:] for d in drawn):  # (not "dense": ordinary values)
        return "structured"
    return SMALL if SMALL in drawn else "ordinary"


def _classes(dt: DType, spec: Values, rows: np.ndarray | None, dists: tuple[str, ...]) -> tuple[Klass, ...]:
    kinds = spec.kinds(dt)
    out = [Klass("ordinary", tuple(("ordinary", d, "") for d in dists))]
    if dt.is_float and "normal" in dists:
        out.append(Klass(SMALL, tuple((SMALL, "normal", str(k)) for k in (-8, -7, -6))))
    for name, of in SPECIAL_CLASSES.items():
        members = tuple((name, d, k) for k in of if k in kinds for d in dists)
        if members:
            out.append(Klass(name, members))
    if dt.is_float:
        out.append(Klass("structured", tuple(("structured", d, f) for f in STRUCTURES[3:] for d in dists)))
        out.append(Klass(OFFSET, tuple((OFFSET, d, "") for d in dists)))
        if rows is not None:
            for k in dict.fromkeys(row_kinds(dt, spec)):
                out.append(Klass(k, tuple((k, d, "") for d in dists)))
        if hints.levels():
            out.append(Klass(NEAR, tuple((NEAR, d, "") for d in dists)))
    return tuple(out)


def _planned(draw: st.DrawFn, n: int, dt: DType, spec: Values, rows: np.ndarray | None,
             dists: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...], str]:
    """`values_of` at a planned case: the script of primitive choices that draws the wanted class."""
    classes = _classes(dt, spec, rows, dists)
    want = steer.choose("", classes, weight=1, nominal=("ordinary",), kind="values")
    if want is not None and not any(want in k.members for k in classes):
        # (the point's classes were learnt from a draw that offered more: rows where this one has none)
        steer.refused("", want, tuple(k.name for k in classes))
        want = None
    if want is not None:  # (a member of this draw's classes: its distribution is among `dists`)
        cls, dist, what = want
        by_row = row_kinds(dt, spec) if rows is not None and dt.is_float else ()
        scale = int(what) if cls == SMALL else 0 if cls == "ordinary" else steer.FREE  # (ordinary: not small)
        plan: list = [dists.index(dist), steer.FREE] + ([scale] if dist == "normal" else [])
        if dt.is_float:
            form = {"structured": what, NEAR: NEAR, OFFSET: OFFSET}.get(
                cls, INFINITE_ROWS if cls in ROW_KINDS else "dense")
            plan.append(forms(bool(by_row)).index(form))
        kinds = tuple(spec.kinds(dt))
        if kinds:
            plan += [True, kinds.index(what), steer.FREE, False] if what in kinds else [False]
        if cls in ROW_KINDS and by_row:
            plan.append(by_row.index(cls))  # which row (`infinite_row`)
        steer.script(plan)
    return _values(draw, n, dt, spec, rows, dists)


def _values(draw: st.DrawFn, n: int, dt: DType, spec: Values, rows: np.ndarray | None,
            dists: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...], str]:
    dist = draw(choice(dists))
    seed = draw(integers(0, 2**32 - 1))
    scale = draw(integers(-8, 3)) if dist == "normal" else 0  # down to ~0.004: tiny rows, where eps matters
    by_row = row_kinds(dt, spec) if rows is not None and dt.is_float and n else ()
    form = draw(choice(forms(bool(by_row)))) if dt.is_float else "dense"
    x = structure(form, dense(dist, seed, scale, n, dt, spec), seed, dt, spec)
    kinds = tuple(spec.kinds(dt))
    placed: list[tuple[str, int]] = []
    if kinds and n:
        placed = draw(_placements(kinds, n))
    out = to_carrier(x, dt)
    final = dict((pos, kind) for kind, pos in placed)  # a later special at the same position wins
    for pos, kind in final.items():
        out[pos] = special_carrier(kind, dt)
    drawn = set(final.values())
    if form == INFINITE_ROWS:  # on top of the dense values and the specials
        drawn.add(infinite_row(draw, out, rows, dt, by_row))  # type: ignore[arg-type]  # (drawn only with by_row)
    # the structure, and for `value_class` whether dense values are small (the tags name special values only)
    what = SMALL if form == "dense" and dist == "normal" and scale <= -6 else form
    return out, tuple(sorted(drawn)), what


def infinite_row(draw: st.DrawFn, out: np.ndarray, rows: np.ndarray, dt: DType, allowed: tuple[str, ...]) -> str:
    """Make one drawn row of `out` (carrier values; `rows` gives each value's row) one of the
    `allowed` `ROW_KINDS`; returns the kind."""
    which = draw(choice(allowed))
    ids = np.unique(rows)
    row = int(ids[draw(integers(0, ids.size - 1))])
    at = np.flatnonzero(rows == row)
    if which == "row of -inf":
        out[at] = special_carrier("-inf", dt)
    elif which == "row with one +inf":
        out[at[draw(integers(0, at.size - 1))]] = special_carrier("inf", dt)
    else:  # every element infinite, both signs present where the row has two elements
        signs = np.random.default_rng(draw(integers(0, 2**16 - 1))).integers(0, 2, at.size).astype(bool)
        if at.size > 1:
            signs[0], signs[-1] = True, False
        out[at] = np.where(signs, special_carrier("inf", dt), special_carrier("-inf", dt))
    return which


def poison(dt: DType) -> np.ndarray:
    """The value stored in bytes that belong to no view: NaN, or the byte pattern 0x5A for integers."""
    if dt.is_float:
        return from_float64(np.array([math.nan]), dt)
    if dt.kind == "bool":
        return np.array([True])
    return np.frombuffer(b"\x5a" * dt.itemsize, dtype=dt.carrier).copy()
