"""The compile budget: launch keys classify arguments as Triton's JIT does; past the budget, drawn
cases needing new specializations are skipped and the search goes on among compiled ones."""

import os

import pytest
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst
from tdiff.budget import SKIPS_PER_COMPILE, CompileBudget
from tdiff.case import Case
from tdiff.errors import DeclarationError
from tdiff.specialization import launch_keys
from tdiff.workers import Pool
from tests import faulty


def _launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


@tdiff.check(launch=_launch, reference=lambda x: x * 2, x=tst.tensors(ndim=1, max_side=64))
@triton.jit
def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@tdiff.check(launch=_launch, x=tst.tensors(ndim=1))
@triton.jit(do_not_specialize=["n"])
def twice_unspecialized(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


PARENT_LAUNCHES = []


def _launch_in_workers(kernel, x):
    if not os.environ.get("TDIFF_WORKER"):  # user code in the test process: it could take it down
        PARENT_LAUNCHES.append(tuple(x.shape))
    return _launch(kernel, x)


@tdiff.check(launch=_launch_in_workers, x=tst.tensors(ndim=1, max_side=64))
@triton.jit
def twice_in_workers(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def _launch_on_gpu_only(kernel, x):
    raise RuntimeError("needs a GPU")


@tdiff.check(launch=_launch_on_gpu_only, x=tst.tensors(ndim=1))
@triton.jit
def gpu_only(x_ptr):
    pass


CHECK = tdiff.checks_of(twice)[0]


def _keys(n, offset=0, dtype=torch.float32, check=CHECK):
    storage = torch.zeros(n + offset, dtype=dtype)
    x = storage[offset:]
    return launch_keys(check, Case({"x": tst.tensor_arg(x)}))


def test_keys_change_where_triton_specializes():
    (base,) = _keys(17)
    assert _keys(19) == (base,)  # same classes, same constexpr BLOCK=32
    assert _keys(4, offset=4) == _keys(4)  # 16 bytes in: still aligned
    assert _keys(17, offset=1) != (base,)  # misaligned pointer
    assert _keys(32) != _keys(31)  # 32 is a multiple of 16 (and BLOCK stays 32)
    assert _keys(1) != _keys(2)  # 1 is a constant
    assert _keys(17, dtype=torch.float16) != (base,)
    name, classes, options = base
    assert name == "twice" and classes[0] == ("*fp32", "D") and classes[2] == ("i32", "")
    assert classes[3] == ("constexpr", "32")


def test_do_not_specialize_is_honoured():
    check = tdiff.checks_of(twice_unspecialized)[0]
    assert _keys(17, check=check) == _keys(18, check=check)
    assert _keys(32, check=check) == _keys(31, check=check)  # same BLOCK, no divisibility class
    assert _keys(8, check=check) != _keys(17, check=check)  # BLOCK differs


def test_keys_are_unknown_when_the_launch_fails_on_cpu():
    assert _keys(5, check=tdiff.checks_of(gpu_only)[0]) is None


def test_budget_policy():
    b = CompileBudget(2)
    b.ran(("a",), 1)
    assert not b.exhausted and b.admits(("z",))
    b.ran(("b",), 1)
    assert b.exhausted and b.reached_after == 2
    assert b.admits(("a", "b")) and b.admits(None)
    assert not b.admits(("a", "c")) and b.skipped == 1
    assert "budget of 2 reached after 2 case(s); 1 drawn case(s)" in b.describe()
    unlimited = CompileBudget(0)
    unlimited.ran(("a",), 50)
    assert unlimited.admits(("c",)) and unlimited.describe() is None


def test_budget_compiles_after_enough_skipped_draws():
    b = CompileBudget(1)
    b.ran(("a",), 1)
    for i in range(SKIPS_PER_COMPILE):
        assert not b.admits((f"new{i}",))
    assert b.admits(("c",))  # skipping has now cost about a compile
    b.ran(("c",), 1)
    assert b.beyond == 1 and not b.admits(("d",))  # counting starts again
    assert f"1 more were compiled, one per {SKIPS_PER_COMPILE} skipped" in b.describe()


def test_a_layout_keeps_its_first_decision():
    # hypothesis replays draws and fails a search whose draws change between replays
    b = CompileBudget(1)
    assert b.decide("L0", lambda: ("a",)) == (True, None)  # under the limit: keys found later, in the run
    b.ran(("a",), 1)
    assert b.decide("L1", lambda: ("b",)) == (False, ("b",))
    b.ran(("b",), 1)  # "b" compiled after all (drawn in another layout)
    assert b.decide("L1", lambda: ("b",)) == (False, None)  # still skipped
    for i in range(SKIPS_PER_COMPILE):
        b.decide(f"M{i}", lambda: ("m",))
    assert b.decide("L2", lambda: ("c",))[0] and not b.decide("L1", lambda: ("b",))[0]  # past the count: L1 stays
    assert b.decide("L0", lambda: ("z",)) == (True, None)


def _run(max_compiles, examples=40, backend="FakeCompiling"):
    faulty.FakeCompiling.cache.clear()
    opts = tdiff.RunOptions(profile="ci", max_examples=examples, corpus_dir=None, repro_dir=None,
                            isolation="none", backends=(f"tests.faulty:{backend}", "interpreter"),
                            max_compiles=max_compiles)
    (result,) = tdiff.verify(twice, options=opts)
    return result


def test_search_stays_within_the_budget_and_says_so():
    free = _run(max_compiles=0)
    assert free.compiles > 4 and free.budget_skipped == 0  # without a budget the draws need many variants
    bounded = _run(max_compiles=3)
    assert bounded.status == "passed" and bounded.cases == 40  # still the full number of cases
    assert bounded.compiles == 3 + bounded.budget_beyond < free.compiles and bounded.budget_skipped > 0
    assert bounded.budget_beyond <= bounded.budget_skipped // SKIPS_PER_COMPILE
    assert any("compile budget of 3 reached" in n for n in bounded.notes)
    assert bounded.wall < free.wall  # skipping draws cost less than the compiles it saved (0.25 s each)


@pytest.mark.parametrize("backend", ["FakeCompiling", "FakeCompilingSilent"])
def test_budget_with_worker_processes(backend):
    # dry launches run in a CPU worker; a backend that does not report its keys gets predicted ones
    pool = Pool()
    try:
        opts = tdiff.RunOptions(profile="ci", max_examples=25, corpus_dir=None, repro_dir=None, max_compiles=2,
                                backends=(f"tests.faulty:{backend}", "interpreter"))
        (result,) = tdiff.verify(twice_in_workers, options=opts, executor=pool)
    finally:
        pool.close()
    assert PARENT_LAUNCHES == []  # every launch, dry ones included, ran in a worker
    assert result.budget_skipped > 0 and result.cases == 25 and any("budget of 2 reached" in n for n in result.notes)
    assert result.compiles == 2 + result.budget_beyond  # the limit, and one per SKIPS_PER_COMPILE skipped draws
    assert result.budget_beyond <= result.budget_skipped // SKIPS_PER_COMPILE


def test_value_bugs_are_still_found_past_the_budget():
    faulty.FakeCompiling.cache.clear()
    opts = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none", max_compiles=1,
                            backends=("tests.faulty:FakeCompilingWrongOnHuge", "interpreter"), verdict=False)
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(twice, options=opts)
    (result,) = err.value.results
    assert result.compiles >= 1 and result.budget_skipped > 0  # found among cases within the budget


def test_max_compiles_is_validated():
    with pytest.raises(DeclarationError, match="max_compiles must be an int >= 0"):
        tdiff.check(launch=_launch, x=tst.tensors(ndim=1), max_compiles=-1, name="other")(twice)


@pytest.mark.parametrize("module,kernel", [("add_one", "add_one_kernel"), ("layer_norm", "layer_norm_fwd"),
                                           ("softmax", "softmax_kernel")])
def test_budget_decisions_stay_consistent_for_hypothesis(module, kernel):
    # hypothesis replays draws and fails a test whose draws change between replays; a layout
    # skipped once must stay skipped, even once its specializations have been compiled
    import importlib

    faulty.FakeCompiling.cache.clear()
    k = getattr(importlib.import_module(f"suites.{module}"), kernel)
    opts = tdiff.RunOptions(profile="dev", seed=1, database=None, corpus_dir=None, repro_dir=None, isolation="none",
                            backends=("tests.faulty:FakeCompilingCheap", "interpreter"), max_compiles=2, verdict=False)
    (result,) = tdiff.verify(k, options=opts)
    assert result.status == "passed" and result.cases == 50, result.notes
    assert result.budget_skipped > SKIPS_PER_COMPILE and result.compiles > 2  # skipped and compiled past the limit
