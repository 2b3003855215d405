"""The boundary plan: planned cases cover pairs of classes, inside user composites too, and are ordinary
cases (judged, shrunk, reproduced)."""

import pytest
from hypothesis.control import BuildContext
from hypothesis.internal.conjecture.data import ConjectureData

import tdiff
from tdiff.declaration import checks_of
from tdiff.generate import case_strategy
from tdiff.generate.plan import boundary_plan
from tdiff.generate.plan.classes import Klass, categorical
from tdiff.generate.plan.covering import all_pairs, next_row
from tests import plan_kernels as P


def _replay(strategy, choices):
    data = ConjectureData.for_choices(choices)
    try:
        ctx = BuildContext(data, is_final=False, wrapped_test=None)
    except TypeError:
        ctx = BuildContext(data, is_final=False)
    with ctx:
        return data.draw(strategy)


def test_plan_covers_every_pair_inside_a_user_composite():
    (check,) = checks_of(P.knob_kernel)
    strategy = case_strategy(check)
    plan = boundary_plan(strategy, 60, seed=1)
    cov = plan.coverage
    names = {"inputs#0[0..5]": "a", "inputs#1[0..3]": "b", "inputs#2?": "flip"}
    assert set(names) <= {k for m in cov.missing for k in names} | set(names)
    # every pair of the composite's three choices is held by a replayed planned case
    held = set()
    for choices in plan.choices:
        case = _replay(strategy, choices)
        v = case.inputs
        held |= {("a", v["a"], "b", v["b"]), ("a", v["a"], "flip", v["flip"]), ("b", v["b"], "flip", v["flip"])}
    want = ({("a", a, "b", b) for a in range(6) for b in range(4)} | {("a", a, "flip", f) for a in range(6)
            for f in (False, True)} | {("b", b, "flip", f) for b in range(4) for f in (False, True)})
    assert want <= held
    assert cov.covered <= cov.pairs and cov.rows == len(plan.choices) <= 60


def test_plan_covers_sizes_and_layouts_of_tdiff_strategies():
    (check,) = checks_of(P.knob_kernel)
    plan = boundary_plan(case_strategy(check), 30, seed=2)
    sizes = {_replay(case_strategy(check), c).inputs["x"].shape[0] for c in plan.choices}
    assert 1 in sizes and 40 in sizes  # the least and the most of tst.sizes(max_value=40)
    assert any(s % 16 == 0 for s in sizes)


def test_covering_rows_cover_all_pairs_of_independent_points():
    from tdiff.generate.plan.classes import Klass, Point

    points = {k: Point(k, tuple(Klass(str(i), (i,)) for i in range(3)), k) for k in "abcd"}
    covered, rows = set(), 0
    import random

    rng = random.Random(0)
    while (picked := next_row(points, all_pairs(points) - covered, rng)) is not None:
        row, _ = picked
        cells = sorted(row.items())
        covered |= {(x, y) for i, x in enumerate(cells) for y in cells[i + 1:]}
        rows += 1
    assert covered == all_pairs(points)
    assert rows <= 12  # a greedy covering array of 4 points of 3 classes (9 rows at best)


def test_the_pair_index_grows_as_points_are_learnt_and_rows_are_the_same_from_it():
    import random

    from tdiff.generate.plan.classes import Klass, Point
    from tdiff.generate.plan.covering import PairIndex, missing_pairs

    def point(k, n, slot=None, w=2):
        return Point(k, tuple(Klass(str(i), (i,)) for i in range(n)), slot or k, weight=w, nominal=("0",))

    points = {k: point(k, 3 + i % 3, w=1 + i % 2) for i, k in enumerate("abcdef")}
    points["g"] = point("g", 2, slot="a")  # (the same slot as a: never paired with it)
    first = dict(list(points.items())[:3])
    grown = PairIndex(first).current(points)
    whole = PairIndex(points)
    assert grown.order == whole.order == sorted(all_pairs(points)) and grown.weights == whole.weights
    assert PairIndex(first).current(first).keys == frozenset(first)
    done = set(sorted(all_pairs(points))[::3])
    for seed in range(5):  # the rows from the index's sorted dict are those from the pairs themselves
        assert next_row(points, missing_pairs(whole, done), random.Random(seed)) == \
            next_row(points, all_pairs(points) - done, random.Random(seed))


def _row_by_definition(points, left, rng, candidates=8):
    """`next_row` as its docstring defines it: each point's class by the weight of the missing pairs it makes
    with the row so far, the row's worth the weight of all the missing pairs it holds (summed pair by pair)."""

    def pair(a, b):
        return (a, b) if a <= b else (b, a)

    top = max(left.values())
    heaviest = [p for p, w in left.items() if w == top]
    best = None
    keys = sorted(points)
    for _ in range(candidates):
        seed = heaviest[rng.randrange(len(heaviest))]
        row = {seed[0][0]: seed[0][1], seed[1][0]: seed[1][1]}
        slots = {points[k].slot for k in row}
        order = [k for k in keys if k not in row]
        rng.shuffle(order)
        for k in order:
            if points[k].slot in slots:
                continue
            scores = [(sum(left.get(pair((k, c), h), 0) for h in row.items()), c in points[k].nominal, rng.random(), c)
                      for c in points[k].names()]
            row[k] = max(scores)[3]
            slots.add(points[k].slot)
        cells = sorted(row.items())
        gain = sum(left.get(pair(a, b), 0) for i, a in enumerate(cells) for b in cells[i + 1:])
        if best is None or gain > best[0]:
            best = (gain, row, seed)
    return best[1], best[2]


def test_rows_from_missing_pairs_kept_in_step_are_the_rows_by_definition():
    # `Missing` keeps each cell's missing partners as rows pop the pairs they cover; the rows, and so the plans,
    # are those of the plain definition at every step
    import random

    from tdiff.generate.plan.classes import Klass, Point
    from tdiff.generate.plan.covering import PairIndex, missing_pairs, pairs_of

    def point(k, n, slot=None, w=2):
        return Point(k, tuple(Klass(str(i), (i,)) for i in range(n)), slot or k, weight=w, nominal=("0",))

    points = {k: point(k, 2 + i % 4, w=1 + i % 2) for i, k in enumerate("abcdefghij")}
    points["k"] = point("k", 3, slot="b")
    left = missing_pairs(PairIndex(points), set())
    rows = 0
    while left and rows < 25:
        seed = 1000 + rows
        row, aim = next_row(points, left, random.Random(seed))
        assert (row, aim) == _row_by_definition(points, dict(left), random.Random(seed))
        for p in pairs_of(row, points):
            left.pop(p, None)
        rows += 1
    assert rows > 10


def _opts(tmp_path, plan, examples=None):
    return tdiff.RunOptions(profile="ci", corpus_dir=tmp_path / "corpus", repro_dir=tmp_path / "out",
                            isolation="none", shrink_budget=20, plan=plan, max_examples=examples)


def test_a_planned_case_that_fails_is_shrunk_and_reproduced(tmp_path):
    # 24 pairs of (a, b): 30 planned cases cover them all (the greedy plan), the bug's among them
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(P.knob_pair_bug, options=_opts(tmp_path, 30, 40))
    (result,) = err.value.results
    assert result.plan["rows"] >= 1 and result.first_failure <= result.plan["rows"]  # a planned case failed
    (div,) = result.failures
    assert div.verdict.label == "disagrees with reference"
    assert div.case.inputs["a"] == 5 and div.case.inputs["b"] == 3
    assert div.case.inputs["x"].shape == (1,)  # shrunk like any drawn case
    assert div.repro_path is not None and div.repro_path.exists()
    assert "knob_pair_bug" in div.repro_path.read_text()


def test_the_plan_is_reported(tmp_path):
    import re

    (result,) = tdiff.verify(P.knob_kernel, options=_opts(tmp_path, None))
    plan = result.plan
    assert plan["cap"] == 10 and 1 <= plan["rows"] <= 10  # at most half the ci profile's 20 examples
    assert plan["pairs"] > 0 and plan["triples"] > 0 and plan["triple_points"] >= 3
    assert re.fullmatch(r"triples (\d+) of (\d+) and pairs (\d+) of (\d+) covered by (\d+) planned case\(s\) "
                        r"\(cap 10\)(; missing: .*)?", result.plan_line)
    assert result.plan_line.startswith(f"triples {plan['triples_covered']} of {plan['triples']} and pairs "
                                       f"{plan['covered']} of {plan['pairs']} covered by {plan['rows']} planned")
    (off,) = tdiff.verify(P.knob_kernel, options=_opts(tmp_path, 0))
    assert off.plan == {} and off.plan_line == ""


def test_the_line_names_what_no_planned_case_held():
    from tdiff.generate.plan import Coverage

    cov = Coverage(rows=48, cap=64, pairs=2016, covered=2010, missing=["a=1 with b=2"], triples=420,
                   triples_covered=310, triples_missing=["a=1 with b=2 with c=True"], points_left=3)
    assert cov.line() == ("triples 310 of 420 and pairs 2010 of 2016 covered by 48 planned case(s) (cap 64); "
                          "missing: a=1 with b=2 with c=True, a=1 with b=2 and 114 more; 3 choice point(s) past "
                          "the first 48 left to the random search")


def test_planned_cases_have_a_budget_of_their_own(tmp_path):
    # `--tdiff-plan N`: N planned cases, then the check's examples at random (not N of them)
    (result,) = tdiff.verify(P.knob_kernel, options=_opts(tmp_path, 7, 5))
    assert result.plan["rows"] == 7 and result.plan["cap"] == 7
    assert result.cases == 7 + 5
    # by default: as many as cover the triples and the addressing pairs, at most half the check's examples
    (default,) = tdiff.verify(P.knob_kernel, options=_opts(tmp_path, None, 6))
    assert default.plan["cap"] == 3 and default.cases == default.plan["rows"] + 6


def test_a_size_at_one_meets_every_value_of_a_flag_among_ordinary_sizes():
    # (the decode step: seq 1 with batch and heads above 1, and the flag that makes the stride of seq matter)
    (check,) = checks_of(P.decode_flag_kernel)
    strategy = case_strategy(check)
    for seed in range(5):
        plan = boundary_plan(strategy, 16, seed=seed)  # (the first half of a plan at most: a size at 1)
        held = set()
        for choices in plan.choices:
            case = _replay(strategy, choices)
            shape = case.inputs["x"].shape
            for i, n in enumerate(shape):
                if n == 1 and all(m > 1 for j, m in enumerate(shape) if j != i):
                    held.add((i, case.inputs["head_major"]))
        assert held == {(i, f) for i in range(4) for f in (False, True)}, seed


def _covering(points, triples, rng_seed=0, cap=400):
    """Rows `next_row` builds (with `triples`, the triples of `points` too), each held as built, until none is
    missing; the triples of groups the rows hold."""
    import random

    from tdiff.generate.plan.covering import (
        MissingTriples,
        PairIndex,
        missing_pairs,
        missing_triples,
        pairs_of,
        triple_keys,
        triples_of,
    )

    rng = random.Random(rng_seed)
    left = missing_pairs(PairIndex(points), set())
    keys = triple_keys(points)
    left3 = missing_triples(points, keys, set()) if triples else MissingTriples()
    held, rows = set(), 0
    while (picked := next_row(points, left, rng, triples=left3)) is not None and rows < cap:
        row, _ = picked
        for p in pairs_of(row, points):
            left.pop(p, None)
        got = triples_of(row, points, keys)
        for t in got:
            left3.pop(t, None)
        held |= got
        rows += 1
    return held, rows


def test_every_triple_of_addressing_points_is_covered_which_pairs_alone_miss():
    from tdiff.generate.plan.classes import BOOLS, Klass, Point
    from tdiff.generate.plan.covering import all_triples, triple_keys

    def point(k, n, kind="integer"):
        return Point(k, BOOLS if kind == "flag" else tuple(Klass(str(i), (i,)) for i in range(n)), k, kind=kind)

    points = {k: point(k, 3) for k in "abcde"}
    points["f"] = point("f", 0, "flag")
    points["v"] = Point("v", tuple(Klass(str(i), (i,)) for i in range(4)), "v", weight=1, kind="values")
    keys = triple_keys(points)
    assert keys == tuple("abcdef")  # (value classes: two by two only)
    want = all_triples(points, keys)
    held, rows = _covering(points, triples=True)
    assert held == want and rows < len(want)
    pairs_only, _ = _covering(points, triples=False)
    assert len(pairs_only) < len(want)  # a covering array of pairs leaves triples out


def test_a_triple_is_of_groups_a_size_is_one_a_multiple_of_16_or_a_tail():
    from tdiff.generate.plan.classes import Point, size_classes

    size = Point("n", size_classes(1, 64, (), ()), "n", kind="size", nominal=("small prime",))
    assert size.groups() == ("1", "multiple of 16", "tail")
    assert size.group("block edge") == "tail" and size.group("most") == "multiple of 16"
    choice = Point("c", tuple(Klass(str(i), (i,)) for i in range(1, 10)), "c", kind="integer")
    assert choice.groups() == ("1", "2..8", "9")
    layout = Point("l", categorical(["contiguous", "transposed", "sliced", "padded", "offset (misaligned)"]), "l",
                   kind="layout")
    assert layout.groups() == ("contiguous", "transposed", "gaps", "offset (misaligned)")


def test_a_plan_keeps_to_its_first_points_and_says_what_it_left():
    from tdiff.generate.plan.classes import Klass, Point
    from tdiff.generate.plan.covering import PLAN_POINTS, TRIPLE_POINTS, first_points, triple_keys

    points = {f"inputs#{i}[0..2]": Point(f"inputs#{i}[0..2]", tuple(Klass(str(v), (v,)) for v in range(3)),
                                         f"inputs#{i}", kind="integer") for i in range(80)}
    points["x.layout"] = Point("x.layout", categorical(["contiguous", "transposed"]), "x.layout", kind="layout")
    chosen = first_points(points, (), PLAN_POINTS)
    assert len(chosen) == PLAN_POINTS and "x.layout" in chosen and "inputs#0[0..2]" in chosen
    assert "inputs#79[0..2]" not in chosen  # (tdiff's own first, then a user's draws in the order drawn)
    assert first_points(points, chosen, PLAN_POINTS) == chosen  # (a plan's points only grow)
    keys = triple_keys(points)
    assert len(keys) == TRIPLE_POINTS and keys[-1] == "x.layout"


def test_ordinary_values_are_seen_as_ordinary():
    # (a dense draw was classed "structured": the plan never saw the pairs of ordinary values it aimed at)
    from tdiff.generate.plan.build import realize

    (check,) = checks_of(P.knob_kernel)
    strategy = case_strategy(check)
    drawn = realize(strategy, {}, seed=0)
    want = drawn.steering.points["x.values"].classes[0]
    assert want.name == "ordinary"
    for seed, member in enumerate(want.members):
        assert realize(strategy, {"x.values": member}, seed=seed).steering.seen["x.values"] == "ordinary"


def test_values_either_side_of_a_float_constant_the_kernel_compares_with():
    import numpy as np

    from tdiff.drive.pipeline import kernel_thresholds

    (check,) = checks_of(P.threshold_kernel)
    found = kernel_thresholds(check, tdiff.RunOptions())
    assert [t.level for t in found if t.kind == "value"] == [20.0]
    strategy = case_strategy(check, None, found)
    plan = boundary_plan(strategy, 15, seed=3)
    near = []
    for choices in plan.choices:
        x = _replay(strategy, choices).inputs["x"]
        v = x.values().astype(np.float64)
        near += [float(a) for a in v if 19.0 < a < 21.0]
    assert any(a > 20.0 for a in near) and any(a <= 20.0 for a in near)  # both sides of the branch


def test_a_wanted_class_this_draw_does_not_offer_is_counted_not_raised():
    # (a dtype an aimed case rules out, a layout another shape rules out: the point's classes were learnt from a
    # draw that offered more; the plan wants one of them where this draw does not offer it)
    from hypothesis import strategies as st

    from tdiff.generate.plan.build import realize
    from tdiff.generate.tensors import _planned_choice

    @st.composite
    def narrowed(draw):
        return _planned_choice(draw, "dtype", ("float32", "float16"))

    drawn = realize(narrowed(), {"dtype": "bfloat16"}, seed=0)
    assert drawn is not None
    assert drawn.steering.broken == ["dtype: 'bfloat16' not among this draw's ('float32', 'float16')"]
    assert realize(narrowed(), {"dtype": "float16"}, seed=0).steering.seen == {"dtype": "float16"}


def test_a_wanted_value_class_this_tensor_does_not_offer_is_counted_not_raised():
    # (an infinite row, learnt from a two-dimensional draw, wanted where this draw has no rows)
    import numpy as np
    from hypothesis import strategies as st

    from tdiff.core.dtypes import dtype
    from tdiff.generate.plan.build import realize
    from tdiff.generate.values import DEFAULT, ROW_KINDS, values_of

    f32 = dtype("float32")

    @st.composite
    def flat(draw):
        return values_of(draw, 4, f32, DEFAULT, rows=None)

    drawn = realize(flat(), {"": (ROW_KINDS[2], "normal", "")}, seed=0)
    assert drawn is not None and len(drawn.steering.broken) == 1 and "row with one +inf" in drawn.steering.broken[0]
    rows = realize(st.composite(lambda draw: values_of(draw, 4, f32, DEFAULT, rows=np.array([0, 0, 1, 1])))(),
                   {"": (ROW_KINDS[2], "normal", "")}, seed=0)
    assert rows is not None and rows.steering.broken == [] and rows.steering.seen == {"": ROW_KINDS[2]}
