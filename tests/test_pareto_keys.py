"""The Pareto front's sort keys, memoized (`tdiff.drive.pareto_keys`): the same keys, the same cases, fewer keys
computed."""

from __future__ import annotations

import hypothesis
import pytest
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from tdiff.drive import pareto_keys

pareto = pytest.importorskip("hypothesis.internal.conjecture.pareto")


def test_a_memoized_key_is_the_key_computed_once_per_sequence():
    calls = []

    def key(seq):
        calls.append(seq)
        return (len(seq), tuple(seq))

    memo = pareto_keys.MemoKey(key, size=2)
    a, b = (1, 2), (1, 2, 3)
    assert memo(a) == key(a) and memo(a) == (2, (1, 2))
    assert len(calls) == 2  # (the memo's call, and the test's own)
    same_value = tuple([1, 2])  # equal, not the same object: computed again (kept by identity)
    assert memo(same_value) == (2, (1, 2)) and len(calls) == 3
    memo(b)  # the oldest (a) leaves the cache
    assert len(memo.kept) == 2
    memo(a)
    assert len(calls) == 5


def _drawn(seed: int) -> tuple[list, int]:
    """The values a targeted hypothesis test with a database draws, and how many sort keys its Pareto front
    computed."""
    seen: list = []
    counted = [0]
    key = pareto.sort_key
    inner = key.key if isinstance(key, pareto_keys.MemoKey) else key

    def counting(seq):
        counted[0] += 1
        return inner(seq)

    if isinstance(key, pareto_keys.MemoKey):
        key.key, key.kept = counting, type(key.kept)()
    else:
        pareto.sort_key = counting

    @hypothesis.seed(seed)
    @hypothesis.settings(max_examples=60, deadline=None)
    @hypothesis.given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=12), st.floats(0, 1))
    def test(xs, f):
        seen.append((tuple(xs), f))
        hypothesis.target(float(sum(xs) % 97), label="a")
        hypothesis.target(float(len(xs)), label="b")

    # (hypothesis.seed drops the database, as tdiff's search puts it back: `search._hypothesis_test`)
    test._hypothesis_internal_use_settings = hypothesis.settings(  # type: ignore[attr-defined]
        test._hypothesis_internal_use_settings, database=InMemoryExampleDatabase())  # type: ignore[attr-defined]

    try:
        test()
    finally:
        if isinstance(key, pareto_keys.MemoKey):
            key.key = inner
        pareto.sort_key = key
    return seen, counted[0]


def test_the_memoized_front_draws_the_same_cases_with_fewer_keys(monkeypatch):
    monkeypatch.setattr(pareto, "sort_key", pareto.sort_key.key if isinstance(pareto.sort_key, pareto_keys.MemoKey)
                        else pareto.sort_key)
    plain, plain_keys = _drawn(7)
    memo = pareto_keys.install()
    assert memo is not None and pareto.sort_key is memo
    assert pareto_keys.install() is memo  # (once per process)
    memoized, memo_keys = _drawn(7)
    assert memoized == plain
    assert len(plain) >= 60
    assert memo_keys < plain_keys / 2, (memo_keys, plain_keys)
