"""liger_kernel.ops.fused_add_rms_norm: residual add + RMSNorm (S = X + R; Y = rmsnorm(S)), forward and backward,
all three casting modes."""

import math

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
from liger_kernel.ops import fused_add_rms_norm as lib  # noqa: E402
from liger_kernel.ops.utils import calculate_settings  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402

from ._dtypes import TRITON_DTYPE  # noqa: E402

CASTING = {"llama": 0, "gemma": 1, "none": -1}  # lib._str_to_casting_mode
NONE_FP16_FINDING = ("casting_mode='none' sums the squares in float16: a row whose sum reaches 65504 gets "
                     "rstd 0 and an all-zero output")
SHAPE = (tst.sides(1, 6), "H")


def launch_fwd(kernel, X, R, W, eps, offset, casting_mode):
    # LigerFusedAddRMSNormFunction.forward is @ensure_contiguous; fused_add_rms_norm_forward
    X, R, W = X.contiguous(), R.contiguous(), W.contiguous()
    shape = X.shape
    X, R = X.view(-1, shape[-1]), R.view(-1, shape[-1])
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    mode = CASTING[casting_mode]
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    S = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    RSTD = torch.empty(n_rows, dtype=torch.float32 if mode in (0, 1) else X.dtype, device=X.device)
    kernel[(n_rows,)](Y, Y.stride(0), S, S.stride(0), X, X.stride(0), R, R.stride(0), W, W.stride(0), RSTD,
                      RSTD.stride(0), n_cols, eps, offset, mode, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
                      num_stages=2)
    return Y.view(*shape), S.view(*shape), RSTD


def _rstd(S, mode, eps):
    s = S.double()
    if mode == -1:  # "none": each square and eps rounded to S's dtype, the mean square not (see rms_norm.py)
        ms = (s * s).to(S.dtype).double().mean(-1)
        return torch.rsqrt(ms + torch.tensor(eps, dtype=S.dtype).double()).to(S.dtype)
    return torch.rsqrt((s * s).mean(-1) + eps).float()


def reference_fwd(X, R, W, eps, offset, casting_mode):
    dt = X.dtype
    S = (X.double() + R.double()).to(dt)  # the residual sum, in X's dtype
    s = S.reshape(-1, S.shape[-1])
    rstd = _rstd(s, CASTING[casting_mode], eps)
    sn = s.double() * rstd.double()[:, None]
    if casting_mode in ("llama", "none"):  # s * rstd is rounded to the dtype before the weight multiply
        sn = sn.to(dt).double()
    y = sn * (W.double() + offset)
    return y.to(dt).view(X.shape), S, rstd


tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward",
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048),
    R=tst.tensors(like="X"),
    W=tst.tensors(shape=("H",), like="X"),
    eps=[1e-6, 1e-5], offset=[0.0, 1.0], casting_mode=["llama", "gemma"],
)(lib._fused_add_rms_norm_forward_kernel)

# casting_mode "none": everything in X's dtype. In float16 the row's sum of squares stays below 65504 here
# (FINDINGS.md liger 12, checked by forward_none_fp16_sum_overflow); float32 and bfloat16 take their full range
tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward_none",
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=SHAPE, dtype=["float32", "bfloat16"], max_numel=2048),
    R=tst.tensors(like="X"),
    W=tst.tensors(shape=("H",), like="X"),
    eps=[1e-6, 1e-5], offset=[0.0, 1.0], casting_mode=["none"],
)(lib._fused_add_rms_norm_forward_kernel)

tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward_none_fp16",
    dims={"H": tst.sides(1, 300)},
    X=tst.tensors(shape=SHAPE, dtype="float16", max_numel=2048, values=tst.values(-1.5, 1.5)),
    R=tst.tensors(like="X", values=tst.values(-1.5, 1.5)),
    W=tst.tensors(shape=("H",), like="X"),
    eps=[1e-6, 1e-5], offset=[0.0, 1.0], casting_mode=["none"],
)(lib._fused_add_rms_norm_forward_kernel)

# FINDINGS.md liger 12: float16 rows whose sum of squares passes 65504 (their mean square does not)
tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward_none_fp16_sum_overflow",
    dims={"H": tst.sides(64, 300)},
    X=tst.tensors(shape=SHAPE, dtype="float16", values=tst.values(16, 20, nan=False, inf=False, extremes=False)),
    R=tst.tensors(like="X", values=tst.values(16, 20, nan=False, inf=False, extremes=False)),
    W=tst.tensors(shape=("H",), dtype="float16"),
    eps=[1e-6, 1e-5], offset=[0.0, 1.0], casting_mode=["none"],
    max_examples=5, marks=[pytest.mark.xfail(strict=True, reason=NONE_FP16_FINDING)],
)(lib._fused_add_rms_norm_forward_kernel)

EPS = 1e-6


def launch_bwd(kernel, dY, dS_out, S, W, offset, casting_mode, in_place):
    # LigerFusedAddRMSNormFunction.backward is @ensure_contiguous (dY, dS_out); S, W and RSTD are what the forward
    # saved (RSTD computed here); fused_add_rms_norm_backward
    dY, dS_out, S, W = dY.contiguous(), dS_out.contiguous(), S.contiguous(), W.contiguous()
    mode = CASTING[casting_mode]
    shape = dY.shape
    dim = shape[-1]
    dY, dS_out, S = dY.view(-1, dim), dS_out.view(-1, dim), S.view(-1, dim)
    n_rows, n_cols = dY.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    RSTD = _rstd(S, mode, EPS)
    sm_count = torch.cuda.get_device_properties(S.device).multi_processor_count if S.device.type == "cuda" else 1
    _dW = torch.empty((sm_count, n_cols), dtype=torch.float32, device=W.device)
    rows_per_program = math.ceil(n_rows / sm_count)
    dX = dY if in_place else torch.empty_like(dY)
    kernel[(sm_count,)](dY, dY.stride(0), dS_out, dS_out.stride(0), dX, dX.stride(0), S, S.stride(0),
                        TRITON_DTYPE[S.dtype], W, W.stride(0), RSTD, RSTD.stride(0), _dW, _dW.stride(0),
                        n_rows, n_cols, offset, rows_per_program, mode, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
                        num_stages=2, has_dS_out=True, COMPUTE_DW=True)
    return dX.view(*shape), _dW.sum(dim=0).to(W.dtype)


def reference_bwd(dY, dS_out, S, W, offset, casting_mode, in_place):
    dt = S.dtype
    s = S.reshape(-1, S.shape[-1]).double()
    dy = dY.reshape(s.shape).double()
    rstd = _rstd(S.reshape(s.shape), CASTING[casting_mode], EPS).double()[:, None]
    m = dy * (W.double() + offset)
    dx = rstd * m - rstd**3 / s.shape[-1] * (m * s).sum(-1, keepdim=True) * s + dS_out.reshape(s.shape).double()
    sn = s * rstd
    if casting_mode == "llama":  # dW accumulates dy * (s * rstd) rounded to S's dtype
        sn = sn.to(dt).double()
    dw = (dy * sn).sum(0).to(W.dtype)
    dx = dx.to(dY.dtype).view(dY.shape)
    if in_place and dY.is_contiguous():  # the kernel wrote dX into dY itself (tdiff compares dY's storage)
        dY.copy_(dx)
        return None, dw
    return dx, dw


# hidden size 1 apart: compiled, casting_mode "none" in float16 gives NaN there (FINDINGS.md triton 14, liger 17).
# |S|, |dY| and |W| at most 1e11: the backward sums dY * W * S over a row before scaling it by rstd, as RMSNorm's
# does (FINDINGS.md liger 15, checked below by backward_sum_overflow)
_BOUNDED = tst.values(-1e11, 1e11)
tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward",
    dims={"H": tst.sides(2, 300)},
    S=tst.tensors(shape=SHAPE, dtype=["float32", "bfloat16"], max_numel=2048, values=_BOUNDED),
    dY=tst.tensors(like="S", values=_BOUNDED),
    dS_out=tst.tensors(like="S"),
    W=tst.tensors(shape=("H",), like="S", values=_BOUNDED),
    offset=[0.0, 1.0], casting_mode=["llama", "gemma", "none"], in_place=[False, True],
)(lib._fused_add_rms_norm_backward_kernel)

# float16 apart, with |dY| and |W| at most 64: casting mode "llama" multiplies in the input's dtype
# (`dY_row * (X_row * rstd_row).to(X_dtype)` into dW, `dY_row * W_row` before its cast to float32), so a float16
# product over 65504 is inf, and two rows' infinities of opposite signs make dW NaN where the exact dW fits (a CPU
# dev-profile soak seed: float16[2, 264], NaN against 325). The precision llama's casting chooses (torch's float16
# autograd of the Llama form multiplies in float16 too), not a bug: 64 * 64 and 64 * sqrt(300) fit float16
_HALF = tst.values(-64, 64)
tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward_fp16",
    dims={"H": tst.sides(2, 300)},
    S=tst.tensors(shape=SHAPE, dtype="float16", max_numel=2048),
    dY=tst.tensors(like="S", values=_HALF),
    dS_out=tst.tensors(like="S"),
    W=tst.tensors(shape=("H",), like="S", values=_HALF),
    offset=[0.0, 1.0], casting_mode=["llama", "gemma", "none"], in_place=[False, True],
)(lib._fused_add_rms_norm_backward_kernel)

SUM_OVERFLOW_FINDING = ("fused add-RMSNorm backward sums dY * W * S before scaling by rstd, as RMSNorm's does: it "
                        "overflows float32 (NaN, -inf) where the exact gradient is small (FINDINGS.md liger 15)")
_HUGE = tst.values(1e13, 1e15, nan=False, inf=False, neg_zero=False, subnormal=False, extremes=False, specials=False)
tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward_sum_overflow",
    dims={"H": tst.sides(1, 64)},
    S=tst.tensors(shape=(tst.sides(1, 4), "H"), dtype="float32", max_numel=256, values=_HUGE),
    dY=tst.tensors(like="S", values=_HUGE),
    dS_out=tst.tensors(like="S"),
    W=tst.tensors(shape=("H",), like="S", values=_HUGE),
    offset=[0.0], casting_mode=["llama"], in_place=[False], max_examples=5,
    marks=[pytest.mark.xfail(strict=True, reason=SUM_OVERFLOW_FINDING)],
)(lib._fused_add_rms_norm_backward_kernel)

H1_FINDING = ("hidden size 1: n_cols == 1 is compiled in as a constant, so `-(1.0 / n_cols) * rstd * rstd * rstd` "
              "is computed in float16 (a Python float times a float16 rstd) and overflows: compiled dX is NaN or "
              "inf where the interpreter (which does not specialize) and the reference are finite (FINDINGS.md "
              "triton 14, liger 17)")
H1 = {"H": tst.sides(1, 1)}
# (FINDINGS.md liger 23: at hidden size 1 dX cancels; these checks, there for H1_FINDING, fail on it at some draws)
H1_CANCELS = ("liger 23: at hidden size 1, dX = rstd * (g - x * rstd^2 * g * x) cancels to g * eps * rstd^3 from "
              "terms far larger (numerically unstable where x^2 >> eps)")
for name, dtypes, modes, marks in (
        ("backward_h1", tst.FLOATS, ["llama", "gemma"], [pytest.mark.xfail(strict=False, reason=H1_CANCELS)]),
        ("backward_h1_none", ["float32", "bfloat16"], ["none"], [pytest.mark.xfail(strict=False, reason=H1_CANCELS)]),
        ("backward_h1_none_fp16", ["float16"], ["none"],
         [pytest.mark.xfail(condition=torch.cuda.is_available(), strict=True, reason=H1_FINDING)])):
    tdiff.check(
        launch=launch_bwd, reference=reference_bwd, name=name, dims=H1,
        S=tst.tensors(shape=SHAPE, dtype=dtypes, max_numel=2048, values=_BOUNDED),
        dY=tst.tensors(like="S", values=_BOUNDED),
        dS_out=tst.tensors(like="S"),
        W=tst.tensors(shape=("H",), like="S", values=_BOUNDED),
        offset=[0.0, 1.0], casting_mode=modes, in_place=[False, True], max_examples=10, marks=marks,
    )(lib._fused_add_rms_norm_backward_kernel)

# casting_mode "gemma" on its own: the draws of `backward` above (CI profile, derandomized) never pick it. Hidden
# size 1 apart, as in `backward` (the backward_h1 checks draw it): there dX cancels to dY * W * eps * rstd^3 from
# terms 1e4 times larger, and one case (S = 0.1257, dY = W = 12, Triton 3.6.0's interpreter) differed from the
# reference by 1.3e-4 (1.8e-3 relative) where the measured scale allowed less: not yet settled whether that is the
# kernel's formula or the measurement's margin (issue 41). Values bounded as `backward`'s: unbounded, an H200 soak
# seed drew S = dY = 8.1e14, W = 2.1e11, whose row sum overflows (liger 15, backward_sum_overflow's finding)
tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward_gemma",
    dims={"H": tst.sides(2, 300)},
    S=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048, values=_BOUNDED),
    dY=tst.tensors(like="S", values=_BOUNDED),
    dS_out=tst.tensors(like="S"),
    W=tst.tensors(shape=("H",), like="S", values=_BOUNDED),
    offset=[0.0, 1.0], casting_mode=["gemma"], in_place=[False, True], max_examples=10,
)(lib._fused_add_rms_norm_backward_kernel)

