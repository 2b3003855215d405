"""FlagGems rms_norm forward (`flag_gems.ops.rms_norm.rms_norm_forward`, behind `flag_gems.ops.rms_norm`):
N <= 4096 -> `rms_norm_kernel` (LibEntry(jit), one row per program), else `rms_norm_loop_kernel`
(LibEntry(autotune(jit)), TILE_N chunks; TILE_N 8192 and 1024 are tested)."""

import math

import torch
import triton

import tdiff
from tdiff import strategies as tst

from ._gems import op

R = op("rms_norm")
FLOATS = ["float32", "float16", "bfloat16"]
EPS = 1e-5


def launch(kernel, x, weight):
    """`rms_norm_forward(x, (N,), weight, eps=1e-5)` as FlagGems launches it; returns (y, inv_rms)."""
    N = x.shape[-1]
    M = math.prod(x.shape[:-1])
    x = x.contiguous()
    weight = weight.contiguous()
    y = torch.empty_like(x)
    inv_rms = torch.empty((M,), device=x.device, dtype=torch.float32)
    if N <= 4096:
        BLOCK_SIZE = triton.next_power_of_2(N)
        kernel[M,](y, inv_rms, x, weight, N, 1, N, 1, N, EPS, BLOCK_SIZE)
    else:
        kernel[M,](y, inv_rms, x, weight, N, EPS)
    return y, inv_rms


def reference(x, weight):
    xd = x.double()
    inv = torch.rsqrt((xd * xd).mean(-1) + EPS)
    y = xd * inv[..., None] * weight.double()
    return y.to(x.dtype), inv.reshape(-1).float()


tdiff.check(
    name="rows",
    launch=launch,
    reference=reference,
    dims={"N": tst.sides(1, 300)},
    x=tst.tensors(shape=(tst.sides(1, 40), "N"), dtype=FLOATS),
    weight=tst.tensors(shape=("N",), dtype=FLOATS, readonly=True),
)(R.rms_norm_kernel)

tdiff.check(
    name="loop",
    launch=launch,
    reference=reference,
    dims={"N": tst.sizes(block=1024, min_value=4097, max_value=9 * 1024 + 1)},
    x=tst.tensors(shape=(tst.sides(1, 3), "N"), dtype=FLOATS, max_numel=3 * (9 * 1024 + 1)),
    weight=tst.tensors(shape=("N",), dtype=FLOATS, readonly=True),
    configs=[0, 9],
    max_examples=10,
)(R.rms_norm_loop_kernel)
