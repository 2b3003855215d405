"""Tolerances by dtype and operation, the NaN / inf / signed-zero policy, and the mismatch report."""

import numpy as np
import pytest
import torch

from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.core.tolerance import Tolerance, from_ops
from tdiff.execute.backends.reference import ReferenceBackend
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.judge.closeness import close, value_mismatch
from tdiff.judge.compare import compare
from tdiff.judge.rules import Rules
from tdiff.record.report import mismatch_picture, render
from tdiff.strategies import tensor_arg
from tests import kernels as K
from tests.labelled import outcome


def f64(x):
    return np.asarray(x, dtype=np.float64)


def test_nan_inf_and_signed_zero_policy():
    tol = Tolerance.preset("arith", "float32")
    a = f64([np.nan, np.inf, -np.inf, 0.0, np.nan, 1.0])
    b = f64([np.nan, np.inf, -np.inf, -0.0, 1.0, np.inf])
    assert list(close(a, b, tol)) == [True, True, True, True, False, False]
    strict = Tolerance(rtol=tol.rtol, scale=tol.scale, signed_zero=True)
    assert not close(f64([0.0]), f64([-0.0]), strict)[0]
    assert not close(f64([np.inf]), f64([-np.inf]), tol)[0]


def test_exact_for_integers_bool_and_data_movement():
    assert from_ops({"farith"}, "int32").exact and from_ops(set(), "float32").exact
    tol = from_ops(set(), "float16")
    raw_a, raw_b = np.array([1.0, -0.0, 2.0], np.float16), np.array([1.0, 0.0, 2.0 + 2**-9], np.float16)
    assert list(close(f64(raw_a), f64(raw_b), tol, raw_a=raw_a, raw_b=raw_b)) == [True, True, False]  # bits, not values
    # -0.0 equals 0.0 unless the check declares signed zeros (a correct cross-entropy backward writes -0.0 where
    # torch writes 0.0)
    signed = Tolerance(exact=True, signed_zero=True)
    assert list(close(f64(raw_a), f64(raw_b), signed, raw_a=raw_a, raw_b=raw_b)) == [True, False, False]
    big_a, big_b = np.array([2**60], np.int64), np.array([2**60 + 1], np.int64)  # equal once in float64
    assert not close(f64(big_a), f64(big_b), from_ops(set(), "int64"), raw_a=big_a, raw_b=big_b).any()


def _tf32(x):
    return (x.view(np.int32) & ~np.int32(0x1FFF)).view(np.float32)


def test_measured_differences_are_within_default_tolerances():
    rng = np.random.default_rng(0)
    # fp16 x*x + x - 1.5: each op rounded (interpreter) vs once from fp32 (GPU), 4.5% relative near zero;
    # each element's scale is the largest magnitude in its own dataflow
    x = rng.uniform(-2, 2, 4096).astype(np.float16)
    sq = (x * x).astype(np.float16)
    step = (sq + x).astype(np.float16) - np.float16(1.5)
    fused = (x.astype(np.float32) ** 2 + x.astype(np.float32) - 1.5).astype(np.float16)
    rel = np.abs(f64(step) - f64(fused)) / np.maximum(np.abs(f64(fused)), 1e-3)
    assert rel.max() > 0.01  # the measured effect is really there
    scale = np.maximum.reduce([np.abs(f64(x)), f64(sq), np.abs(f64(sq + x)), np.full(x.shape, 1.5)])
    assert close(f64(step), f64(fused), from_ops({"farith"}, "float16"), scale).all()
    assert not close(f64(step), f64(fused), from_ops({"farith"}, "float16")).all()  # the scale term is needed
    # fp32 tl.dot at default precision: tf32 products (0.31 relative measured on near-zero outputs)
    a, b = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    exact, tf32 = f64(a) @ f64(b), f64(_tf32(a)) @ f64(_tf32(b))
    scale = np.abs(f64(a)).max(1)[:, None] * np.abs(f64(b)).max(0)[None, :] * 8  # products, grown by sqrt(64)
    assert close(exact, tf32, from_ops({"dot:tf32"}, "float32"), scale).all()
    assert not close(exact, tf32, from_ops({"farith"}, "float32"), scale).all()  # the tolerance kind matters
    # atomic_add over 256 programs: summation order
    parts = rng.standard_normal(256).astype(np.float32)
    fwd = np.float32(0)
    for p in parts:
        fwd = np.float32(fwd + p)
    scale = np.abs(f64(parts)).max() * 16
    assert close(f64([fwd]), f64([parts.astype(np.float64).sum()]), from_ops({"atomic"}, "float32"), scale).all()
    # a bf16 tl.dot wrong by 1e10 is not
    assert not close(f64([3.0, 1e10]), f64([3.0, 2.5]), from_ops({"dot:lowp"}, "bfloat16"), 4.0).all()


def test_an_element_is_judged_by_its_own_scale():
    tol = from_ops({"farith"}, "float32")
    a = f64([1.0, 2.0, -3.4e38, 4.0])
    b = a + f64([1.0, 0.0, 0.0, 1.0])
    assert list(close(a, b, tol, np.abs(a))) == [False, True, True, False]  # the extreme hides nothing


def test_transcendental_tolerance_covers_fast_approximations():
    rng = np.random.default_rng(1)
    x = rng.uniform(-10, 10, 4096)
    exact = np.exp(x / 4) * np.sin(x) + np.sqrt(np.abs(x))
    approx = exact * (1 + rng.uniform(-7.6e-5, 7.6e-5, x.size))  # as measured on an H100
    assert close(exact, approx, from_ops({"transcendental", "farith"}, "float32")).all()


def test_mismatch_report_fields_and_picture(tmp_path):
    a = np.zeros((4, 6))
    b = a.copy()
    b[1, 2], b[3, 5] = 5.0, -1.0
    writers = np.arange(24).reshape(4, 6) // 6
    m = value_mismatch("y", a, b, Tolerance.preset("arith"), 0.0, writers, names=("compiled", "interp"))
    assert (m.count, m.total, m.max_abs, m.max_abs_index) == (2, 24, 5.0, (1, 2))
    assert m.programs == [(1, 1), (3, 1)]
    assert "2 of 24 elements differ" in m.message and "compiled=0, interp=5" in m.message
    png = mismatch_picture(m.mask, tmp_path / "y.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 6 * 16


def test_guard_band_damage_is_located():
    from tdiff.judge import integrity

    check = K.inplace_overrun.__tdiff_checks__[0]
    case = Case({"t": tensor_arg(torch.zeros(2, 3))})
    unchecked = InterpreterBackend(BackendSpec("interpreter", check_pointers=False)).run(check, case)
    guard = [f for f in integrity.check(unchecked, case, "inplace_overrun", True).findings if f.kind == "guard"]
    assert guard and "bytes after the end of the storage" in guard[0].message
    checked = InterpreterBackend().run(check, case)
    oob = [f.message for f in integrity.check(checked, case, "inplace_overrun", True).findings if f.kind == "oob"]
    assert [m.split(" tried to ")[1].split(" ")[0] for m in oob] == ["load", "store"]
    assert all("0 bytes after the storage of `t`" in m and "kernels.py" in m for m in oob)


def test_rendered_report_reads_without_the_code():
    from tdiff.judge.evidence import gather
    from tdiff.judge.verdict import decide

    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(70, dtype=torch.float32))})
    a = InterpreterBackend().run(check, case)
    b = ReferenceBackend().run(check, case)
    b.returned.values[65] = 0.0
    ev = gather(case, "double_kernel", {"interpreter": a, "reference": b}, Rules())
    text = render(check.id, case, decide(ev), ev)
    for part in ("disagrees with reference on tests.kernels::double_kernel[tdiff]", "case: x=float32[70] contiguous",
                 "grid: (2, 1, 1)", "1 of 70 elements differ", "at (65,): interpreter = 130",
                 "written by program 1: 1"):
        assert part in text, part


def test_dot_tolerance_grows_with_the_products_not_the_result():
    # found by the suite: a [1, 25] @ [25, 1] fp32 tl.dot at default precision (tf32) whose 25
    # products of values in [-4, 4] cancel to 0.39; tf32 rounding left it 0.8% off the fp32 reference.
    # The interpreter's dataflow scale of a dot output is its largest product, grown by sqrt(K).
    from tdiff.execute.interpreter.backend import _interp
    from tdiff.execute.interpreter.reductions import dot

    worst, bug = 0.0, 0
    tol = from_ops({"dot:tf32", "farith"}, "float32")
    for seed in range(300):
        rng = np.random.default_rng(seed)
        a, b = rng.uniform(-4, 4, (1, 25)).astype(np.float32), rng.uniform(-4, 4, (25, 1)).astype(np.float32)
        exact, tf32 = f64(a) @ f64(b), f64(_tf32(a)) @ f64(_tf32(b))
        h = [_interp.TensorHandle(v, _interp.tl.float32) for v in (a, b, np.zeros((1, 1), np.float32),
                                                                    (a @ b).astype(np.float32))]
        dot(*h)
        scale = h[3]._tdiff_mag
        worst = max(worst, float(np.abs(exact - tf32).max() / np.abs(exact).max()))
        assert close(exact, tf32, tol, scale).all(), seed
        assert not close(exact, exact + 1.0, tol, scale).all()  # one wrong product
        bug += not close(exact, tf32, Tolerance.preset("arith", "float32"), scale).all()
    assert worst > 0.005 and bug > 0  # the effect is real, and needs the tf32 class


@pytest.mark.parametrize("name", ["arith", "transcendental", "reduce", "dot", "tf32"])
def test_presets_scale_with_dtype(name):
    t32, t16 = Tolerance.preset(name, "float32"), Tolerance.preset(name, "float16")
    assert 0 < t32.rtol <= t16.rtol and t32.atol > 0


def test_reductions_to_few_outputs_allow_for_summation_order():
    # measured on an H100: 383 float32 values in [-1000, 1000] summed by 6 programs with tl.atomic_add
    # gave -16.8881836 compiled and -16.8890381 interpreted; neither is a bug
    from tdiff.core.outcome import ReturnedTensor, Trace

    worst = 0.0
    for seed in range(200):
        x = np.random.default_rng(seed).uniform(-1000, 1000, 383).astype(np.float32)
        parts = [x[i:i + 64].sum(dtype=np.float32) for i in range(0, 383, 64)]
        fwd = np.float32(0)
        for p in parts:
            fwd = np.float32(fwd + p)
        pairwise = torch.from_numpy(x).sum().item()
        worst = max(worst, abs(float(fwd) - pairwise))
        case = Case({"x": tensor_arg(torch.from_numpy(x))})
        # the interpreter's scale: each program's tl.sum (largest input x sqrt(64)), six atomic adds
        scale = np.array([np.abs(x).max() * 8 * np.sqrt(6)])
        a = outcome("compiled", returned=ReturnedTensor("float32", (1,), np.array([fwd], np.float32)))
        b = outcome("interpreter", returned=ReturnedTensor("float32", (1,), np.array([pairwise], np.float32)),
                    trace=Trace(ops={"atomic", "reduce", "farith"}, scales={"returned": scale}))
        assert compare(a, b, case).ok, (seed, fwd, pairwise)
        wrong = outcome("compiled", returned=ReturnedTensor("float32", (1,), np.array([fwd + 1], np.float32)))
        assert not compare(wrong, b, case).ok
    assert worst > 1e-4  # the effect is real at this size


def test_closeness_says_how_near_the_tolerance_two_results_come():
    from tdiff.judge.closeness import closeness

    tol = Tolerance(rtol=1e-3)
    a = f64([1.0, 2.0, np.nan, np.inf])
    assert closeness(a, a, tol) == 0.0
    assert closeness(a, f64([1.0005, 2.0, np.nan, np.inf]), tol) == pytest.approx(0.5, rel=1e-3)
    assert closeness(a, f64([1.0, 2.004, np.nan, np.inf]), tol) == pytest.approx(2.0, rel=1e-3)


def test_each_case_reports_its_closeness_and_lines_run_to_hypothesis(monkeypatch):
    import hypothesis

    import tdiff
    from tdiff.drive import pipeline

    seen = []
    monkeypatch.setattr(hypothesis, "target", lambda value, label: seen.append((label, value)))
    (check,) = tdiff.checks_of(K.double_kernel)
    opts = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none")
    r = tdiff.Runner(opts).run_check(check)
    assert r.status == "passed", r.report()
    labels = {label for label, _ in seen}
    assert labels == {pipeline.CLOSENESS, pipeline.LINES_RUN}
    assert len(seen) == 2 * r.cases
    assert all(v > 0 for label, v in seen if label == pipeline.LINES_RUN)
    assert all(0 <= v < 1 for label, v in seen if label == pipeline.CLOSENESS)


def test_without_a_trace_a_tf32_dot_in_the_source_loosens_the_tolerance_to_tf32():
    # compiled against a compiled variant: no interpreter ran; the source says whether a tl.dot runs in tf32
    import triton
    import triton.language as tl

    from suites import matmul, softmax
    from tdiff.core import kernels
    from tdiff.core.static_ops import ORDER_TAG, dot_kinds
    from tdiff.judge.targets import view

    @triton.jit
    def ieee_dot(a_ptr, out_ptr, B: tl.constexpr):
        idx = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
        a = tl.load(a_ptr + idx)
        tl.store(out_ptr + idx, tl.dot(a, a, input_precision="ieee"))

    assert dot_kinds(kernels.jit_function(matmul.matmul_kernel)) == {"dot:tf32", ORDER_TAG}
    assert dot_kinds(ieee_dot) == {"dot:ieee", ORDER_TAG}
    assert dot_kinds(kernels.jit_function(softmax.softmax_kernel)) == {ORDER_TAG}  # tl.sum
    case = Case({"x": tensor_arg(torch.ones(2))})
    a, b = outcome("compiled"), outcome("compiled[num_warps=2]")
    assert Rules().ops(view(a, case), view(b, case)) is None
    a.static_ops = frozenset({"dot:tf32"})
    ops = Rules().ops(view(a, case), view(b, case))
    assert "dot:tf32" in ops and from_ops(ops, "float32").rtol >= 2e-3 > from_ops(None, "float32").rtol
    # the loosened tolerance is named with the comparison's coarse-scale caveat
    a.returned = b.returned = None
    assert compare(a, b, case).tf32_from_source and not compare(b, outcome("reference"), case).tf32_from_source


def test_compiled_variants_of_an_order_free_kernel_are_compared_bit_for_bit():
    import triton
    import triton.language as tl

    from suites import vector_add
    from tdiff.core import kernels
    from tdiff.core.static_ops import ORDER_TAG, dot_kinds
    from tdiff.judge.targets import view

    assert dot_kinds(kernels.jit_function(vector_add.add_kernel)) == set()  # elementwise: no order to change

    @triton.jit
    def row_max(x_ptr, out_ptr, B: tl.constexpr):
        tl.store(out_ptr, tl.max(tl.load(x_ptr + tl.arange(0, B)), axis=0))  # which zero comes back: the order's

    assert dot_kinds(row_max) == {ORDER_TAG}
    case = Case({"x": tensor_arg(torch.ones(2))})

    def ran(label, static=frozenset()):
        o = outcome(label, static_ops=static)
        o.launches = [object()]  # (it ran the kernel: its source is known)
        return o

    def ops(a, b):
        return Rules().ops(view(a, case), view(b, case))

    assert ops(ran("compiled"), ran("compiled[num_warps=2]")) == set()
    assert from_ops(set(), "float32").exact
    assert ops(ran("compiled"), ran("compiled[config=1]", frozenset({ORDER_TAG}))) is None  # a sum: coarse
    assert ops(ran("compiled"), ran("compiled[fp_fusion=off]")) is None  # fused or not: not the same roundings
    assert ops(ran("compiled"), ran("compiled@/other/python")) is None  # another Triton
    assert ops(ran("compiled"), outcome("compiled[num_warps=2]")) is None  # no launch recorded


def test_a_sign_of_zero_mismatch_is_named_as_such():
    from tdiff.core.tolerance import Tolerance
    from tdiff.judge.closeness import value_mismatch

    a, b = np.array([1.0, 2.0, -0.0]), np.array([1.0, 2.0, 0.0])
    assert value_mismatch("out", a, b, Tolerance(exact=True), raw_a=a.astype(np.float32),
                          raw_b=b.astype(np.float32)) is None  # zeros equal unless signed zeros are declared
    m = value_mismatch("out", a, b, Tolerance(exact=True, signed_zero=True), raw_a=a.astype(np.float32),
                       raw_b=b.astype(np.float32))
    assert "1 differ only in the sign of zero, first at (2,): a=-0, b=0" in m.message
    assert "largest difference" not in m.message


def test_a_kernels_nan_is_told_from_the_references_and_from_an_overflow():
    from types import SimpleNamespace

    from tdiff.core.dtypes import dtype
    from tdiff.judge.edges import _infinite_nan
    from tdiff.judge.targets import Target

    def target(values, edge=None, overflow=None):
        v = np.array(values, np.float64)
        return Target("returned", dtype("float32"), v, v.astype(np.float32), scale=np.ones(v.shape),
                      edge=None if edge is None else np.array(edge), overflow=overflow)

    inf, nan = float("inf"), float("nan")
    pair = SimpleNamespace(a=outcome("interpreter"), b=outcome("reference"))
    kernel, ref = np.array([nan, nan, nan, 1.0]), np.array([-inf, inf, -inf, 1.0])
    bad = np.array([True, True, True, False])
    # the program that computed elements 0 and 1 loaded an infinity; element 2's only finite inputs
    guide = target([nan, nan, nan, 1.0], edge=[inf, inf, 0.5, inf])
    assert _infinite_nan(kernel, ref, bad, guide, pair, None).tolist() == [True, True, False, False]
    # an overflow of finite values upstream: the range edge, as before
    damaged = target([nan, nan, nan, 1.0], edge=[inf, inf, 0.5, inf], overflow=np.array([True, False, False, False]))
    assert _infinite_nan(kernel, ref, bad, damaged, pair, None).tolist() == [False, True, False, False]
    # the float64 run gives -inf where the *reference* is NaN: not the kernel's NaN
    exact = target([-inf, -inf, -inf, 1.0])
    assert not _infinite_nan(np.array([-inf, -inf, -inf, 1.0]), np.array([nan, nan, nan, 1.0]), bad, guide, pair,
                             exact).any()
    # without the interpreter's dataflow nothing is flagged (the coarse rule stands)
    assert not _infinite_nan(kernel, ref, bad, None, pair, None).any()
