"""The interpreter's hooks, installed around every launch from what is found once per process (the builder's value
methods, the libdevice swaps): each launch gets them all, and Triton is left exactly as it was after each."""

import importlib
import types

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from tdiff.execute.interpreter import hooks
from tdiff.execute.interpreter.backend import interpret_launch
from tdiff.execute.interpreter.session import InterpreterOptions, Session
from tdiff.execute.plan import route_launches

pytestmark = pytest.mark.triton_matrix


@triton.jit
def _exp_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, libdevice.exp(tl.load(x_ptr + offs)) + 1.0)


def _codes() -> dict:
    out = {}
    for mod in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
        with_fns = vars(importlib.import_module(mod))
        out.update({(mod, k): f.__code__ for k, f in with_fns.items() if isinstance(f, types.FunctionType)})
    return out


def test_every_launch_gets_the_hooks_and_triton_is_restored_after_each():
    before = _codes()
    for _ in range(3):  # (the second and third launches install from what the first found)
        session = Session(InterpreterOptions())
        x, out = torch.linspace(-2, 2, 16), torch.empty(16)
        with route_launches(lambda jit, _o, a, g, w, kw, s=session: interpret_launch(s, jit, a, g, w, kw)):
            _exp_kernel[(1,)](x, out, BLOCK=16)
        assert torch.allclose(out, torch.exp(x) + 1.0)
        assert {"transcendental", "farith"} <= session.trace.ops  # (the value hooks tagged both operations)
        assert _codes() == before
    assert hooks._value_methods.cache_info().hits >= 2
