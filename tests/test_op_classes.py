"""Operation classes: exact operations are compared bit for bit (a conversion that truncates fails;
tl.fma rounds once in tdiff's interpreter), an approximate one within its bound passes, and a case
whose result depends on what Triton leaves unspecified is a note under unspecified='note' and a
named failure otherwise."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tdiff
from tdiff import compat
from tdiff.execute.interpreter import shims

from . import semantics_kernels as SK

pytestmark = pytest.mark.triton_matrix  # CI repeats these under every allowed Triton minor

OPTS = tdiff.RunOptions(profile="ci", isolation="none", corpus_dir=None, repro_dir=None, shrink_budget=5)


@pytest.fixture
def shim_off(request):
    name = request.param
    saved = shims.ENABLED[name]
    shims.ENABLED[name] = False
    yield name
    shims.ENABLED[name] = saved


@pytest.mark.parametrize("shim_off", [shims.BF16_ARITH], indirect=True)
def test_a_conversion_that_truncates_fails(shim_off):
    # stock Triton 3.6's interpreter truncates fp32 -> bf16; a kernel that only converts is held to exactness
    with pytest.raises(tdiff.DivergenceError, match="disagrees with reference"):
        tdiff.verify(SK.to_bf16, options=OPTS)


def test_a_conversion_that_rounds_passes():
    (res,) = tdiff.verify(SK.to_bf16, options=OPTS)
    assert res.status == "passed" and res.judged > 0


@pytest.mark.parametrize("shim_off", [shims.BF16_ARITH], indirect=True)
def test_a_truncating_conversion_after_arithmetic_fails_when_the_check_says_exact(shim_off):
    with pytest.raises(tdiff.DivergenceError, match="disagrees with reference"):
        tdiff.verify(SK.affine_to_bf16, options=OPTS)


def _exact_fma(a: float, b: float, c: float, dt) -> float:
    return float(dt(float(Fraction(a) * Fraction(b) + Fraction(c))))


def test_fma_once_rounds_once():
    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float16):
        x = rng.standard_normal(4000).astype(dt)
        y = rng.standard_normal(4000).astype(dt)
        z = (-(x.astype(np.float64) * y)).astype(dt)  # cancellation: the product's low bits decide
        z[::3] = rng.standard_normal(z[::3].size).astype(dt) * dt(1e-3)
        got = shims.fma_once(x, y, z, np.dtype(dt))
        want = [_exact_fma(float(a), float(b), float(c), dt) for a, b, c in zip(x, y, z)]
        assert np.array_equal(got.astype(np.float64), np.array(want)), dt
    a = np.array([1 + 2**-12], np.float32)
    assert shims.fma_once(a, a, np.array([-1.0], np.float32), np.dtype(np.float32))[0] == 2**-11 + 2**-24
    # 4097**2 lies halfway between two float32 values; 2**-30 decides (a float64 sum would round it away:
    # triton-lang/triton#11610)
    b = np.array([4097.0], np.float32)
    assert shims.fma_once(b, b, np.array([2.0**-30], np.float32), np.dtype(np.float32))[0] == 16785410.0


def test_tl_fma_rounds_once_in_tdiffs_interpreter():
    (res,) = tdiff.verify(SK.fma_kernel, options=OPTS)
    # (the shim is counted where it changed a value: before Triton 3.9, whose own fma rounds float32 once)
    assert res.status == "passed" and (res.shims[shims.FMA_ROUNDING] > 0) == (not compat.fma_rounds_once())


@pytest.mark.parametrize("shim_off", [shims.FMA_ROUNDING], indirect=True)
def test_stock_fma_rounds_twice_before_triton_3_9(shim_off):
    if compat.fma_rounds_once():  # stock rounds float32 once itself
        (res,) = tdiff.verify(SK.fma_kernel, options=OPTS)
        assert res.status == "passed" and res.judged > 0
        return
    with pytest.raises(tdiff.DivergenceError, match="disagrees with reference"):
        tdiff.verify(SK.fma_kernel, options=OPTS)


def test_an_approximate_division_within_its_bound_passes():
    (res,) = tdiff.verify(SK.reciprocal_division, options=OPTS)
    assert res.status == "passed" and res.judged > 0


def test_an_unspecified_result_is_a_note_when_the_check_says_so():
    (res,) = tdiff.verify(SK.divide_noted, options=OPTS)
    assert res.status == "passed" and res.judged > 0
    (reason,) = [r for r in res.discarded if "integer division by zero" in r]
    assert reason.startswith("depends on unspecified results (unspecified='note')")
    assert any("not judged: depends on unspecified results" in n for n in res.notes)


def test_an_unspecified_result_fails_a_kernel_by_default_and_is_named():
    with pytest.raises(tdiff.DivergenceError, match=r"(?s)depends on unspecified results.*integer division by zero"):
        tdiff.verify(SK.divide_failing, options=OPTS)


def test_unspecified_setting_is_validated():
    with pytest.raises(tdiff.DeclarationError, match="unspecified must be 'fail' or 'note'"):
        tdiff.check(launch=lambda k: None, unspecified="maybe")(SK.to_bf16)


def test_classes_of_op_tags():
    from tdiff.core.op_classes import EXACT, TAGS
    from tdiff.core.tolerance import from_ops

    for tag in ("fma", "div_rn", "sqrt_rn"):
        assert TAGS[tag][0] == EXACT
        assert from_ops({tag}, "float32").exact  # two backends of the kernel: bit for bit
        assert not from_ops({tag}, "float32", reference=True).exact  # a reference rounds its own way
    assert from_ops({"fdiv"}, "float32").name.startswith("arith")
    assert from_ops({"fma", "transcendental"}, "float32").name.startswith("transcendental")
    assert from_ops({"fma"}, "int32").exact


def test_the_interpreter_tags_fma_and_rounded_division():
    from tdiff.execute.interpreter.hooks import _OP_TAGS

    assert (_OP_TAGS["create_fma"], _OP_TAGS["create_precise_divf"], _OP_TAGS["create_precise_sqrt"],
            _OP_TAGS["create_fdiv"], _OP_TAGS["create_fadd"]) == ("fma", "div_rn", "sqrt_rn", "fdiv", "farith")


def test_a_masked_out_lane_cast_to_int_is_not_undefined_behaviour():
    # the lanes a load without other= leaves undefined hold tdiff's poison NaN; casting them to int is
    # not an observable result when the store masks them (the NVIDIA backend casts whatever they hold)
    (res,) = tdiff.verify(SK.masked_cast_to_int, options=OPTS)
    assert res.status == "passed" and res.judged > 0
