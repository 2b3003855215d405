"""Primitive strategies built once and reused: building a strategy per draw costs hypothesis time."""

from __future__ import annotations

from functools import cache

from hypothesis import strategies as st


@cache
def choice(values: tuple) -> st.SearchStrategy:
    """`sampled_from(values)`, shrinking towards the first."""
    return st.sampled_from(values)


@cache
def integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)
