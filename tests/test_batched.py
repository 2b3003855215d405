"""The batched interpreter: identical to program by program (bit for bit, finding for finding) on the bundled
suites and tdiff's hostile kernels; whole grids, so a stray program a sample would skip is found; and every
batch that stops is named with its line."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.declaration import declared_in
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.judge import integrity
from tdiff.strategies import tensor_arg
from tests import batched_kernels as B
from tests.batched_equality import both, differences, draw_cases

pytestmark = pytest.mark.triton_matrix  # CI runs these under every allowed Triton minor

#: the differential subset CI runs (bench/speed/batched_equal.py runs every suite)
SUBSET = ["suites.softmax", "suites.layer_norm", "suites.matmul", "suites.flash_attention", "suites.rotary",
          "suites.cross_entropy", "suites.quantize", "suites.device_fn", "suites.atomic_sum",
          "suites.semantics.reductions", "suites.semantics.conversions", "suites.semantics.minmax",
          "suites.semantics.atomics_random"]


def _checks() -> list:
    out = []
    for name in SUBSET:
        importlib.import_module(name)
        out += declared_in(name)
    return out


@pytest.mark.parametrize("check", _checks(), ids=lambda c: c.id)
def test_batched_equals_program_by_program(check):
    for i, case in enumerate(draw_cases(check, 3, at=1)):
        one, many = both(check, case)
        assert differences(one, many) == [], f"case {i}: {case.describe()}"


def test_hostile_kernels_batched_equal_program_by_program():
    from tests import kernels as K
    for name in ("double_kernel", "masked_tail_bug", "race_kernel", "wide_grid_kernel", "alignment_bug",
                 "row_stride_bug", "far_write_kernel", "cast_kernel"):
        check = getattr(K, name).__tdiff_checks__[0]
        for case in draw_cases(check, 2):
            one, many = both(check, case)
            assert differences(one, many) == [], name


def _stray(mode: int):
    check = B.stray_kernel.__tdiff_checks__[mode]
    t = B.stray_case()
    case = Case({"x": tensor_arg(t["x"]), "out": tensor_arg(t["out"], layout="sliced")})
    spec = BackendSpec("interpreter", sample=(4096, 8, 0))  # as a run samples: whole grids up to 4096 programs
    sampled = BackendSpec("interpreter", batched=False, sample=(64, 8, 0))  # program by program: a sample
    return check, case, InterpreterBackend(spec).run(check, case), InterpreterBackend(sampled).run(check, case)


def test_whole_grid_finds_an_out_of_bounds_load_a_sample_skips():
    _, _, whole, sampled = _stray(0)
    assert (B.STRAY, 0, 0) not in sampled.trace.programs_run and not sampled.trace.violations
    assert [v.program for v in whole.trace.violations] == [(B.STRAY, 0, 0)]
    assert "x += tl.load(x_ptr + offs + far" in whole.trace.violations[0].line
    # found by the batch, reported by the program-by-program run it fell back to, with its line
    assert any("outside every allocation" in why for why in whole.trace.unbatched)


def test_whole_grid_finds_a_race_a_sample_skips():
    _, _, whole, sampled = _stray(1)
    assert not sampled.trace.races
    race = whole.trace.races[0]
    assert (race.first, race.second) == (B.STRAY, B.STRAY + 1) or {race.first, race.second} == {B.STRAY,
                                                                                               B.STRAY + 1}
    assert any(why.startswith("programs share an element") for why in whole.trace.unbatched)


def test_whole_grid_finds_a_write_outside_a_view_a_sample_skips():
    _, case, whole, sampled = _stray(2)
    assert not [f for f in integrity.check(sampled, case, "stray", runs_kernel=True).findings
                if f.kind == integrity.GAP]
    gap = [f for f in integrity.check(whole, case, "stray", runs_kernel=True).findings if f.kind == integrity.GAP]
    assert gap and "outside its view" in gap[0].message
    assert whole.trace.batched == 1024 and not whole.trace.unbatched  # no fallback: a plain store


def test_a_branch_that_parts_programs_splits_the_batch():
    from suites import flash_attention
    check = declared_in(flash_attention.__name__)[0]
    wide = 0
    for case in draw_cases(check, 6, at=1):
        one, many = both(check, case)
        assert differences(one, many) == []
        assert not many.trace.unbatched  # split by the causal loop's bound, not fallen back
        if len(many.trace.programs_run) > 1:
            wide += 1
            assert many.trace.batched == len(many.trace.programs_run)
    assert wide


def test_a_stopped_batch_is_named_with_its_line_and_counted_in_the_summary():
    from tdiff.record.results import CheckResult
    from tdiff.record.summary import check_lines, record
    check = B.swap_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(64, dtype=torch.float32))})
    one, many = both(check, case)
    assert differences(one, many) == []
    (why,) = many.trace.unbatched
    assert why.startswith("atomic_xchg at tests/batched_kernels.py:") and "tl.atomic_xchg" in why
    r = CheckResult(check.id, check.item_name, ("interpreter",))
    r.unbatched[why] += 1
    assert any("ran programs one by one in 1 case(s): a batch stopped: atomic_xchg at" in line
               for line in check_lines(record(r)))
    from tdiff.record.summary import aggregate, table_lines
    table = table_lines(aggregate([record(r)]))
    assert any("interpreted program by program" in line and "atomic_xchg at tests/batched_kernels.py" in line
               for line in table), table


def test_atomic_updates_run_in_launch_order_within_a_batch():
    from suites import atomic_sum
    check = declared_in(atomic_sum.__name__)[0]
    wide = 0
    for case in draw_cases(check, 4, at=2):
        one, many = both(check, case)
        assert differences(one, many) == []  # the same float sum, bit for bit
        if len(many.trace.programs_run) > 1:
            wide += 1
            assert many.trace.batched == len(many.trace.programs_run) and not many.trace.unbatched
    assert wide


def test_sequential_is_a_backend_value():
    spec = BackendSpec.parse("interpreter:sequential")
    assert spec.batched is False and spec.label == "interpreter:sequential"
    assert BackendSpec.parse("interpreter").batched is True
    assert np.array_equal(np.arange(3), np.arange(3))


#: real-suite checks the differential test runs where liger-kernel is installed (bench/speed/batched_equal.py: all)
REAL = ["_rms_norm_forward_kernel[forward]", "_block_rms_norm_forward_kernel[forward]",
        "liger_cross_entropy_kernel[forward]", "_group_norm_backward_kernel[backward]", "_jsd_kernel[forward]",
        "_layer_norm_backward_kernel[backward]", "_geglu_tanh_forward_kernel[forward]"]


# (the costliest here, program by program through liger's kernels: not on 3.5, 3.7 and 3.8, where the bundled
# suites' and the hostile kernels' equality above still runs every batched path on that Triton's interpreter)
@pytest.mark.triton_matrix_ends
def test_real_suite_kernels_batched_equal_program_by_program():
    pytest.importorskip("liger_kernel")
    for name in ("rms_norm", "cross_entropy", "group_norm", "jsd", "layer_norm", "geglu"):
        importlib.import_module(f"suites.liger.{name}")
    checks = [c for name in ("rms_norm", "cross_entropy", "group_norm", "jsd", "layer_norm", "geglu")
              for c in declared_in(f"suites.liger.{name}") if any(c.id.endswith(r) for r in REAL)]
    assert len(checks) == len(REAL)
    for check in checks:
        for i, case in enumerate(draw_cases(check, 2, at=3)):
            one, many = both(check, case)
            assert differences(one, many) == [], f"{check.id} case {i}: {case.describe()}"


def test_first_program_runs_alone_for_the_tolerance_of_operations_run_so_far():
    # |x| near 0.5: the comparison is within tolerance once an arithmetic operation ran (after the first program)
    check = B.rows_kernel.__tdiff_checks__[0]
    x = torch.full((16, 8), 0.5, dtype=torch.float32) + torch.arange(8) * 1e-7
    case = Case({"x": tensor_arg(x), "w": tensor_arg(torch.linspace(-2, 2, 8))})
    one, many = both(check, case)
    assert one.trace.fragile and not one.trace.fragile["returned"][0].any()  # the first row: not yet
    assert differences(one, many) == []


def test_a_value_the_same_in_every_program_keeps_its_shadows_when_stored():
    check = B.bcast_kernel.__tdiff_checks__[0]
    case = Case({"w": tensor_arg(torch.linspace(1, 2, 8))})
    one, many = both(check, case)
    assert one.trace.scales["returned"].min() > 0  # every stored value has an error scale
    assert differences(one, many) == []


def test_atomic_updates_that_would_come_in_another_order_stop_the_batch():
    check = B.sums_kernel.__tdiff_checks__[0]
    x = torch.tensor([1e8, 1.0, -1e8, 1.0] * 8, dtype=torch.float32) * torch.linspace(1, 1.5, 32)
    one, many = both(check, Case({"x": tensor_arg(x)}))
    assert differences(one, many) == []
    assert any(why.startswith("atomic updates of an element in another order") for why in many.trace.unbatched)


def test_a_read_of_what_another_program_wrote_stops_the_batch():
    check = B.chain_kernel.__tdiff_checks__[0]
    one, many = both(check, Case({"x": tensor_arg(torch.arange(8, dtype=torch.float32))}))
    assert one.trace.races and differences(one, many) == []
    assert any(why.startswith("programs share an element") for why in many.trace.unbatched)


def test_the_whole_grid_bound_is_an_option():
    from pathlib import Path

    from tdiff.options import build
    opts = build(lambda name: {"whole-grid": "128"}.get(name), Path("."))
    assert opts.batched_threshold == 128
    assert build(lambda name: None, Path(".")).batched_threshold == 4096


def test_batches_are_cut_to_bound_their_arrays(monkeypatch):
    from tdiff.execute.interpreter import backend
    from tests import kernels as K
    check = K.wide_grid_kernel.__tdiff_checks__[0]
    case = draw_cases(check, 1)[0]
    monkeypatch.setattr(backend, "LANES", 64)  # 4 lanes per program (BLOCK=4): batches of 16 programs
    cuts = []
    fit = backend._fit
    monkeypatch.setattr(backend, "_fit", lambda b, i, w: (fit(b, i, w), cuts.append(len(b[i]))))
    one, many = both(check, case)
    assert differences(one, many) == [] and many.trace.batched == len(many.trace.programs_run) > 4
    assert max(cuts) == 16


def test_a_loop_whose_bounds_differ_between_programs_runs_batched():
    check = B.stride_kernel.__tdiff_checks__[0]
    for n in (64, 61):  # every program 8 times; or 8 and 7 times (the batch split by its trip count)
        one, many = both(check, Case({"x": tensor_arg(torch.arange(n, dtype=torch.float32))}))
        assert differences(one, many) == []
        assert many.trace.batched == 8 and not many.trace.unbatched


def test_a_shim_the_data_asks_for_counts_the_programs_that_met_it_in_a_batch_too():
    # one program of four meets a NaN: program by program, the nan-minmax shim (where this Triton's interpreter
    # lets NaN win) counts it there only; a batch must not count its use for each of its programs (it did: 1 vs 2)
    from tdiff import compat

    check = B.minimum_kernel.__tdiff_checks__[0]
    x = torch.arange(16, dtype=torch.float32) - 8.0
    x[5] = float("nan")
    case = Case({"x": tensor_arg(x)})
    one, many = both(check, case)
    assert differences(one, many) == []
    # (tl.minimum where this Triton's interpreter propagates NaN, tl.min where its reductions do: program 1 only)
    uses = int(compat.minmax_propagates_nan()) + int(compat.reduce_minmax_propagates_nan())
    assert one.trace.shims.get("nan-minmax", 0) == many.trace.shims.get("nan-minmax", 0) == uses
