"""An autotuned kernel: each of its two configs is tested as its own case, never hidden by the tuner."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def launch(kernel, x, alpha):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, alpha)
    return out


@tdiff.check(
    launch=launch,
    reference=lambda x, alpha: (x.float() * alpha + 1.0).to(x.dtype),
    x=tst.tensors(shape=(tst.sizes(block=(64, 256), max_blocks=3),), dtype=["float32", "float16"],
                  layouts=["contiguous", "offset"]),
    alpha=[0.5, 2.0, -3.0],
)
@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 64}, num_warps=2),
        triton.Config({"BLOCK": 256}, num_warps=4),
    ],
    key=["n"],
)
@triton.jit
def axpb_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, x * alpha + 1.0, mask=mask)
