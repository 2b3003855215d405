"""liger_kernel.ops.layer_norm: LayerNorm forward and backward."""

import math

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
from liger_kernel.ops import layer_norm as lib  # noqa: E402
from liger_kernel.ops.utils import calculate_settings  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402


def launch_fwd(kernel, X, W, B, eps):
    # LigerLayerNormFunction.forward is @ensure_contiguous; layer_norm_forward views X as (-1, dim)
    X, W, B = X.contiguous(), W.contiguous(), B.contiguous()
    shape = X.shape
    X = X.view(-1, shape[-1])
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    Mean = torch.empty(n_rows, dtype=torch.float32, device=X.device)
    RSTD = torch.empty(n_rows, dtype=torch.float32, device=X.device)
    kernel[(n_rows,)](Y, Y.stride(0), X, X.stride(0), W, W.stride(0), B, B.stride(0), Mean, Mean.stride(0), RSTD,
                      RSTD.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return Y.view(*shape), Mean, RSTD


def _stats(X, eps):
    x = X.reshape(-1, X.shape[-1]).double()
    mean = x.mean(-1)
    var = ((x - mean[:, None]) ** 2).mean(-1)
    return x, mean, torch.rsqrt(var + eps)


def reference_fwd(X, W, B, eps):
    x, mean, rstd = _stats(X, eps)
    y = (x - mean[:, None]) * rstd[:, None] * W.double() + B.double()
    return y.to(X.dtype).view(X.shape), mean.float(), rstd.float()


tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward",
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=(tst.sides(1, 6), "H"), dtype=tst.FLOATS, max_numel=2048),
    W=tst.tensors(shape=("H",), like="X"),
    B=tst.tensors(shape=("H",), like="X"),
    eps=[1e-5, 1e-6],
)(lib._layer_norm_forward_kernel)

EPS = 1e-5


def launch_bwd(kernel, dY, X, W, B):
    # LigerLayerNormFunction.backward is @ensure_contiguous (dY); X, W, B, Mean, RSTD are what the forward
    # saved (contiguous; Mean and RSTD fp32, computed here).
    dY, X, W, B = dY.contiguous(), X.contiguous(), W.contiguous(), B.contiguous()
    shape = dY.shape
    dY = dY.view(-1, shape[-1])
    X = X.view(-1, shape[-1])
    n_rows, n_cols = dY.shape
    _, mean, rstd = _stats(X, EPS)
    Mean, RSTD = mean.float(), rstd.float()
    sm_count = torch.cuda.get_device_properties(X.device).multi_processor_count if X.device.type == "cuda" else 1
    _DW = torch.empty((sm_count, n_cols), dtype=torch.float32, device=W.device)
    _DB = torch.empty((sm_count, n_cols), dtype=torch.float32, device=W.device)
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    rows_per_program = math.ceil(n_rows / sm_count)
    DX = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    kernel[(sm_count,)](X, X.stride(0), W, Mean, Mean.stride(0), RSTD, RSTD.stride(0), DX, DX.stride(0), _DW,
                        _DW.stride(0), _DB, _DB.stride(0), dY, dY.stride(0), n_rows, n_cols,
                        rows_per_program=rows_per_program, BLOCK_SIZE=BLOCK_SIZE, COMPUTE_DW=True, COMPUTE_DB=True,
                        num_warps=num_warps)
    return DX.view(*shape), _DW.sum(dim=0).to(W.dtype), _DB.sum(dim=0).to(B.dtype)


def reference_bwd(dY, X, W, B):
    x, mean, rstd = _stats(X, EPS)
    mean, rstd = mean.float().double()[:, None], rstd.float().double()[:, None]  # the fp32 statistics saved
    dy = dY.reshape(x.shape).double()
    xhat = (x - mean) * rstd
    wdy = W.double() * dy
    c1 = (xhat * wdy).mean(-1, keepdim=True)
    c2 = wdy.mean(-1, keepdim=True)
    dx = (wdy - (xhat * c1 + c2)) * rstd
    return dx.to(X.dtype).view(X.shape), (dy * xhat).sum(0).to(W.dtype), dy.sum(0).to(B.dtype)


tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward",
    # hidden size >= 2: at 1, dX = rstd * (wdy - mean(wdy)) is 0 exactly and the kernel's is rounding times
    # rstd = 1/sqrt(eps) (numerically unstable: FINDINGS.md liger 23)
    dims={"H": tst.sides(2, 300)},
    X=tst.tensors(shape=(tst.sides(1, 6), "H"), dtype=tst.FLOATS, max_numel=2048),
    dY=tst.tensors(like="X"),
    W=tst.tensors(shape=("H",), like="X"),
    B=tst.tensors(shape=("H",), like="X"),
)(lib._layer_norm_backward_kernel)
