"""Row-wise int8 quantization (absmax scale) and dequantization."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import Tolerance
from tdiff import strategies as tst


def launch_quant(kernel, x):
    rows, cols = x.shape
    q = torch.empty((rows, cols), dtype=torch.int8, device=x.device)
    scale = torch.empty(rows, dtype=torch.float32, device=x.device)
    kernel[(rows,)](x, q, scale, x.stride(0), x.stride(1), cols, BLOCK=triton.next_power_of_2(cols))
    return q, scale


def reference_quant(x):
    xf = x.float()
    absmax = xf.abs().amax(-1).clamp_min(1e-12)
    inv = 127.0 / absmax
    y = xf * inv[:, None]
    q = torch.where(y >= 0, torch.floor(y + 0.5), torch.ceil(y - 0.5)).clamp(-127, 127)
    return q.to(torch.int8), absmax / 127.0


@tdiff.check(
    launch=launch_quant,
    reference=reference_quant,
    x=tst.tensors(ndim=2, max_side=64, dtype=tst.FLOATS, values=tst.values(-1e4, 1e4, nan=False, inf=False)),
    # a product rounded once (FMA on the GPU) or twice can land either side of .5: allow one step
    tolerances={"returned[0]": Tolerance(atol=1, name="one int8 step")},
)
@triton.jit
def quantize_int8(x_ptr, q_ptr, scale_ptr, stride_row, stride_col, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-12)
    inv = 127.0 / absmax
    y = x * inv
    q = tl.where(y >= 0, tl.floor(y + 0.5), tl.ceil(y - 0.5))
    q = tl.minimum(tl.maximum(q, -127.0), 127.0)
    tl.store(q_ptr + row * n_cols + cols, q.to(tl.int8), mask=mask)
    tl.store(scale_ptr + row, absmax / 127.0)


def launch_dequant(kernel, q, scale):
    rows, cols = q.shape
    out = torch.empty((rows, cols), dtype=torch.float32, device=q.device)
    kernel[(rows,)](q, scale, out, q.stride(0), q.stride(1), scale.stride(0), cols,
                    BLOCK=triton.next_power_of_2(cols))
    return out


@tdiff.check(
    launch=launch_dequant,
    reference=lambda q, scale: q.float() * scale[:, None],
    dims={"R": tst.sides(1, 16)},
    q=tst.tensors(shape=("R", tst.sides(1, 64)), dtype="int8"),
    scale=tst.tensors(shape=("R",), values=tst.values(1e-6, 1e3, nan=False, inf=False)),
)
@triton.jit
def dequantize_int8(q_ptr, scale_ptr, out_ptr, stride_row, stride_col, stride_scale, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    q = tl.load(q_ptr + row * stride_row + cols * stride_col, mask=mask, other=0).to(tl.float32)
    s = tl.load(scale_ptr + row * stride_scale)
    tl.store(out_ptr + row * n_cols + cols, q * s, mask=mask)
