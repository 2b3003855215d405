"""Selective interpretation: std-lib and user device functions interpreted, and nothing left patched."""

import inspect

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

from tdiff.execute.interpreter.backend import interpret_launch
from tdiff.execute.interpreter.scope import interpreting
from tdiff.execute.interpreter.session import InterpreterOptions, Session
from tdiff.execute.plan import route_launches
from tests import kernels as K

pytestmark = pytest.mark.triton_matrix  # CI repeats these under every allowed Triton minor


def _interpret(kernel, grid, *args, **kwargs):
    session = Session(InterpreterOptions())
    with route_launches(lambda jit, _o, a, g, w, kw: interpret_launch(session, jit, a, g, w, kw)):
        kernel[grid](*args, **kwargs)
    return session


def _lang_state():
    objs = [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype, JITFunction]
    return [{k: v for k, v in vars(o).items() if not inspect.ismodule(v)} for o in objs]


def _same(before, after):
    assert len(before) == len(after)
    for b, a in zip(before, after):
        assert b.keys() == a.keys()
        for k in b:
            assert b[k] is a[k], k


def test_stdlib_and_nested_device_functions_and_runtime_loop_bounds():
    # tl.cdiv, tl.sum, tl.max, tl.maximum, nested user device functions, and a loop over a runtime
    # bound, which Triton 3.6's own interpreter cannot run with numpy >= 2.4
    x = torch.arange(21, dtype=torch.float32) - 10
    out = torch.empty(1)
    _interpret(K.loop_reduce_kernel, (1,), x, out, x.numel(), BK=8)
    assert out.item() == pytest.approx(2 * x.sum().item() + x.max().item())


def test_softmax_from_the_standard_library():
    x = torch.randn(16)
    out = torch.empty(16)
    _interpret(K.heuristic_kernel, (1,), x, out, 16, BLOCK=16)
    assert torch.equal(out, x)


def test_language_is_restored_exactly():
    before = _lang_state()
    x = torch.ones(8)
    _interpret(K.loop_reduce_kernel, (1,), x, torch.empty(1), 8, BK=8)
    _same(before, _lang_state())
    with pytest.raises(RuntimeError, match="outside of the scope of a kernel"):
        K._scaled(1, 2)  # device functions are not callable from Python again


def _compile(fn, block):
    src = ASTSource(fn=fn, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "K": "i32", "BK": "constexpr"},
                    constexprs={"BK": block})
    return triton.compile(src, target=GPUTarget("cuda", 80, 32))


def test_same_kernel_compiles_after_interpretation(tmp_path, monkeypatch):
    # Triton's own device-function path leaves triton.language patched, and the next compile fails with
    # "'ir.value' object has no attribute 'dtype'". Compiling to PTX needs no GPU, so this runs in CI.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    _interpret(K.loop_reduce_kernel, (1,), torch.ones(8), torch.empty(1), 8, BK=8)
    compiled = _compile(K.loop_reduce_kernel, 16)  # a fresh specialization: no cache hit
    assert "ptx" in compiled.asm


def test_scope_is_reentrant_and_restores_on_error():
    before = _lang_state()
    with pytest.raises(ZeroDivisionError), interpreting():
        with interpreting():
            pass
        raise ZeroDivisionError
    _same(before, _lang_state())


def test_autotuned_kernel_runs_each_config(tmp_path):
    from suites import autotuned
    from tdiff.core import kernels
    from tdiff.core.case import Case
    from tdiff.execute.interpreter.backend import InterpreterBackend
    from tdiff.strategies import tensor_arg

    check = autotuned.axpb_kernel.__tdiff_checks__[0]
    x = tensor_arg(torch.arange(100, dtype=torch.float32))
    grids = []
    for config in range(len(kernels.configs(autotuned.axpb_kernel))):
        out = InterpreterBackend().run(check, Case({"x": x, "alpha": 2.0}, config=config))
        assert out.error is None
        grids.append(out.grid())
        assert np.array_equal(out.returned.values, np.arange(100, dtype=np.float32) * 2 + 1)
    assert grids == [(2, 1, 1), (1, 1, 1)]  # BLOCK 64 and BLOCK 256: each config really ran
