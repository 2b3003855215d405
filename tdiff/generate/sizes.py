"""Integer strategies aimed at masks and Triton's specialization classes."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from hypothesis import strategies as st

from . import hints
from .plan import steer
from .plan.classes import SIZE_NOMINAL, size_classes

SMALL_PRIMES = (2, 3, 5, 7, 11, 13)


def _hinted(special: list[int], lo: int, hi: int) -> st.SearchStrategy[int]:
    """One of `special` or any integer in [lo, hi]; where thresholds are in range, also one of their
    values, more often in an aimed case (see `tdiff.generate.hints`)."""
    plain = st.integers(lo, hi)
    branches = (st.sampled_from(special), plain) if special else (plain,)
    base = st.one_of(*branches) if special else plain
    with_near: dict[tuple[int, ...], tuple[st.SearchStrategy[int], st.SearchStrategy[int]]] = {}

    @st.composite
    def draw(draw: Any) -> int:
        near = hints.near(lo, hi)
        if steer.active():  # a planned case: the value the plan wants, drawn through the plain branch
            return _planned(draw, near)
        return draw(_strategy(near))

    def _strategy(near: tuple[int, ...]) -> st.SearchStrategy[int]:
        if not near:
            return base
        if near not in with_near:
            on = st.sampled_from(near)
            # plain: on a threshold as one branch of three; aimed: as two of four (a second, distinct
            # sampled_from: one_of drops a repeated branch), so half the time
            with_near[near] = (st.one_of(*branches, on), st.one_of(st.sampled_from(near), *branches, on))
        return with_near[near][hints.aimed()]

    def _planned(draw: Any, near: tuple[int, ...]) -> int:
        with steer.semantic():
            want = steer.choose("", size_classes(lo, hi, special, near), nominal=SIZE_NOMINAL, kind="size")
            if want is not None and lo <= want <= hi:
                # the index of the plain branch in the one_of drawn (none: the plain strategy alone)
                plain_at = (1 if special else 0) + (1 if near and hints.aimed() else 0)
                steer.script([want] if not special and not near else [plain_at, want])
            value = draw(_strategy(near))
            steer.saw("", value)
            return value

    return draw()


def _within(values: list[int], lo: int, hi: int) -> list[int]:
    return sorted({v for v in values if lo <= v <= hi})


def sizes(block: int | Sequence[int] | None = None, *, min_value: int = 1, max_value: int | None = None,
          max_blocks: int = 4) -> st.SearchStrategy[int]:
    """Sizes that exercise masked tails: 1, small primes, and k*B-1, k*B, k*B+1 for a block size B
    (or for each of several, e.g. an autotuned kernel's configs), k up to `max_blocks`.

    Without `block`, the neighbours of 16, 32 and 64 are used. Shrinks towards `min_value`.
    """
    blocks = (block,) if isinstance(block, int) else tuple(block) if block else (16, 32, 64)
    if not blocks or any(not isinstance(b, int) or b < 1 for b in blocks):
        raise ValueError(f"block must be a positive int or a sequence of them, got {block!r}")
    return _sizes(blocks, min_value, max_value, max_blocks)


@cache
def _sizes(blocks: tuple[int, ...], min_value: int, max_value: int | None, max_blocks: int) -> st.SearchStrategy[int]:
    top = max_value if max_value is not None else max(blocks) * max_blocks + 1
    if top < min_value:
        raise ValueError(f"max_value {max_value} < min_value {min_value}")
    edges = [1, *SMALL_PRIMES]
    for b in blocks:
        for k in range(1, max_blocks + 1):
            edges += [k * b - 1, k * b, k * b + 1]
    special = _within(edges, min_value, top)
    return _hinted(special, min_value, top)


@cache
def ints(min_value: int = 1, max_value: int = 4096) -> st.SearchStrategy[int]:
    """Integers hitting each class Triton specializes on: equal to 1, divisible by 16, odd, other."""
    special = _within([1, 16, 32, 48, 64, 3, 7, 17, 33, 2, 6, 24, 0, -1], min_value, max_value)
    return _hinted(special, min_value, max_value)


def specialization(n: int) -> str:
    """The class Triton compiles separately for an integer argument."""
    if n == 1:
        return "eq1"
    if n % 16 == 0:
        return "div16"
    return "odd" if n % 2 else "other"


@cache
def sides(min_side: int = 1, max_side: int = 64) -> st.SearchStrategy[int]:
    """Tensor sides: small and odd sizes first, powers of two and their neighbours."""
    edges = [1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
             48, 80, 96, 112, 144, 160, 192]  # multiples of 16 that are not powers of two (masks that assume them)
    special = _within(edges, min_side, max_side)
    return _hinted(special, min_side, max_side)
