"""Kernels for tests/test_plan.py: checks whose inputs come from user strategies (a composite in `inputs=`)."""

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst


@st.composite
def knobs(draw):
    # a user's composite: two integers and a flag, drawn by hypothesis's own strategies
    return {"a": draw(st.integers(0, 5)), "b": draw(st.integers(0, 3)), "flip": draw(st.booleans())}


def _launch(kernel, x, a, b, flip):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), a, b, int(flip), BLOCK=64)
    return out


@tdiff.check(launch=_launch, reference=lambda x, a, b, flip: x * 2,
             x=tst.tensors(shape=(tst.sizes(max_value=40),), layouts=["contiguous"]), inputs=knobs())
@triton.jit
def knob_kernel(x_ptr, out_ptr, n, a, b, flip, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2, mask=mask)


@tdiff.check(launch=_launch, reference=lambda x, a, b, flip: x * 2,
             x=tst.tensors(shape=(tst.sizes(max_value=40),), layouts=["contiguous"]), inputs=knobs())
@triton.jit
def knob_pair_bug(x_ptr, out_ptr, n, a, b, flip, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    bad = (a == 5) & (b == 3)  # BUG: wrong only for one pair of the composite's choices
    tl.store(out_ptr + offs, tl.where(bad, x * 2 + 1, x * 2), mask=mask)


def _clamp_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


@tdiff.check(launch=_clamp_launch, reference=lambda x: torch.where(x > 20.0, torch.log1p(torch.exp(x)), x),
             x=tst.tensors(shape=(tst.sizes(max_value=40),), values=tst.values(-30, 30, nan=False, inf=False)))
@triton.jit
def threshold_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > 20.0, tl.log(1 + tl.exp(x)), x), mask=mask)


def _rows_launch(kernel, x, head_major):
    # x: (batch, heads, seq, dim); the flag only says how a wrapper would hand it over (no bug here)
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


@tdiff.check(launch=_rows_launch, reference=lambda x, head_major: x * 2,
             x=tst.tensors(shape=(tst.sizes(max_value=4), tst.sizes(max_value=8), tst.sizes(max_value=9),
                                  tst.sizes(max_value=16)), layouts=["contiguous"]),
             head_major=st.booleans())
@triton.jit
def decode_flag_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)
