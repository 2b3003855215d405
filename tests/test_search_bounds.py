"""How many cases a search draws: never more than its `max_examples` (judged or not; hypothesis's shrinking
of a failing case is counted apart), and only the first few when each hits the same interpreter limitation."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst
from tdiff.drive import search

OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none", shrink_budget=5)


def _launch_atomic(kernel, x):
    out = torch.zeros(1, dtype=x.dtype, device=x.device)
    kernel[(x.numel(),)](x, out)
    return out


def _sum_ref(x):
    return x.double().sum().reshape(1).to(x.dtype)


OVERFLOWING = tst.tensors(shape=(tst.sides(2, 4),), dtype=["float16"], layouts=["contiguous"],
                          values=tst.values(40000, 60000, specials=False))


@tdiff.check(launch=_launch_atomic, reference=_sum_ref, x=OVERFLOWING, name="all")
@tdiff.check(launch=_launch_atomic, reference=_sum_ref, x=OVERFLOWING, max_examples=1, name="one")
@triton.jit
def overflowing_atomic(x_ptr, out_ptr):
    tl.atomic_add(out_ptr, tl.load(x_ptr + tl.program_id(0)))  # two of these pass 65504: a limitation


def _launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=16)
    return out


@tdiff.check(launch=_launch, reference=lambda x: x * 2, max_examples=5,
             x=tst.tensors(shape=(tst.sides(1, 16),), layouts=["contiguous"], values=tst.values(-4, 4, specials=False)))
@triton.jit
def wrong_past_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, tl.where(offs < 1, x * 2, x * 3), mask=offs < n)


@tdiff.check(launch=_launch, reference=lambda x: x * 2, max_examples=6,
             x=tst.tensors(shape=(tst.sides(1, 16),), layouts=["contiguous"]))
@triton.jit
def doubles(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def _launch_div(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=64)
    return out


@tdiff.check(launch=_launch_div, reference=lambda x: torch.full_like(x, -12345), unspecified="note", max_examples=15,
             x=tst.tensors(shape=(tst.sides(1, 64),), dtype="int32", layouts=["contiguous"],
                           values=tst.values(1, 100)))
@triton.jit
def divides_by_zero(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x // (x * 0), mask=offs < n)  # unspecified everywhere: every case set aside


def _run(kernel, name="tdiff", **changes):
    (check,) = [c for c in tdiff.checks_of(kernel) if c.name == name]
    return tdiff.Runner(OPTS.with_(**changes)).run_check(check)


def test_cases_that_all_hit_one_limitation_stop_the_search_after_the_first_few():
    r = _run(overflowing_atomic, "all")
    assert r.status == "skipped" and r.judged == 0, r.report()
    assert r.cases == search.SAME_LIMITATION_STOP == 3, r.cases
    assert r.stopped.startswith("stopped after 3 cases: each hit the same interpreter limitation: an fp16 atomic")
    assert r.stopped in r.notes


def test_cases_not_judged_for_other_reasons_stop_the_search_after_more():
    r = _run(divides_by_zero)
    assert r.status == "skipped" and r.judged == 0, r.report()
    assert r.cases == search.GIVE_UP_AFTER == 10 < r.max_examples, (r.cases, r.notes)
    ((reason, n),) = r.discarded.items()
    assert n == 10 and reason.startswith("depends on unspecified results (unspecified='note'): integer division by")
    assert r.stopped.endswith("stopped after 10 cases")


def test_a_check_never_draws_more_cases_than_its_plan_and_max_examples():
    r = _run(overflowing_atomic, "one")  # set aside, not judged: still one case of one (no plan: half of 1 is 0)
    assert (r.cases, r.max_examples, r.status) == (1, 1, "skipped"), r.notes
    r = _run(doubles)
    planned = r.plan["rows"]
    assert 1 <= planned <= 3  # (at most half the check's 6 examples, on top of them)
    assert (r.cases, r.judged, r.max_examples, r.status) == (6 + planned, 6 + planned, 6 + planned, "passed")
    r = _run(doubles, max_examples=4)  # the check's own count stands over the run's
    assert (r.cases, r.max_examples) == (6 + r.plan["rows"], 6 + r.plan["rows"])


def test_hypothesis_shrinking_a_failing_case_is_not_counted_as_cases():
    r = _run(wrong_past_one)
    assert r.status == "failed" and r.cases <= 5 and r.judged <= 5, (r.cases, r.judged)
    assert r.search_shrinks > 0  # hypothesis shrank the failing case, in runs of its own
    (d,) = r.failures
    assert d.case.inputs["x"].shape == (2,)  # shrunk to the smallest row that reaches the bug


def test_only_classes_the_budget_skipped_are_a_note():
    from tdiff.drive.runner import _skipped_classes
    from tdiff.execute.compile_budget import CompileBudget

    aligned, misaligned, one, other = ("*fp32", "D"), ("*fp32", ""), ("i32", "1"), ("i32", "")
    b = CompileBudget(None, 1)
    b.ran([("k", (aligned, one), ())], 1)
    assert b.coverage() and _skipped_classes(b) == []  # classes no case drew: the table's, not a note
    b.drawn |= {("k", 0, misaligned), ("k", 1, other)}  # drawn, never compiled
    assert _skipped_classes(b) == ["k argument 0: misaligned", "k argument 1: other"]


SEEN: list[tuple] = []


def _recording_twice(x):
    SEEN.append((tuple(x.shape), x.dtype))
    return x * 2


@tdiff.check(launch=_launch, reference=_recording_twice, max_examples=8,
             x=tst.tensors(shape=(tst.sides(1, 16),), dtype=["float32", "float16"], layouts=["contiguous"]))
@triton.jit
def recorded(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_a_derandomized_search_is_seeded_by_the_check_alone():
    # (hypothesis would seed it from a digest of the search's own source: each edit of tdiff re-drew CI's cases)
    (check,) = tdiff.checks_of(recorded)
    drawn = []
    for opts in (OPTS, OPTS, OPTS.with_(seed=search.stable_seed(check.id), profile="dev", database=None)):
        SEEN.clear()
        tdiff.Runner(opts).run_check(check)
        drawn.append(list(SEEN))
    assert drawn[0] == drawn[1] == drawn[2] and 8 < len(drawn[0]) <= 8 + 4, drawn  # (the plan's, then 8 at random)
    assert search.stable_seed(check.id) != search.stable_seed(check.id + "x")
