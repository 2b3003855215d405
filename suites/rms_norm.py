"""RMSNorm forward and backward, as in LLM training libraries (rows of a 2-D activation)."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

EPS = 1e-6
finite = tst.values(-50, 50, nan=False, inf=False)


def launch_fwd(kernel, x, w):
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    kernel[(rows,)](x, w, y, rstd, x.stride(0), x.stride(1), cols, EPS, BLOCK=triton.next_power_of_2(cols))
    return y, rstd


def reference_fwd(x, w):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1) + EPS)
    return (xf * rstd[:, None] * w.float()).to(x.dtype), rstd


@tdiff.check(
    launch=launch_fwd,
    reference=reference_fwd,
    dims={"N": tst.sides(1, 96)},
    x=tst.tensors(shape=(tst.sides(1, 12), "N"), dtype=tst.FLOATS, values=finite),
    w=tst.tensors(shape=("N",), like="x", layouts=["contiguous"], values=finite),
)
@triton.jit
def rms_norm_fwd(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_row, stride_col, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, x * rstd * w, mask=mask)
    tl.store(rstd_ptr + row, rstd)


def launch_bwd(kernel, x, w, dy):
    rows, cols = x.shape
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1) + EPS).contiguous()
    dx = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    dw_rows = torch.empty((rows, cols), dtype=torch.float32, device=x.device)
    kernel[(rows,)](x, w, dy, rstd, dx, dw_rows, x.stride(0), dy.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return dx, dw_rows.sum(0)


def reference_bwd(x, w, dy):
    xf = x.float().requires_grad_(True)
    wf = w.float().requires_grad_(True)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    y = xf * rstd * wf
    dx, dw = torch.autograd.grad(y, (xf, wf), dy.float())
    return dx.to(x.dtype), dw


@tdiff.check(
    launch=launch_bwd,
    reference=reference_bwd,
    # rows of >= 2: at one column dx = rstd * (dyw - x * rstd^2 * c) cancels to dyw * eps * rstd^3 (numerically
    # unstable, the verdict names the `dx = ...` line; the same formula as liger's: FINDINGS.md liger 23). A row of
    # >= 2 whose other values are 0 cancels the same way: on the H200 (seed soak, seed 1363438660, bfloat16[2, 5])
    # the GPU's fused `dyw - x * rstd^2 * c` left its product's rounding (2.2e-5) where IEEE arithmetic cancels to
    # the reference's -7.6e-6. This example keeps liger's formula and declares its precision: the kernel's own
    # arithmetic at its dataflow scale (`tolerance="arith"`, shown in the run's table)
    dims={"N": tst.sides(2, 96)},
    tolerance="arith",
    x=tst.tensors(shape=(tst.sides(1, 12), "N"), dtype=tst.FLOATS, layouts=["contiguous", "split", "padded"],
                  values=finite),
    w=tst.tensors(shape=("N",), like="x", layouts=["contiguous"], values=finite),
    dy=tst.tensors(like="x", layouts=["contiguous", "split", "padded"], values=finite),
)
@triton.jit
def rms_norm_bwd(x_ptr, w_ptr, dy_ptr, rstd_ptr, dx_ptr, dw_ptr, stride_x, stride_dy, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + row)
    dyw = dy * w
    c = tl.sum(dyw * x, axis=0) / n_cols
    dx = rstd * (dyw - x * rstd * rstd * c)
    tl.store(dx_ptr + row * n_cols + cols, dx, mask=mask)
    tl.store(dw_ptr + row * n_cols + cols, dy * x * rstd, mask=mask)
