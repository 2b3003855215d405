"""Tests that kill mutants of tdiff's core the other tests let survive (see bench/trust/core_mutants.py): each
names the behaviour it pins down; the mutant it was written for is in bench/trust/core_mutants.py."""

import json
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.core.outcome import GUARD_BYTES, ErrorInfo, ReturnedTensor, StorageOutcome
from tdiff.core.rerun import FLOAT64_RUN, Rerun
from tdiff.core.tolerance import Tolerance, from_ops, resolve
from tdiff.errors import CorpusError
from tdiff.execute.backends.reference import ReferenceBackend
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.execute.interpreter.memory import Memory, Region
from tdiff.execute.interpreter.session import sample_programs
from tdiff.judge import verdict as V
from tdiff.judge.classify import DISCARD, FAIL, classify
from tdiff.judge.closeness import close
from tdiff.judge.compare import coarse_scale, compare
from tdiff.judge.evidence import gather
from tdiff.judge.rules import Rules
from tdiff.judge.targets import guard_pattern, view
from tdiff.record import corpus, repro
from tdiff.record.shrink import shrink
from tdiff.strategies import tensor_arg
from tests import hostile as H
from tests import kernels as K
from tests.faulty import FakeCompiledTail, Perturb
from tests.labelled import outcome

OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=0, isolation="none")


def f64(x):
    return np.asarray(x, dtype=np.float64)


def judge_for(check, **changes):
    runner = tdiff.Runner(OPTS.with_(**changes))
    return runner.judge(check)


def x_case(values, dtype=torch.float32):
    return Case({"x": tensor_arg(torch.tensor(values, dtype=dtype))})


# ---------------------------------------------------------------- kernels built inside the tests
# (plain functions, made kernels and checks in the tests: `pytest --tdiff tests` collects none of them)

def _arrival(cnt_ptr, out_ptr, WHICH: tl.constexpr):
    # the program that arrives WHICH-th at the counter writes its id: a result that depends on the
    # order the programs run in, with the programs synchronized through an integer atomic
    old = tl.atomic_add(cnt_ptr, 1)
    tl.store(out_ptr, tl.program_id(0), mask=old == WHICH)


def _arrival_check(which):
    def launch(kernel, x):
        cnt = torch.zeros(1, dtype=torch.int32, device=x.device)
        out = torch.zeros(1, dtype=torch.int32, device=x.device)
        kernel[(x.numel(),)](cnt, out, WHICH=which)
        return out

    kernel = tdiff.check(launch=launch, reference=lambda x: torch.full((1,), -1, dtype=torch.int32),
                         x=tst.tensors(shape=(3,)), name=f"arrival{which}")(triton.jit(_arrival))
    return tdiff.checks_of(kernel)[0]


def _row_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def _other_twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def _twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


# ---------------------------------------------------------------- compare and tolerance


def test_relative_tolerance_is_relative_to_the_smaller_side():
    tol = Tolerance(rtol=0.5)
    assert close(f64([1.0]), f64([1.4]), tol)[0]
    assert not close(f64([1.0]), f64([1.8]), tol)[0]  # 0.8 > 0.5 * min(1, 1.8), though < 0.5 * 1.8
    assert not close(f64([1.8]), f64([1.0]), tol)[0]


def test_exact_compares_bits_not_values():
    # int64 values 2**60 and 2**60 + 1 are one float64: only the bits tell them apart
    a, b = np.array([2**60, 7], np.int64), np.array([2**60 + 1, 7], np.int64)
    assert close(f64(a), f64(b), Tolerance(exact=True), raw_a=a, raw_b=b).tolist() == [False, True]
    case = x_case([1.0])
    out = [outcome(side, returned=ReturnedTensor("int64", (2,), v)) for side, v in (("a", a), ("b", b))]
    (m,) = compare(*out, case).mismatches
    assert m.count == 1 and m.examples[0][0] == (0,)


def test_storages_of_another_dtype_are_a_structure_mismatch():
    check = K.double_kernel.__tdiff_checks__[0]
    case = x_case([1.0, 2.0])
    plain = InterpreterBackend().run(check, case)
    wide = InterpreterBackend(BackendSpec("interpreter", upcast=True)).run(check, case)  # float64 storages
    found = {(m.target, m.kind) for m in compare(plain, wide, case).mismatches}
    assert ("x", "structure") in found and ("x", "values") not in found


def test_under_sampling_only_what_interpreted_programs_wrote_is_compared():
    # a sample of 1024 programs interpreted: the elements the others own are still torch.empty's fill there
    check = K.wide_grid_kernel.__tdiff_checks__[0]
    case = x_case([1.0] * 4095)
    sampled = InterpreterBackend(BackendSpec("interpreter", sample=(64, 8, 0))).run(check, case)
    out = view(sampled, case).targets["returned"]
    assert sampled.trace.sampled and (out.writers < 0).any() and np.isnan(out.values[out.writers < 0]).all()
    assert compare(sampled, ReferenceBackend().run(check, case), case).ok


def test_returned_leaves_are_compared():
    case = x_case([1.0])
    for x, y in (("a", "b"), (True, False)):
        assert not compare(outcome("a", returned=(x,)), outcome("b", returned=(y,)), case).ok
    assert compare(outcome("a", returned=("same", None)), outcome("b", returned=("same", None)), case).ok


def test_coarse_scale_squares_the_inputs_for_dots():
    case = Case({"a": tensor_arg(torch.full((4, 4), 10.0))})
    assert coarse_scale(case, 16, {"farith"}) == pytest.approx(10.0)
    assert coarse_scale(case, 16, {"dot:ieee"}) == pytest.approx(100.0)  # products of two inputs
    assert coarse_scale(case, 16, None) == pytest.approx(100.0)  # unknown ops: dots assumed


def test_coarse_scale_grows_with_the_terms_summed():
    case = Case({"a": tensor_arg(torch.full((4, 4), 10.0))})
    assert coarse_scale(case, 1, {"reduce"}) == pytest.approx(10.0 * 4)  # 16 terms into one output


def test_loosened_widens_every_term():
    t = Tolerance.preset("arith", "float32")
    wide = t.loosened(4)
    assert wide.rtol == pytest.approx(4 * t.rtol) and wide.scale == pytest.approx(4 * t.scale)


def test_a_dict_override_of_an_exact_default_is_a_float_tolerance():
    tol = resolve({"rtol": 1e-3}, Tolerance(exact=True, name="exact"), "float32")
    assert not tol.exact and tol.rtol == 1e-3
    assert close(f64([1.0]), f64([1.0005]), tol)[0]


def test_unknown_ops_allow_for_every_floating_class():
    unknown = from_ops(None, "float32")
    for name in ("arith", "transcendental", "reduce", "dot"):
        preset = Tolerance.preset(name, "float32")
        assert unknown.rtol >= preset.rtol and unknown.scale >= preset.scale, name


class FakeCompiledOverflows(Perturb):
    """Plays the compiled side: a store holding a value above 1e19 overflows to inf."""

    label = "compiled"
    delta = np.inf
    relative = True
    above = 1e19


def test_a_kernel_overflow_the_float64_run_does_not_share_fails():
    # inputs at the dtype's limits (1e20 squared overflows float32), but x * 2 stays finite: the
    # compiled side's inf is not inherent to the computation (the interpreter, the reference and the
    # float64 run all hold 2e20)
    judge = judge_for(K.double_kernel.__tdiff_checks__[0],
                      backends=("tests.test_mutants_killed:FakeCompiledOverflows", "interpreter"))
    v, ev = judge.verdict(x_case([1e20, 1.0, 2.0]))
    assert FLOAT64_RUN in ev.extra and v.label == V.COMPILED_WRONG, v


def test_an_overflow_from_ordinary_inputs_fails_beside_inputs_at_the_limits():
    # exp(100) overflows in row 1 (softmax without the max subtracted: NaN where the reference gives 1); row 0's
    # 1e20 puts the case's inputs at float32's limits, which forgives only the elements those inputs fed
    judge = judge_for(H.softmax_no_max.__tdiff_checks__[0])
    v, ev = judge.verdict(Case({"x": tensor_arg(torch.tensor([[1e20, 1.0, 2.0, 3.0], [100.0, 1.0, 2.0, 3.0]]))}))
    (m,) = ev.pair("interpreter", "reference").comparison.mismatches
    assert v.label == V.VS_REFERENCE and m.count == 1 and m.examples[0][0] == (1, 0), v


# ---------------------------------------------------------------- verdicts


class FakeCompiledTailUntraced(FakeCompiledTail):
    """`FakeCompiledTail` without the interpreter's trace, as the real compiled backend."""

    def run(self, target, case):
        outcome = super().run(target, case)
        outcome.trace = None
        return outcome


def test_the_interpreter_guides_the_comparison_of_the_compiled_side_with_the_reference():
    # the compiled side is off by one in its last program; another element of the tensor is 1e30: the
    # compiled side against the reference (neither traced) is judged with the interpreter's per-element scale
    judge = judge_for(K.double_kernel.__tdiff_checks__[0],
                      backends=("tests.test_mutants_killed:FakeCompiledTailUntraced", "interpreter"))
    v, ev = judge.verdict(x_case([1e30] + [1.0] * 69))
    assert not ev.pair("compiled", "reference").comparison.ok
    assert v.label == V.COMPILED_WRONG, v


def test_an_error_is_judged_before_integrity_findings():
    check = K.inplace_overrun.__tdiff_checks__[0]
    case = Case({"t": tensor_arg(torch.zeros(2, 3))})
    interp = InterpreterBackend().run(check, case)  # goes out of bounds
    ref = outcome("reference", error=ErrorInfo("exception", "RuntimeError: the reference failed"))
    ev = gather(case, "inplace_overrun", {"interpreter": interp, "reference": ref}, Rules())
    assert any(f.kind == "oob" for f in ev.reports["interpreter"].findings)
    assert V.decide(ev).label == "reference error"


def test_guard_band_damage_alone_is_out_of_bounds():
    check = K.inplace_overrun.__tdiff_checks__[0]
    case = Case({"t": tensor_arg(torch.zeros(2, 3))})
    interp = InterpreterBackend(BackendSpec("interpreter", check_pointers=False)).run(check, case)
    ev = gather(case, "inplace_overrun", {"interpreter": interp, "reference": ReferenceBackend().run(check, case)},
                Rules())
    kinds = {f.kind for f in ev.reports["interpreter"].findings}
    assert "guard" in kinds and "oob" not in kinds  # (no pointer checks: only the guard band shows it)
    assert V.decide(ev).label == V.OUT_OF_BOUNDS


def test_a_side_far_from_the_float64_run_is_blamed():
    # compiled off by a relative 2e-5: beyond 4x the float32 tolerance from the float64 run
    judge = judge_for(K.double_noref.__tdiff_checks__[0],
                      backends=("tests.faulty:FakeCompiledSlightly", "interpreter"))
    v, _ = judge.verdict(x_case([1.0, 3.0, -5.0, 7.0, 0.5]))
    assert v.label == V.COMPILED_WRONG, v


def test_undecided_against_the_float64_run_passes_with_a_note():
    # compiled off by a relative 4e-6: beyond tolerance from the interpreter, within 4x of it from the
    # float64 run, as is the interpreter: neither is shown wrong
    judge = judge_for(K.double_noref.__tdiff_checks__[0],
                      backends=("tests.faulty:FakeCompiledUndecided", "interpreter"))
    v, ev = judge.verdict(x_case([1.0, 3.0, -5.0, 7.0, 0.5]))
    assert FLOAT64_RUN in ev.extra and ev.pairs[0].disagrees
    assert v.label == V.PASSED and any(k == "undecided" for k, _ in v.notes), v


def test_the_reference_decides_between_backends():
    # the reference agrees with the (slightly off) compiled side, not with the interpreter: the
    # reference's word decides, whatever the float64 run says
    kernel = tdiff.check(launch=K._launch_1d, reference=lambda x: (x.double() * 2 * (1 + 2e-5)).to(x.dtype),
                         x=tst.tensors(shape=(8,)), name="ref-decides")(triton.jit(K.double_kernel.fn))
    judge = judge_for(tdiff.checks_of(kernel)[0], backends=("tests.faulty:FakeCompiledSlightly", "interpreter"))
    v, _ = judge.verdict(x_case([1.0, 3.0, -5.0, 7.0, 0.5]))
    assert v.label == V.INTERPRETER_WRONG, v


def _middle_of_a_shuffle():
    """A grid size n (odd) whose shuffled program order does not run program n // 2 in the middle,
    as the forward and reversed orders both do."""
    shuffled = InterpreterBackend(BackendSpec("interpreter", order="shuffled"))
    for n in (3, 5, 7, 9, 11):
        ran = shuffled.run(_arrival_check(0), Case({"x": tensor_arg(torch.zeros(n))})).trace.programs_run
        if ran[n // 2] != (n // 2, 0, 0):
            return n
    raise AssertionError("the shuffled order runs the middle program in the middle for every grid tried")


@pytest.mark.parametrize("orders", ["reversed", "shuffled"], ids=["first", "middle"])
def test_a_race_only_another_order_shows(orders):
    # programs synchronized through an atomic (so the trace judges no race), a result that depends on
    # their order: which program arrives first differs in the reversed order; which arrives in the
    # middle (of an odd number) is the same forward and reversed, and differs only in a shuffled order
    n = 3 if orders == "reversed" else _middle_of_a_shuffle()
    which = 0 if orders == "reversed" else n // 2
    judge = judge_for(_arrival_check(which))
    case = Case({"x": tensor_arg(torch.zeros(n))})
    v, ev = judge.verdict(case)
    assert v.label == V.VS_REFERENCE and ev.outcomes["interpreter"].trace.sync  # forward: `which`, not -1
    assert int(ev.outcomes["interpreter"].returned.values[0]) == which
    v, ev = judge.verdict(case, final=True)
    assert v.label == V.RACE and orders in v.reasons[0], v
    assert int(ev.extra[Rerun(orders, "interpreter")].returned.values[0]) != which


def test_a_limitation_on_one_pair_still_judges_the_others():
    # the interpreter hits a known limitation; the compiled side still disagrees with the reference
    judge = judge_for(K.double_kernel.__tdiff_checks__[0],
                      backends=("tests.faulty:FakeCompiledWrong", "tests.faulty:LimitedInterpreter"))
    v, _ = judge.verdict(x_case([1.0, 2.0, 3.0]))
    assert v.failed and v.label != V.NOT_JUDGED, v


def test_only_the_interpreter_has_limitations():
    limited = ErrorInfo("limitation", "NotImplementedError: inline_asm", limitation="inline-asm")
    assert classify(outcome("interpreter", error=limited), outcome("reference")).action == DISCARD
    for side in ("compiled", "reference"):
        c = classify(outcome(side, error=limited), outcome("interpreter"))
        assert c.action == FAIL and c.sides == (side,), side


# ---------------------------------------------------------------- integrity


def test_launching_another_kernel_is_never_launched():
    other = triton.jit(_other_twice)

    def launch(kernel, x):  # computes the right values, with a kernel other than the declared one
        out = torch.empty_like(x)
        other[(1,)](x, out, x.numel(), BLOCK=8)
        return out

    kernel = tdiff.check(launch=launch, reference=lambda x: x * 2, x=tst.tensors(shape=(8,)),
                         name="other-kernel")(triton.jit(_twice))
    v, _ = judge_for(tdiff.checks_of(kernel)[0]).verdict(x_case([1.0] * 8))
    assert v.label == V.NEVER_LAUNCHED and "_other_twice" in v.reasons[0], v


def test_returned_elements_no_program_wrote_are_unobserved():
    # a grid of n // 16 programs: 17 elements, one program, the last element never written
    (check,) = [c for c in tdiff.checks_of(H.scale_kernel) if c.name == "floor-grid"]
    v, _ = judge_for(check).verdict(x_case([1.0] * 17))
    assert v.label == V.UNOBSERVED_RESULT and "1 of 17 element(s)" in v.reasons[0], v


def test_one_changed_byte_outside_the_view_is_seen():
    from tdiff.judge.integrity import gap_damage

    half = torch.split(torch.arange(12, dtype=torch.float32).reshape(3, 4), [2, 2], dim=1)[0]
    arg = tensor_arg(half, layout="split")
    raw = bytearray(np.ascontiguousarray(arg.storage).tobytes())
    raw[2 * 4] ^= 0x01  # one bit of storage element 2 (row 0, column 2: the other half)
    band = guard_pattern(GUARD_BYTES)
    s = StorageOutcome("x", "float32", GUARD_BYTES, band + bytes(raw) + band)
    assert gap_damage(s, arg) == (1, [2])


# ---------------------------------------------------------------- shrinking

FAILS = V.Verdict(V.VS_REFERENCE, kind="values", targets=("returned",))
NO_EVIDENCE = SimpleNamespace(outcomes={})


def _shrunk(judge, budget=30.0):
    case = x_case([float(i) for i in range(1, 9)])
    small, v, _, info = shrink(case, FAILS, NO_EVIDENCE, judge, budget)
    return small.inputs["x"].values().tolist(), v, info


def test_shrink_keeps_the_same_kind_of_divergence():
    def judge(case):  # zeroing x[3] turns the values divergence into another kind
        keep = case.inputs["x"].values()[3] != 0
        return (FAILS if keep else V.Verdict(V.OUT_OF_BOUNDS, kind="oob", targets=("x",))), NO_EVIDENCE

    values, v, _ = _shrunk(judge)
    assert values == [0, 0, 0, 4, 0, 0, 0, 0] and v.kind == "values"


def test_shrink_keeps_the_same_targets():
    def judge(case):  # zeroing x[3] moves the divergence to another target
        keep = case.inputs["x"].values()[3] != 0
        return (FAILS if keep else V.Verdict(V.VS_REFERENCE, kind="values", targets=("other",))), NO_EVIDENCE

    values, v, _ = _shrunk(judge)
    assert values == [0, 0, 0, 4, 0, 0, 0, 0] and v.targets == ("returned",)


def test_shrink_zeroes_in_halving_chunks():
    def judge(case):  # fails while x[3] is not zero
        return (FAILS if case.inputs["x"].values()[3] != 0 else V.Verdict(V.PASSED)), NO_EVIDENCE

    values, _, info = _shrunk(judge)
    assert values == [0, 0, 0, 4, 0, 0, 0, 0] and "7 value(s) of `x` zeroed" in info.describe()


def test_shrink_stops_at_its_budget():
    def judge(case):  # slow, and fails while x[3] is not zero: several runs to go
        time.sleep(0.05)
        return (FAILS if case.inputs["x"].values()[3] != 0 else V.Verdict(V.PASSED)), NO_EVIDENCE

    _, _, info = _shrunk(judge, budget=0.01)
    assert info.out_of_time and info.evaluations <= 1


# ---------------------------------------------------------------- the corpus

def _entry(tmp_path, check, case=None):
    case = case or x_case([1.0, 2.0])
    return corpus.write(tmp_path, check, case, FAILS, NO_EVIDENCE)


def test_corpus_entries_belong_to_their_own_check(tmp_path):
    default, midref = K.double_kernel.__tdiff_checks__[0], K.double_midref.__tdiff_checks__[0]
    assert (default.kernel_name, default.module) == (midref.kernel_name, midref.module)  # one folder
    path = _entry(tmp_path, midref)
    assert corpus.entries_for(tmp_path, default) == []
    assert [e.path for e in corpus.entries_for(tmp_path, midref)] == [path]


def test_corpus_entries_belong_to_their_own_module(tmp_path):
    check = K.double_kernel.__tdiff_checks__[0]
    path = _entry(tmp_path, check)
    meta = json.loads((path / "entry.json").read_text())
    meta["kernel"]["module"] = "elsewhere.kernels"  # a kernel of the same name in another module
    (path / "entry.json").write_text(json.dumps(meta))
    assert corpus.entries_for(tmp_path, check) == []


def test_an_entry_with_other_inputs_is_an_error(tmp_path):
    check = K.double_kernel.__tdiff_checks__[0]
    path = _entry(tmp_path, check, Case({"y": tensor_arg(torch.ones(2))}))
    with pytest.raises(CorpusError, match="no longer match"):
        corpus.Entry(path).load_case(check)


def test_temporary_folders_are_not_entries(tmp_path):
    check = K.double_kernel.__tdiff_checks__[0]
    tmp = tmp_path / check.kernel_name / ".tmp-abc123"  # a writer's, mid-write: its tensors written, not its entry
    tmp.mkdir(parents=True)
    (tmp / corpus.TENSORS).write_bytes(b"")
    assert corpus.entries_for(tmp_path, check) == []


# ---------------------------------------------------------------- memory, dataflow, interpreter

def _memory():
    m = Memory([Region("t", 4096, 64, 4, True)])
    m.begin_launch(0)
    return m, np.array([4096 + 8], np.uint64)


def test_a_write_after_another_programs_read_is_a_race():
    m, addr = _memory()
    m.load(0, addr, None, (1,))
    m.store(1, addr, None, None, None, 0.0)
    assert [(r.kind, r.first, r.second, r.index) for r in m.races] == [
        ("write of an element another program read", 0, 1, 2)]


def test_launches_are_ordered():
    m, addr = _memory()
    m.store(0, addr, None, None, None, 0.0)
    m.begin_launch(1)  # launch 1 starts after launch 0 ended
    m.load(1, addr, None, (1,))
    m.store(1, addr, None, None, None, 0.0)
    assert m.races == []


def test_the_scale_of_an_atomic_sum_grows_with_its_updates():
    from tdiff.execute.interpreter.backend import finish_trace
    from tdiff.execute.interpreter.session import InterpreterOptions, Session

    s = Session(InterpreterOptions())
    s.memory.regions.append(Region("out", 4096, 4, 4, True))
    for program in range(4):
        s.memory.store(program, np.array([4096], np.uint64), None, np.array([1.0]), None, 0.0, atomic=True)
    finish_trace(s, None)
    assert s.trace.scales["out"][0] == pytest.approx(2.0)  # four updates of scale 1: sqrt(4)


def test_the_scale_of_a_dot_grows_with_its_terms():
    from tdiff.execute.interpreter import reductions
    from tdiff.execute.interpreter.backend import _interp

    a = np.array([[1.0, -1.0] * 32], np.float32)  # 64 products of magnitude 1 that cancel to 0
    b = np.ones((64, 1), np.float32)
    h = [_interp.TensorHandle(v, tl.float32) for v in (a, b, np.zeros((1, 1), np.float32), a @ b)]
    reductions.dot(*h)
    assert h[3]._tdiff_mag[0, 0] >= np.sqrt(64)  # the largest product, grown by sqrt(K)


def test_an_elementwise_overflow_is_recorded():
    from tdiff.execute.interpreter import dataflow
    from tdiff.execute.interpreter.backend import _interp

    a = _interp.TensorHandle(np.array([1e20, 2.0], np.float32), tl.float32)
    with np.errstate(over="ignore"):
        out = _interp.TensorHandle(a.data * a.data, tl.float32)  # inf from finite operands, and 4
    dataflow.elementwise(out, [a, a], "create_fmul")
    assert dataflow.ovf_of(out).tolist() == [True, False]


def test_the_scale_of_a_sum_grows_with_its_terms():
    kernel = tdiff.check(launch=lambda kernel, x: _sum_launch(kernel, x), x=tst.tensors(shape=(64,)),
                         name="sum")(triton.jit(_row_sum))
    x = torch.tensor([1.0, -1.0] * 32)  # sums to 0: the scale is the terms', grown by sqrt(64)
    out = InterpreterBackend().run(tdiff.checks_of(kernel)[0], Case({"x": tensor_arg(x)}))
    assert out.error is None and out.trace.scales["returned"][0] >= 8.0


def _sum_launch(kernel, x):
    out = torch.empty(1, dtype=x.dtype, device=x.device)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


def test_edge_ratio_is_relative_to_the_square_root():
    from tdiff.execute.interpreter.dataflow import edge_ratio

    assert edge_ratio(np.array([1e20]), tl.float32) >= 1  # squared, it overflows float32
    assert edge_ratio(np.array([1e10]), tl.float32) < 1


def test_a_finite_out_of_range_cast_is_undefined():
    check = K.cast_kernel.__tdiff_checks__[0]
    x = torch.tensor([3e9, 1.0, -2.0, 3.5, 0.0, 5.0, -6.0, 7.0])  # finite, but 3e9 > 2**31 - 1
    case = Case({"x": tensor_arg(x), "out": tensor_arg(torch.zeros(8, dtype=torch.int32))})
    out = InterpreterBackend().run(check, case)
    assert [e.count for e in out.trace.ub] == [1] and "3000000000" in out.trace.ub[0].example


def test_program_orders():
    check = K.double_kernel.__tdiff_checks__[0]
    case = x_case([1.0] * (64 * 5))
    ran = {order: InterpreterBackend(BackendSpec("interpreter", order=order)).run(check, case).trace.programs_run
           for order in ("forward", "reversed", "shuffled")}
    assert ran["forward"] == [(p, 0, 0) for p in range(5)]
    assert ran["reversed"] == ran["forward"][::-1]
    assert sorted(ran["shuffled"]) == ran["forward"] and ran["shuffled"] not in (ran["forward"], ran["reversed"])


def test_the_interpreter_records_the_ops_behind_each_tolerance():
    a, b = torch.ones(4, 8), torch.ones(8, 4)
    out = InterpreterBackend().run(H.small_matmul.__tdiff_checks__[0], Case({"a": tensor_arg(a), "b": tensor_arg(b)}))
    assert "dot:tf32" in out.trace.ops  # fp32 tl.dot at default precision
    out = InterpreterBackend().run(H.softmax_no_max.__tdiff_checks__[0], Case({"x": tensor_arg(torch.ones(2, 4))}))
    assert "transcendental" in out.trace.ops  # tl.exp


def test_a_sampled_run_with_atomics_interprets_every_program():
    # 256 programs (over the batched threshold of 64: sampled) sum into one element: a sample's sum is partial
    judge = judge_for(K.wide_atomic_kernel.__tdiff_checks__[0], batched_threshold=64)
    v, ev = judge.verdict(x_case([1.0] * 1024))
    interp = ev.outcomes["interpreter"]
    assert not interp.trace.sampled and len(interp.trace.programs_run) == 256
    assert not v.failed, v


def test_sample_holds_programs_on_each_last_face():
    s = sample_programs((32, 8, 1), 0)  # no random programs: corners and faces only
    assert any(p[0] == 31 and p[1] not in (0, 7) for p in s)  # on the last x face, not a corner
    assert any(p[1] == 7 and p[0] not in (0, 31) for p in s)


# ---------------------------------------------------------------- reproducers

def _verify(tmp_path, printed, code, verdict):
    (tmp_path / "repro.py").write_text(f"import sys\nprint({printed!r})\nsys.exit({code})\n")
    repro.verify(tmp_path, verdict, timeout=60)


def _mark(kind, targets):
    return f"{repro.MARK} " + json.dumps({"kind": kind, "targets": targets})


def test_a_reproducer_showing_another_divergence_is_rejected(tmp_path):
    _verify(tmp_path, _mark("values", ["returned"]), 1, FAILS)  # the same divergence: kept
    with pytest.raises(repro.ReproError):
        _verify(tmp_path, _mark("race", ["returned"]), 1, FAILS)


def test_a_reproducer_that_exits_0_is_rejected(tmp_path):
    with pytest.raises(repro.ReproError):
        _verify(tmp_path, _mark("values", ["returned"]), 0, FAILS)


def test_a_reproducer_showing_other_targets_is_rejected(tmp_path):
    with pytest.raises(repro.ReproError):
        _verify(tmp_path, _mark("values", ["other"]), 1, FAILS)


def test_the_reproducers_tolerance_is_tdiffs():
    scope = {"__name__": "reproducer"}
    exec(compile(repro._PRELUDE + repro._RUNTIME, "repro.py", "exec"), scope)
    rng = np.random.default_rng(0)
    a = rng.uniform(-4, 4, 2000)
    b = a * (1 + rng.uniform(-1, 1, a.size)) + rng.choice([0.0, 1e-3], a.size)
    for tol in (Tolerance(rtol=0.5), Tolerance.preset("arith", "float32"), Tolerance(rtol=0.1, atol=1e-3)):
        spec = {"exact": tol.exact, "rtol": tol.rtol, "atol": tol.atol, "scale": tol.scale,
                "signed_zero": tol.signed_zero}
        assert np.array_equal(scope["close"](a, b, spec), close(a, b, tol)), tol


def test_only_comparisons_of_computed_values_are_fragile():
    from tdiff.execute.interpreter import dataflow, fragile
    from tdiff.execute.interpreter.backend import _interp

    def handle(v, computed):
        h = _interp.TensorHandle(np.array(v, np.float32), tl.float32)
        if computed:
            dataflow.set_shadows(h, np.abs(h.data).astype(np.float64), None, 2.0**-23)
        return h

    def allowed(a, b, m):
        return 1e-6 * np.maximum(a, b) + 1e-6 * m

    a, b = [1.0, 1.0, 1.0], [1.0000001, 1.0, 2.0]  # close and unequal, equal, far
    for computed, want in ((False, None), (True, [True, False, False])):
        out = _interp.TensorHandle(np.array(a) < np.array(b), tl.int1)
        fragile.compare(out, handle(a, computed), handle(b, computed), allowed)
        got = fragile.fragile_of(out)
        assert (got.tolist() if got is not None else None) == want
    # a maximum whose two largest values tie (within tolerance) is fragile; of loaded values, never
    for computed, want in ((False, None), (True, [True, False])):
        x = handle([[3.0, 3.0, 1.0, 0.0], [3.0, 1.0, 0.0, 0.0]], computed)
        out = _interp.TensorHandle(np.array([3.0, 3.0], np.float32), tl.float32)
        fragile.extreme_fragile(tl.core.tensor(x, tl.block_type(tl.float32, [2, 4])),
                                tl.core.tensor(out, tl.block_type(tl.float32, [2])), 1, False, True, allowed)
        got = fragile.fragile_of(out)
        assert (got.tolist() if got is not None else None) == want
