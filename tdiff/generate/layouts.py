"""Layouts: where a view of a given shape sits in its storage (strides, offset, storage size)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from ..core.case import contiguous_strides
from .cached import choice, integers
from .plan import steer
from .plan.classes import categorical

#: every layout class, in shrink order (contiguous first)
LAYOUTS = ("contiguous", "offset", "transposed", "sliced", "split", "padded", "expanded", "size1")
#: drawn unless the tensor is declared read-only (writes through stride 0 are races)
WRITABLE = tuple(x for x in LAYOUTS if x != "expanded")
#: how "size1" strides a dimension of size 1, each as real code leaves it (packed is "contiguous"):
#: inherited from a transpose or unsqueeze (the stride the dimension had next to another), zero (from
#: expand: only where "expanded" is allowed, a read-only tensor) or arbitrary (as_strided, a slice of a
#: larger tensor); the layout is named "size1-<how>"
UNIT_STRIDES = ("inherited", "arbitrary", "zero")


@dataclass(frozen=True)
class Layout:
    kind: str
    strides: tuple[int, ...]
    offset: int
    storage_size: int


def _extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def _contiguous(shape: tuple[int, ...]) -> Layout:
    return Layout("contiguous", contiguous_strides(shape), 0, max(1, _extent(shape, contiguous_strides(shape))))


@st.composite
def layouts(draw: st.DrawFn, shape: tuple[int, ...], itemsize: int, allowed: tuple[str, ...] = WRITABLE) -> Layout:
    """Draw one layout for `shape`; kinds that cannot apply to the shape fall back to contiguous ("size1"
    is drawn only for shapes with a dimension of size 1 beside larger ones)."""
    return draw_layout(draw, shape, itemsize, allowed)


def has_unit(shape: tuple[int, ...]) -> bool:
    """Whether a shape has a dimension of size 1 beside larger ones (a decode step, one head, a batch
    of one): where the stride of that dimension is anyone's guess (PyTorch ignores it)."""
    return len(shape) >= 2 and 1 in shape and any(n > 1 for n in shape)


def unit_between(shape: tuple[int, ...]) -> bool:
    """Whether a dimension of size 1 sits between larger ones ((bsz, 1, heads, hd)): kernels that
    compute a row as `b * S + s` then take the stride of a size-1 dimension for the packed row."""
    big = [i for i, n in enumerate(shape) if n > 1]
    return bool(big) and any(shape[i] == 1 and big[0] < i < big[-1] for i in range(len(shape)))


def layout_kinds(shape: tuple[int, ...], allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The layout classes drawn for `shape`, with repeats as weights: "size1" only where the shape has
    a dimension of size 1 beside larger ones, as half of the draws where it sits between them and a
    quarter elsewhere ((rows, 1), (1, cols))."""
    kinds = tuple(k for k in LAYOUTS if k in allowed and k != "size1")
    if "size1" not in allowed or not has_unit(shape):
        return kinds
    return kinds + ("size1",) * max(1, len(kinds) if unit_between(shape) else -(-len(kinds) // 3))


def draw_layout(draw: st.DrawFn, shape: tuple[int, ...], itemsize: int, allowed: tuple[str, ...] = WRITABLE) -> Layout:
    """`layouts` as a plain function of `draw` (cheaper inside other composites)."""
    kinds = layout_kinds(shape, allowed)
    if kinds and steer.active():
        with steer.semantic():
            lay = _planned(draw, shape, itemsize, allowed, kinds)
            steer.saw_class("", layout_class(lay, itemsize))
            return lay
    return _draw(draw, shape, itemsize, allowed, kinds)


def _offsets(itemsize: int) -> tuple[int, ...]:
    # one element: the pointer is not 16-byte aligned; 16 bytes: aligned but not at the start
    return tuple(sorted({1, 3, max(1, 16 // itemsize)}))


def layout_class(lay: Layout, itemsize: int) -> str:
    """A layout's class in a boundary plan: its kind ("size1-zero" is "size1"), an offset split by the
    alignment Triton specializes on."""
    if lay.kind == "offset":
        return "offset (aligned)" if (lay.offset * itemsize) % 16 == 0 else "offset (misaligned)"
    if lay.kind == "expanded":
        return "expanded (some)" if any(lay.strides) else "expanded (every)"
    return lay.kind.split("-")[0]


def _planned(draw: st.DrawFn, shape: tuple[int, ...], itemsize: int, allowed: tuple[str, ...],
             kinds: tuple[str, ...]) -> Layout:
    # every allowed kind is a class, whether this shape can take it or not ("size1" needs a dimension of
    # size 1): a class the plan wants where the shape rules it out is drawn as hypothesis would
    # (but not those no shape of this rank takes: a size-1 stride or some dimensions expanded, of a 1-d tensor)
    names = [k for k in LAYOUTS if k in allowed and k not in ("offset", "expanded")
             and (k != "size1" or len(shape) >= 2)]
    for k, how in (("offset", ("misaligned", "aligned")), ("expanded", ("every", "some") if len(shape) >= 2
                                                                      else ("every",))):
        if k in allowed:
            names += [f"{k} ({h})" for h in how]
    want = steer.choose("", categorical(names), nominal=("contiguous",), kind="layout")
    if want is not None and want.split(" ")[0] in kinds:
        kind = want.split(" ")[0]
        first = kinds.index(kind)
        if kind == "offset":
            offs = _offsets(itemsize)
            off = 1 if "misaligned" in want else max(1, 16 // itemsize)
            steer.script([first, offs.index(off)])
        elif kind == "expanded" and sum(n > 1 for n in shape) > 1:
            steer.script([first, 0 if "every" in want else 1])
        else:
            steer.script([first])
    return _draw(draw, shape, itemsize, allowed, kinds)


def _draw(draw: st.DrawFn, shape: tuple[int, ...], itemsize: int, allowed: tuple[str, ...],
          kinds: tuple[str, ...]) -> Layout:
    kind = draw(choice(kinds)) if kinds else "contiguous"
    nd = len(shape)
    base = _contiguous(shape)
    if kind == "size1":
        return unit_strided(draw, shape, base, "expanded" in allowed)
    if kind == "offset":
        offset = draw(choice(_offsets(itemsize)))
        return Layout("offset", base.strides, offset, base.storage_size + offset)
    if kind == "transposed" and nd >= 2 and sum(n > 1 for n in shape) >= 2:
        perm = draw(st.permutations(range(nd)).filter(lambda p: list(p) != list(range(nd))))
        parent = tuple(shape[p] for p in perm)
        pstrides = contiguous_strides(parent)
        permuted = [0] * nd
        for i, p in enumerate(perm):
            permuted[p] = pstrides[i]
        return Layout("transposed", tuple(permuted), 0, max(1, _extent(shape, tuple(permuted))))
    if kind == "transposed" and any(n > 1 for n in shape):
        # one dimension of more than one element: a column of a row-major matrix (x[:, j]), so its stride is
        # the matrix's row length, not 1
        dim = next(i for i, n in enumerate(shape) if n > 1)
        row = draw(integers(2, 6))
        row = 16 if row == 6 else row  # (a stride of 16: the class Triton compiles apart for an integer)
        col = draw(integers(0, row - 1))
        strides = tuple(row * base.strides[i] if i == dim or base.strides[i] > base.strides[dim] else base.strides[i]
                        for i in range(nd))
        return Layout("transposed", strides, col, max(1, _extent(shape, strides) + col))
    if kind == "sliced":
        # a view base[a::step] along some dims: gaps between elements, a start offset
        steps = [draw(integers(1, 3)) if n > 1 else 1 for n in shape]
        if all(s == 1 for s in steps) and nd:
            steps[-1] = 2
        parent = tuple(n * s for n, s in zip(shape, steps))
        pstrides = contiguous_strides(parent)
        strides = tuple(ps * s for ps, s in zip(pstrides, steps))
        start = draw(integers(0, 1))
        offset = start * (pstrides[-1] if nd else 0)
        size = max(1, _extent(shape, strides) + offset + (steps[-1] - 1 if nd else 0))
        return Layout("sliced", strides, offset, size)
    if kind == "split" and nd >= 1:
        # one half of torch.split(parent, [a, b], dim): the other half's bytes stay live
        dim = draw(integers(0, nd - 1))
        other = draw(integers(1, 8))
        second = draw(integers(0, 1)) == 1
        grown = list(shape)
        grown[dim] += other
        pstrides = contiguous_strides(tuple(grown))
        offset = other * pstrides[dim] if second else 0
        return Layout("split", pstrides, offset, max(1, _extent(tuple(grown), pstrides)))
    if kind == "padded":
        # rows padded: the leading stride is larger than a row
        pad = draw(integers(1, 5))
        if nd >= 2:
            row = shape[-1] + pad
            padded = [0] * nd
            padded[-1] = 1
            acc = row
            for i in range(nd - 2, -1, -1):
                padded[i] = acc
                acc *= shape[i]
            return Layout("padded", tuple(padded), 0, max(1, _extent(shape, tuple(padded)) + pad))
        return Layout("padded", base.strides, 0, base.storage_size + pad)
    if kind == "expanded" and any(n > 1 for n in shape):
        dims = [i for i, n in enumerate(shape) if n > 1]
        # every dimension broadcast (a scalar expanded: strides all 0) as one draw of two, else some of them
        every = len(dims) == 1 or draw(choice(("every", "some"))) == "every"
        chosen = set(dims) if every else draw(st.sets(st.sampled_from(dims), min_size=1, max_size=len(dims)))
        reduced = tuple(1 if i in chosen else n for i, n in enumerate(shape))
        rstrides = contiguous_strides(reduced)
        strides = tuple(0 if i in chosen else s for i, s in enumerate(rstrides))
        return Layout("expanded", strides, 0, max(1, _extent(reduced, rstrides)))
    return base


def unit_strided(draw: st.DrawFn, shape: tuple[int, ...], base: Layout, zero: bool) -> Layout:
    """A packed layout whose size-1 dimensions carry another stride than the packed one (the view's
    elements and storage are those of `base`): inherited (the stride a size-1 dimension has when it sat
    next to another dimension before a transpose or unsqueeze: a dimension's stride times its size),
    arbitrary, or zero (`zero`: a read-only tensor, as expand leaves it)."""
    how = draw(choice(UNIT_STRIDES if zero else UNIT_STRIDES[:2]))
    strides = list(base.strides)
    extent = max(1, _extent(shape, base.strides))
    for i, n in enumerate(shape):
        if n != 1:
            continue
        if how == "zero":
            strides[i] = 0
            continue
        options = sorted(({base.strides[j] * shape[j] for j in range(len(shape)) if shape[j] > 1} | {1})
                         - {base.strides[i]})
        if how == "inherited" and options:
            strides[i] = options[draw(integers(0, len(options) - 1))]
        else:  # arbitrary: any stride but the packed one
            s = draw(integers(2, 4 * extent + 8))
            strides[i] = s if s != base.strides[i] else s + 1
    return Layout(f"size1-{how}", tuple(strides), 0, base.storage_size)
