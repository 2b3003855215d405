"""Thresholds: the constants a kernel and its launch compare sizes with are read off the source, and
the size strategies draw the sizes on them, so a bug on the far side of `if n <= 600` or in an
`n % 100 == 0` fast path is found at the CI example count."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst
from tdiff.core.kernels import jit_function
from tdiff.generate.hints import kernel_hints
from tdiff.generate.thresholds import Threshold, thresholds

from . import coverage_kernels as CK

OPTS = tdiff.RunOptions(profile="ci", isolation="none", corpus_dir=None, repro_dir=None, shrink_budget=0)
GLOBAL_LIMIT = 4000


def _check(kernel):
    (c,) = tdiff.declaration.checks_of(kernel)
    return c


@pytest.fixture
def no_local_constants(monkeypatch):
    """hypothesis draws some integers from constants in the repository's source; without them the
    draws do not depend on what else the code holds (see bench/power/power.py: freeze_local_constants)."""
    providers = pytest.importorskip("hypothesis.internal.conjecture.providers")
    if not hasattr(providers, "_get_local_constants") or not hasattr(providers, "Constants"):
        pytest.skip("this hypothesis draws no local constants")
    monkeypatch.setattr(providers, "_get_local_constants", lambda: providers.Constants())
    with contextlib.suppress(Exception):
        providers.CONSTANTS_CACHE.cache.clear()
    yield
    with contextlib.suppress(Exception):
        providers.CONSTANTS_CACHE.cache.clear()


def test_comparisons_and_moduli_are_read_from_the_kernel_and_the_launch():
    c = _check(CK.threshold_bug)
    assert [(t.kind, t.constant, t.remainder) for t in thresholds(jit_function(c.kernel), c.launch)] == \
        [("modulus", 100, 0)]
    c = _check(CK.launch_threshold_bug)
    (t,) = thresholds(jit_function(c.kernel), c.launch)  # `n <= LIMIT` in launch, LIMIT a module constant
    assert (t.kind, t.constant) == ("compare", 600) and t.where.startswith("coverage_kernels.py:")
    assert thresholds(jit_function(c.kernel), None) == ()


def _helper(n):
    return 1024 if n > GLOBAL_LIMIT else 256


def test_python_callees_of_the_launch_are_read_and_small_or_float_constants_are_not():
    def launch(kernel, x):
        n = x.numel()
        if n > 2.5 or n == 2 or n % 2 == 0:  # a float, and constants every strategy draws anyway
            pass
        return _helper(n)

    (t,) = thresholds(None, launch)
    assert (t.kind, t.constant) == ("compare", GLOBAL_LIMIT)


def test_threshold_values_within_bounds():
    assert Threshold("compare", 600).values(1, 2000) == [599, 600, 601]
    assert Threshold("compare", 600).values(1, 600) == [599, 600]
    assert Threshold("modulus", 100).values(1, 450) == [100, 200, 300, 400]
    assert Threshold("modulus", 16, 3).values(1, 60) == [19, 35, 51]
    many = Threshold("modulus", 16).values(1, 100_000)
    assert len(many) == 12 and many[:4] == [16, 32, 48, 64] and all(v % 16 == 0 for v in many)


def _draws(hints, strategy, n=60):
    seen: list[int] = []

    @settings(max_examples=n, database=None, derandomize=True)
    @given(st.data())
    def run(data):
        with kernel_hints(hints):
            seen.append(data.draw(strategy))

    run()
    return seen


@pytest.mark.parametrize("strategy", [tst.sizes(block=16, max_value=2000), tst.sides(1, 2000), tst.ints(1, 2000)])
def test_size_strategies_draw_the_thresholds_in_their_range_and_nothing_else_changes(strategy):
    seen = _draws((Threshold("compare", 777),), strategy)
    assert {776, 777, 778} & set(seen)
    assert all(1 <= v <= 2000 for v in seen)
    # thresholds outside the strategy's range: the same draws as without any
    assert _draws((Threshold("compare", 5000),), strategy) == _draws((), strategy)


def test_a_bug_in_a_fast_path_for_multiples_is_found(no_local_constants):
    with pytest.raises(tdiff.DivergenceError, match="disagrees with reference"):
        tdiff.verify(CK.threshold_bug, options=OPTS)


def test_a_launch_threshold_off_by_its_block_is_found(no_local_constants):
    with pytest.raises(tdiff.DivergenceError, match="unobserved result"):
        tdiff.verify(CK.launch_threshold_bug, options=OPTS)


def test_thresholds_option_is_validated():
    from tdiff import options

    with pytest.raises(ValueError, match="--tdiff-thresholds must be on or off"):
        options.build(lambda name: "maybe" if name == "thresholds" else None, __import__("pathlib").Path("."))
    assert options.build(lambda name: "off" if name == "thresholds" else None,
                         __import__("pathlib").Path(".")).thresholds is False


def test_dtypes_compared_with_are_read_from_the_kernel_and_the_launch():
    c = _check(CK.dtype_threshold_bug)
    assert [(t.kind, t.constant, t.dtype) for t in thresholds(jit_function(c.kernel), c.launch)] == \
        [("compare", 150, ""), ("dtype", 0, "bfloat16")]

    def launch(kernel, x):
        if x.dtype in (torch.float16, torch.bfloat16) or x.dtype is torch.float8_e4m3fn:
            pass
        if x.dtype == torch.complex64:  # a dtype tdiff cannot draw: not a hint
            pass

    assert sorted(t.dtype for t in thresholds(None, launch)) == ["bfloat16", "float16", "float8_e4m3fn"]


def _triggering_share(found, seeds=range(4), n=250):
    """The share of drawn cases that are bfloat16 and longer than 150, over a few seeds (hypothesis's
    draws come in runs: one seed's share varies from 5% to 25%)."""
    from hypothesis import seed

    from tdiff.strategies import case_strategy

    c = _check(CK.dtype_threshold_bug)
    hits: list[bool] = []
    for s in seeds:
        @seed(s)
        @settings(max_examples=n, database=None)
        @given(case_strategy(c, None, found))
        def run(case):
            hits.append(case.inputs["x"].dtype == "bfloat16" and case.inputs["x"].shape[0] > 150)

        run()
    return sum(hits) / len(hits)


def test_aimed_cases_draw_the_compared_dtype_on_the_threshold_together(no_local_constants):
    c = _check(CK.dtype_threshold_bug)
    found = thresholds(jit_function(c.kernel), c.launch)
    sizes_only = tuple(t for t in found if t.kind != "dtype")
    aimed, independent = _triggering_share(found), _triggering_share(sizes_only)
    # independent draws: one dtype of three times one size in five or so; aimed: half the cases draw
    # bfloat16, and a size on a threshold (149, 150 or 151) two times in three
    assert aimed >= 0.1 and aimed >= 1.5 * independent, (aimed, independent)


def test_a_bug_behind_a_dtype_and_a_size_threshold_is_found(no_local_constants):
    for seed in range(3):
        with pytest.raises(tdiff.DivergenceError, match="disagrees with reference"):
            tdiff.verify(CK.dtype_threshold_bug, options=dataclasses.replace(OPTS, seed=seed))
