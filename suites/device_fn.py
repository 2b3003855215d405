"""A kernel calling user device functions, nested two deep (tanh-approximated GELU)."""

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
def _gelu(x):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + _tanh(inner))


def launch(kernel, x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    kernel[(triton.cdiv(n, BLOCK),)](x, out, n, x.stride(0), BLOCK=BLOCK)
    return out


@tdiff.check(
    launch=launch,
    reference=lambda x: torch.nn.functional.gelu(x.float(), approximate="tanh").to(x.dtype),
    x=tst.tensors(shape=(tst.sizes(block=BLOCK, max_blocks=3),), dtype=tst.FLOATS,
                  values=tst.values(-30, 30, nan=False)),
)
@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, _gelu(x), mask=mask)
