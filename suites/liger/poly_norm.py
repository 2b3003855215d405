"""liger_kernel.ops.poly_norm: PolyNorm, y = w0 norm(x^3) + w1 norm(x^2) + w2 norm(x) + b with
norm(u) = u / sqrt(mean(u^2) + eps), forward and backward."""

import math

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
from liger_kernel.ops import poly_norm as lib  # noqa: E402
from liger_kernel.ops.utils import calculate_settings  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402

SHAPE = (tst.sides(1, 6), "H")


def launch_fwd(kernel, X, W, B, eps):
    # LigerPolyNormFunction.forward is @ensure_contiguous; poly_norm_forward
    X, W, B = X.contiguous(), W.contiguous(), B.contiguous()
    shape = X.shape
    X = X.view(-1, shape[-1])
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    RSTD = torch.empty((n_rows, 3), dtype=torch.float32, device=X.device)
    kernel[(n_rows,)](Y, Y.stride(0), X, X.stride(0), W, B, RSTD, RSTD.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE,
                      num_warps=num_warps)
    return Y.view(*shape), RSTD


def _rstds(x, eps):
    """rstd of x^3, x^2, x per row (x float64, 2-D)."""
    return [torch.rsqrt((x**p * x**p).mean(-1) + eps) for p in (3, 2, 1)]


def reference_fwd(X, W, B, eps):
    x = X.reshape(-1, X.shape[-1]).double()
    w, b = W.double(), B.double()
    rs = _rstds(x, eps)
    y = sum(w[i] * x ** (3 - i) * rs[i][:, None] for i in range(3)) + b
    return y.to(X.dtype).view(X.shape), torch.stack(rs, dim=-1).float()


POWERS_FINDING = ("PolyNorm forward computes x^3 and sum(x^6) in the input dtype: float16 rows overflow for "
                  "moderate inputs and their rstd becomes 0 (FINDINGS.md, liger 10)")

# float32: |x| <= 1e5, away from POWERS_FINDING (x^6 overflows float32 from |x| ~ 2.6e6: NaN outputs)
tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward",
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=SHAPE, dtype="float32", max_numel=2048, values=tst.values(-1e5, 1e5)),
    W=tst.tensors(shape=(3,), like="X"),
    B=tst.tensors(shape=(1,), like="X"),
    eps=[1e-6],
)(lib._poly_norm_forward_kernel)

# bf16 / fp16: liger computes the powers and their mean in the input dtype, so rstd (stored float32)
# carries bf16 / fp16 rounding: accepted here as the kernel's design. float16 values are kept to |x| <= 1
# (sum(x^6) < 65504 for 300 columns), away from POWERS_FINDING, which the last check covers.
HALF = {"returned[1]": tdiff.Tolerance.preset("reduce", "bfloat16")}
# y too: its terms carry that rounding (several half-precision units of each term), which the problem does not where
# the terms cancel: judged `numerically unstable` on the H200 (float16[3, 2], y 0.000596 against 0.000718, where one
# rounding of the inputs moves it by 2.3e-5); declared here as the precision the kernel keeps (FINDINGS.md liger 10)
HALF_Y = {**HALF, "returned[0]": tdiff.Tolerance.preset("reduce", "bfloat16")}
tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward_half", tolerances=HALF_Y,
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=SHAPE, dtype=["bfloat16", "float16"], max_numel=2048, values=tst.values(-1, 1)),
    W=tst.tensors(shape=(3,), like="X"),
    B=tst.tensors(shape=(1,), like="X"),
    eps=[1e-6],
)(lib._poly_norm_forward_kernel)

tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward_fp16_large", tolerances=HALF, marks=[
        pytest.mark.xfail(strict=True, reason=POWERS_FINDING)],
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=SHAPE, dtype="float16", max_numel=2048, values=tst.values(7, 200, specials=False)),
    W=tst.tensors(shape=(3,), like="X", values=tst.values(0.5, 2, specials=False)),
    B=tst.tensors(shape=(1,), like="X", values=tst.values(-1, 1, specials=False)),
    eps=[1e-6],
)(lib._poly_norm_forward_kernel)

EPS = 1e-6


def launch_bwd(kernel, dY, X, W, in_place):
    # LigerPolyNormFunction.backward is @ensure_contiguous (grad_output); X, W, RSTD are what the forward saved
    # (RSTD computed here, fp32); poly_norm_backward
    dY, X, W = dY.contiguous(), X.contiguous(), W.contiguous()
    shape = dY.shape
    dY = dY.view(-1, shape[-1])
    X = X.view(-1, shape[-1])
    n_rows, n_cols = dY.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    RSTD = torch.stack(_rstds(X.double(), EPS), dim=-1).float()
    sm_count = torch.cuda.get_device_properties(X.device).multi_processor_count if X.device.type == "cuda" else 1
    dX = dY if in_place else torch.zeros_like(dY)
    _dW = torch.empty((sm_count, 3), dtype=torch.float32, device=W.device)
    _dB = torch.empty((sm_count,), dtype=torch.float32, device=W.device)
    rows_per_program = math.ceil(n_rows / sm_count)
    kernel[(sm_count,)](dY, dY.stride(0), dX, dX.stride(0), X, X.stride(0), W, RSTD, RSTD.stride(0), _dW, _dW.stride(0),
                        _dB, n_rows, n_cols, rows_per_program, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return dX.view(*shape), _dW.sum(dim=0).to(W.dtype), _dB.sum().to(W.dtype)


def reference_bwd(dY, X, W, in_place):
    x = X.reshape(-1, X.shape[-1]).double()
    rs = [r.float().double() for r in _rstds(x, EPS)]  # the fp32 rstds the forward saved
    dy = dY.reshape(x.shape).double()
    w = W.double()
    d = x.shape[-1]
    dx = torch.zeros_like(x)
    dw = []
    for i, p in enumerate((3, 2, 1)):
        r = rs[i][:, None]
        s_p = (dy * x**p).sum(-1, keepdim=True)
        dx = dx + w[i] * (p * x ** (p - 1) * r * dy - (p / d) * x ** (2 * p - 1) * r**3 * s_p)
        dw.append((r * s_p).sum())
    dx = dx.to(dY.dtype).view(dY.shape)
    dW, dB = torch.stack(dw).to(W.dtype), dy.sum().to(W.dtype)
    if in_place and dY.is_contiguous():  # the kernel wrote dX into dY itself (tdiff compares dY's storage)
        dY.copy_(dx)
        return None, dW, dB
    return dx, dW, dB


# |x| <= 1e4, away from POWERS_FINDING (the backward's float32 powers overflow somewhere between |x| = 1e7 and 1e8:
# NaN gradients where the float64 reference is finite; backward_large takes that region) and from
# RSTD_CUBE_FINDING (rstd_3 ** 3 underflows float32 from |x| ~ 1.6e4; backward_rstd_underflow takes it)
RSTD_CUBE_FINDING = ("PolyNorm backward computes rstd_3 * rstd_3 * rstd_3 in float32: it underflows from |x| ~ 1.6e4 "
                     "and the cubic term's gradient loses its value (FINDINGS.md, liger 13)")
tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward",
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048, values=tst.values(-1e4, 1e4)),
    dY=tst.tensors(like="X"),
    W=tst.tensors(shape=(3,), like="X"),
    in_place=[True, False],
)(lib._poly_norm_backward_kernel)

tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward_large", max_examples=5,
    marks=[pytest.mark.xfail(strict=True, reason=POWERS_FINDING)],
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=SHAPE, dtype="float32", max_numel=2048, values=tst.values(1e8, 1e9, specials=False)),
    dY=tst.tensors(like="X", values=tst.values(0.5, 2, specials=False)),
    W=tst.tensors(shape=(3,), like="X", values=tst.values(0.5, 2, specials=False)),
    in_place=[True, False],
)(lib._poly_norm_backward_kernel)

# FINDINGS.md liger 13: single-column rows of |x| in [1.2e5, 2e5] (rstd_3 ** 3 rounds to 0 in float32; from 1.6e4 it
# is subnormal, and near 3e4 still close enough to pass: the H100 seed-6 run drew only 3e4 and passed), with upstream
# gradients large enough that the lost term is beyond tdiff's judgement of an underflowed
# element against its program's inputs (for dY ~ 1 the kernel is as wrong, relative to the term, but that rule
# lets it pass)
tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward_rstd_underflow", max_examples=5,
    marks=[pytest.mark.xfail(strict=True, reason=RSTD_CUBE_FINDING)],
    X=tst.tensors(shape=(tst.sides(1, 4), 1), dtype="float32", values=tst.values(1.2e5, 2e5, specials=False)),
    dY=tst.tensors(like="X", values=tst.values(1e12, 1e16, specials=False)),
    W=tst.tensors(shape=(3,), like="X", values=tst.values(0.5, 2, specials=False)),
    in_place=[True, False],
)(lib._poly_norm_backward_kernel)
