"""Layer norm forward with weight and bias; mean and rstd returned too."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

EPS = 1e-5
finite = tst.values(-100, 100, nan=False, inf=False)


def launch(kernel, x, w, b):
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    mean = torch.empty(rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(max(cols, 1))
    kernel[(rows,)](x, y, w, b, mean, rstd, x.stride(0), x.stride(1), w.stride(0), b.stride(0), cols, EPS,
                    BLOCK=block)
    return y, mean, rstd


def reference(x, w, b):
    xf = x.float()
    mean = xf.mean(-1)
    var = xf.var(-1, unbiased=False)
    rstd = torch.rsqrt(var + EPS)
    y = (xf - mean[:, None]) * rstd[:, None] * w.float() + b.float()
    return y.to(x.dtype), mean, rstd


@tdiff.check(
    launch=launch,
    reference=reference,
    dims={"N": tst.sides(1, 64)},
    x=tst.tensors(shape=(tst.sides(1, 16), "N"), dtype=tst.FLOATS, values=finite),
    w=tst.tensors(shape=("N",), like="x", values=finite),
    b=tst.tensors(shape=("N",), like="x", values=finite),
)
@triton.jit
def layer_norm_fwd(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride_row, stride_col, stride_w, stride_b,
                   n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols * stride_w, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols * stride_b, mask=mask).to(tl.float32)
    y = diff * rstd * w + b
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
