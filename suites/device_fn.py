"""A kernel calling user device functions, nested three deep (tanh-approximated GELU)."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BLOCK = 128


@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x >= 0, t, -t)


@triton.jit
def _one_plus_tanh(x):
    """1 + tanh(x); where tanh(x) nears -1, 2e / (1 + e) with e = exp(2x): `1.0 + _tanh(x)` cancels there (a GELU
    of -5.3 came out 50% off, tdiff's verdict `numerically unstable`)."""
    e = tl.exp(2.0 * tl.where(x < 0, x, 0.0))
    return tl.where(x >= 0, 1.0 + _tanh(x), 2.0 * e / (1.0 + e))


@triton.jit
def _gelu(x):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return 0.5 * x * _one_plus_tanh(inner)


def _gelu_reference(x):
    """The tanh-approximated GELU as 1 + tanh(z) = 2 sigmoid(2z): torch's `gelu(x, approximate="tanh")` cancels to
    0 (in float64 too) where tanh(z) rounds to -1, below x = -5."""
    return x * torch.sigmoid(2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x))


def launch(kernel, x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    kernel[(triton.cdiv(n, BLOCK),)](x, out, n, x.stride(0), BLOCK=BLOCK)
    return out


@tdiff.check(
    launch=launch,
    reference=lambda x: _gelu_reference(x.double()).to(x.dtype),
    x=tst.tensors(shape=(tst.sizes(block=BLOCK, max_blocks=3),), dtype=tst.FLOATS,
                  values=tst.values(-30, 30, nan=False)),
)
@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, _gelu(x), mask=mask)
