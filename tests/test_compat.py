"""tdiff.compat: each version switch gives the documented value for each supported Triton, and agrees with
what the installed Triton's interpreter does (CI runs this module under every allowed Triton minor)."""

import inspect
import types

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.semantic import TritonSemantic
from triton.runtime import interpreter as interp

import tdiff
from tdiff import compat
from tdiff import strategies as tst

pytestmark = pytest.mark.triton_matrix

VERSIONS = [(3, 4, 0), (3, 5, 1), (3, 6, 0), (3, 7, 1), (3, 8, 0), (3, 9, 0)]
#: read from each release's runtime/interpreter.py, language/semantic.py (and FlagGems' libentry.py)
TABLE = {
    "has_get_bf16": [False, False, False, False, False, True],
    "minmax_propagates_nan": [True, True, True, True, False, False],
    "reduce_minmax_propagates_nan": [True, False, False, False, False, False],
    "fma_rounds_once": [False, False, False, False, False, True],
    "load_frontend_name": ["_load_legacy"] * 4 + ["load"] * 2,
    "volatile_position": [2, 2, 2, 2, 2, 1],
    "relaunch_takes_constexprs": [True, True, True, False, False, False],
    "driver_slot": ["active"] + ["_active"] * 5,
}


@pytest.mark.parametrize("switch", sorted(TABLE))
def test_each_switch_by_version(switch):
    assert [getattr(compat, switch)(v) for v in VERSIONS] == TABLE[switch]


def test_driver_slot_is_where_the_installed_triton_keeps_its_driver():
    from triton.runtime.driver import driver

    assert compat.driver_slot() in vars(driver)
    before = vars(driver)[compat.driver_slot()]
    with compat.compile_only(90) as target:
        assert driver.active.get_current_target() is target and target.arch == 90
    assert vars(driver)[compat.driver_slot()] is before


def test_the_index_patch_is_for_triton_before_3_7_with_numpy_2_4():
    assert [compat.index_needs_patch(v, (2, 4, 0)) for v in VERSIONS] == [True] * 3 + [False] * 3
    assert not any(compat.index_needs_patch(v, (2, 3, 5)) for v in VERSIONS)


def test_versions_parse_and_the_installed_one_is_supported():
    assert compat.version_tuple("3.9.0+git1a2b") == (3, 9, 0)
    assert compat.version_tuple("3.4.0rc2") == (3, 4, 0)
    assert compat.version_tuple("3.10") == (3, 10, 0)
    assert compat.supported() and not compat.supported((3, 3, 1)) and not compat.supported((3, 10, 0))


# ------------------------------------------------------------------ the installed Triton does what its switches say

def _handle(values, dtype=np.float32, ty=tl.float32):
    return interp.TensorHandle(np.array(values, dtype=dtype), ty)


def test_get_bf16_switch_matches_the_builder():
    assert compat.has_get_bf16() == hasattr(interp.InterpreterBuilder, "get_bf16")


def test_minmax_switch_matches_the_builder():
    out = interp.InterpreterBuilder().create_maxnumf(_handle([np.nan]), _handle([1.0]))
    assert compat.minmax_propagates_nan() == bool(np.isnan(out.data[0]))


def test_reduction_switch_matches_the_interpreter():
    x = tl.core.tensor(_handle([1.0, np.nan, 3.0, 2.0]), tl.block_type(tl.float32, [4]))
    out = interp.ReduceOps(0, tl.standard._elementwise_max, False).apply(x)
    assert compat.reduce_minmax_propagates_nan() == bool(np.isnan(out.handle.data).any())


def test_fma_switch_matches_the_builder():
    a = _handle([1 + 2.0**-12])
    out = interp.InterpreterBuilder().create_fma(a, a, _handle([-1.0]))
    assert compat.fma_rounds_once() == (float(out.data[0]) == 2.0**-11 + 2.0**-24)  # rounded once: exact here


def test_load_frontend_is_the_method_that_calls_the_masked_load():
    cls, name = compat.load_frontend()
    assert cls is TritonSemantic and name == compat.load_frontend_name()
    source = inspect.getsource(getattr(TritonSemantic, name))
    assert "create_masked_load" in source and "other.handle if other else None" in source


def test_volatile_position_matches_the_builders_signature():
    params = list(inspect.signature(interp.InterpreterBuilder.create_masked_load).parameters)
    assert params[:4] == ["self", "ptrs", "mask", "other"]
    assert params[4 + compat.volatile_position()] == "is_volatile"
    rest = [None] * compat.volatile_position() + [True]
    assert compat.is_volatile(rest, {}) and not compat.is_volatile(rest[:-1] + [False], {})
    assert compat.is_volatile([], {"is_volatile": True})


def _stock_index(tensor_cls):
    """Triton's own patch of `tensor.__index__` applied to `tensor_cls` (3.6+ take a patch scope)."""
    params = inspect.signature(interp._patch_lang_tensor).parameters
    if len(params) == 1:
        interp._patch_lang_tensor(tensor_cls)
    else:
        interp._patch_lang_tensor(tensor_cls, interp._LangPatchScope())
    return tensor_cls


def test_index_switch_matches_the_interpreter():
    t = _stock_index(type("T", (), {}))()
    t.handle = types.SimpleNamespace(data=np.array([5], np.int32))
    try:
        fails = int(t.__index__()) != 5
    except TypeError:
        fails = True
    assert fails == compat.index_needs_patch()
    assert compat.tensor_index(t) == 5


def test_the_stock_index_patch_is_installed_only_where_needed():
    calls = []
    fake = types.SimpleNamespace(_patch_lang_tensor=lambda tensor, *rest: calls.append(rest))
    patched = compat.patch_stock_index(fake)
    assert patched == compat.index_needs_patch()
    tensor_cls = type("T", (), {})
    fake._patch_lang_tensor(tensor_cls, "scope")
    assert calls == [("scope",)]
    assert (getattr(tensor_cls, "__index__", None) is compat.tensor_index) == patched


# ------------------------------------------------------------------ a relaunch of a kept kernel

PARAMS = [("x", False), ("out", False), ("n", False), ("BLOCK", True)]


def test_a_relaunch_without_constexprs_gets_those_it_was_made_with():
    made = {"x": "x0", "out": "o0", "n": 3, "BLOCK": 64}

    def again(args, kwargs, version=(3, 9, 0)):
        return compat.relaunch_arguments(PARAMS, made, args, kwargs, version)

    assert again(("x1", "o1", 5), {}) == (("x1", "o1", 5, 64), {})
    # every argument given, or some by keyword: unchanged
    assert again(("x1", "o1", 5, 32), {}) == (("x1", "o1", 5, 32), {})
    assert again(("x1", "o1"), {"n": 5, "BLOCK": 8}) == (("x1", "o1"), {"n": 5, "BLOCK": 8})
    # FlagGems passes every argument before Triton 3.7
    assert again(("x1", "o1", 5), {}, (3, 6, 0)) == (("x1", "o1", 5), {})


# ------------------------------------------------------------------ the same, through tdiff's launch routing

class _KeepFirst:
    """A kernel cache as FlagGems' LibEntry keeps one: the first launch goes through `run`, later ones call
    what it returned, with every argument before Triton 3.7 and the non-constexpr ones from 3.7 (as a compiled
    kernel's launcher takes them)."""

    def __init__(self, fn):
        self.fn, self.kept = fn, None

    def __getitem__(self, grid):
        def launch(*args):
            if self.kept is None:
                self.kept = self.fn.run(*args, grid=grid, warmup=False)
                return
            plain = args if compat.relaunch_takes_constexprs() else \
                [a for a, p in zip(args, self.fn.params) if not p.is_constexpr]
            self.kept[grid](*plain)

        return launch


@triton.jit
def _scale(x_ptr, out_ptr, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * FACTOR, mask=m)


def _twice(kernel, x):
    cached = _KeepFirst(kernel)
    out, out2 = torch.empty_like(x), torch.empty_like(x)
    cached[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), 3, 16)
    cached[(triton.cdiv(x.numel(), 16),)](out, out2, x.numel(), 3, 16)  # relaunched: constexprs added back
    return out2


tdiff.check(launch=_twice, reference=lambda x: x * 9, max_examples=5,
            x=tst.tensors(ndim=1, dtype="float32", max_side=40, layouts=["contiguous"]))(_scale)


def test_a_kept_kernel_relaunched_without_its_constexprs_runs_in_tdiffs_interpreter():
    (res,) = tdiff.verify(_scale, profile="ci", isolation="none", corpus_dir=None, repro_dir=None, plan=0)
    assert res.status == "passed" and res.judged == 5, res.report()
