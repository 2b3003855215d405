"""liger_kernel.ops.group_norm: GroupNorm over (batch, channels, *spatial), forward and backward."""

import math

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from hypothesis import assume  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from liger_kernel.ops import group_norm as lib  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402

MAX = {"float32": torch.finfo(torch.float32).max, "float16": torch.finfo(torch.float16).max,
       "bfloat16": torch.finfo(torch.bfloat16).max}
FINDING = "group norm computes its statistics in the input dtype: NaN or wrong rstd in fp16/bf16"


def _group_values(X, groups):
    """The values of a drawn X (a tdiff TensorArg), float64, one row per (batch, group)."""
    from tdiff.core import dtypes

    return dtypes.as_float64(X.values(), X.dt).reshape(X.shape[0] * groups, -1)


@st.composite
def inputs(draw, grad=False, region=None, dtypes=tst.FLOATS):
    """`region`: None for the main checks, which stay out of the two regions of the finding FINDING (see
    FINDINGS.md): every group's sum of squares stays below a quarter of the dtype's largest value, and every
    group's |mean| is at most its standard deviation (E[x^2] - E[x]^2 keeps some significant bits).
    "overflow": exactly the first region (fp16 groups whose sum of squares overflows); "constant": groups whose
    elements are all equal (variance 0), in fp16 and bf16."""
    batch, groups, cpg = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    spatial = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 8, 17, 32]), min_size=1, max_size=2)))
    C = groups * cpg
    hidden = cpg * math.prod(spatial)  # the elements of one group
    if region == "overflow":  # every element of magnitude at least sqrt(2 * max / hidden)
        dt = "float16"
        lo = math.sqrt(2 * MAX[dt] / hidden)
        vals = tst.values(lo, max(2 * lo, 300.0), nan=False, inf=False, extremes=False)
    elif region == "constant":
        dt = draw(st.sampled_from(["float16", "bfloat16"]))
        c = draw(st.floats(0.5, 200))
        vals = tst.values(c, c, nan=False, inf=False, neg_zero=False, subnormal=False, extremes=False, specials=False)
    else:
        dt = draw(st.sampled_from(dtypes))
        bound = math.sqrt(MAX[dt] / hidden) / 2  # rounding to X's dtype included
        vals = tst.values(-bound, bound, nan=False, inf=False)
    X = draw(tst.tensors(shape=(batch, C, *spatial), dtype=dt, max_numel=10**6, values=vals))
    if region is None:
        x = _group_values(X, groups)
        mean = x.mean(-1)
        assume(((mean * mean) <= (x * x).mean(-1) - mean * mean).all())
    out = {
        "X": X,
        # (a scale far above 1 times dY overflows float16 on the way, as larger dY do: liger 4; the grad checks draw
        # |W| <= 4 as they draw |dY| <= 4)
        "W": draw(tst.tensors(shape=(C,), dtype=dt, values=tst.values(-4, 4) if grad and region is None else None)),
        "B": draw(tst.tensors(shape=(C,), dtype=dt)),
        "num_groups": groups,
    }
    if grad:  # (gradients of a normalized layer's scale: larger ones overflow float16 on the way, FINDINGS.md liger 4)
        small = tst.values(-4, 4) if region is None else None
        out["dY"] = draw(tst.tensors(shape=(batch, C, *spatial), dtype=dt, max_numel=10**6, values=small))
    else:
        out["eps"] = draw(st.sampled_from([1e-5, 1e-6]))
    return out


def launch_fwd(kernel, X, W, B, num_groups, eps):
    # LigerGroupNormFunction.forward is @ensure_contiguous; group_norm_forward
    X, W, B = X.contiguous(), W.contiguous(), B.contiguous()
    num_channels = X.shape[1]
    shape = X.shape
    batch_size = shape[0]
    channels_per_group = num_channels // num_groups
    X = X.view(batch_size, num_groups, -1).contiguous()
    hidden_size = X.shape[-1]
    BLOCK_SIZE = min(lib.MAX_FUSED_SIZE, triton.next_power_of_2(hidden_size))
    Y = torch.empty((batch_size, num_groups, hidden_size), dtype=X.dtype, device=X.device)
    Mean = torch.zeros((batch_size, num_groups), dtype=X.dtype, device=X.device)
    RSTD = torch.zeros((batch_size, num_groups), dtype=X.dtype, device=X.device)
    kernel[(batch_size, num_groups)](Y, Y.stride(0), Y.stride(1), X, X.stride(0), X.stride(1), Mean, Mean.stride(0),
                                     Mean.stride(1), RSTD, RSTD.stride(0), RSTD.stride(1), W, B, hidden_size,
                                     channels_per_group, eps, BLOCK_SIZE=BLOCK_SIZE)
    return Y.view(*shape), Mean, RSTD


def _stats(X, num_groups, eps):
    x = X.double().reshape(X.shape[0], num_groups, -1)
    mean = x.mean(-1)
    var = ((x - mean[..., None]) ** 2).mean(-1)
    return mean, torch.rsqrt(var + eps)


def reference_fwd(X, W, B, num_groups, eps):
    mean, rstd = _stats(X, num_groups, eps)
    x = X.double().reshape(X.shape[0], num_groups, -1)
    xhat = ((x - mean[..., None]) * rstd[..., None]).reshape(X.shape)
    bshape = (1, -1) + (1,) * (X.ndim - 2)
    y = xhat * W.double().reshape(bshape) + B.double().reshape(bshape)
    return y.to(X.dtype), mean.to(X.dtype), rstd.to(X.dtype)


# Mean (returned[1]) is a sum the kernel takes in X's dtype (FINDING, liger 4), by design: declared a reduction at the
# case's dtype, judged by its dataflow scale. A group's mean near 0 beside values of 1e17 is all cancellation: the
# H100 sums a bfloat16 group of values up to 9e17 to 0 where the exact mean is -2.4e14: what a bfloat16 sum rounds
MEAN_IN_X_DTYPE = {"returned[1]": "reduce"}
tdiff.check(launch=launch_fwd, reference=reference_fwd, name="forward", inputs=inputs(),
            tolerances=MEAN_IN_X_DTYPE)(lib._group_norm_forward_kernel)

EPS = 1e-6


def launch_bwd(kernel, X, W, B, num_groups, dY):
    # LigerGroupNormFunction.backward is @ensure_contiguous (dY); X, W, B, Mean and RSTD are what the forward
    # saved (X contiguous; Mean and RSTD in X's dtype, computed here); group_norm_backward
    X, W, B, dY = X.contiguous(), W.contiguous(), B.contiguous(), dY.contiguous()
    mean, rstd = _stats(X, num_groups, EPS)
    Mean, RSTD = mean.to(X.dtype), rstd.to(X.dtype)
    num_channels = X.shape[1]
    shape = dY.shape
    batch_size = shape[0]
    channels_per_group = num_channels // num_groups
    dY = dY.view(batch_size, num_groups, -1)
    hidden_size = dY.shape[-1] // channels_per_group
    DX = torch.empty((batch_size, num_groups, hidden_size * channels_per_group), dtype=X.dtype, device=X.device)
    DW = torch.zeros((num_channels), dtype=W.dtype, device=W.device)
    DB = torch.zeros((num_channels), dtype=B.dtype, device=B.device)
    triton_dtype = tl.float32 if X.dtype == torch.float32 else tl.bfloat16
    BLOCK_SIZE = min(lib.MAX_FUSED_SIZE, triton.next_power_of_2(hidden_size))
    kernel[(batch_size, num_groups)](X, X.stride(0), X.stride(1), W, Mean, Mean.stride(0), Mean.stride(1), RSTD, DX, DW,
                                     DB, dY, hidden_size, channels_per_group, BLOCK_SIZE=BLOCK_SIZE, dtype=triton_dtype)
    return DX.view(*shape), DW, DB


def reference_bwd(X, W, B, num_groups, dY):
    mean, rstd = _stats(X, num_groups, EPS)
    mean, rstd = mean.to(X.dtype).double(), rstd.to(X.dtype).double()  # the statistics the forward saved
    x = X.double().reshape(X.shape[0], num_groups, -1)
    xhat = ((x - mean[..., None]) * rstd[..., None]).reshape(X.shape)
    dy = dY.double()
    bshape = (1, -1) + (1,) * (X.ndim - 2)
    sum_dims = [0] + list(range(2, X.ndim))
    dW = (dy * xhat).sum(sum_dims)
    dB = dy.sum(sum_dims)
    wdy = (dy * W.double().reshape(bshape)).reshape(x.shape)
    xh = xhat.reshape(x.shape)
    c1 = (xh * wdy).mean(-1, keepdim=True)
    c2 = wdy.mean(-1, keepdim=True)
    dx = ((wdy - (xh * c1 + c2)) * rstd[..., None]).reshape(X.shape)
    return dx.to(X.dtype), dW.to(W.dtype), dB.to(B.dtype)


# FINDINGS.md BWD_FINDING: dW and dB of float16 inputs are rounded through bfloat16 (`dW.to(dtype)`, dtype =
# tl.bfloat16 for every input that is not float32). The half-dtype checks declare bfloat16's precision for them;
# `backward_fp16_dw_via_bf16` covers exactly the finding.
BWD_FINDING = "group norm backward rounds float16 dW / dB through bfloat16 before adding them into float16 buffers"
BF16_GRADS = {"returned[1]": tdiff.Tolerance.preset("arith", "bfloat16"),
              "returned[2]": tdiff.Tolerance.preset("arith", "bfloat16")}
# FINDINGS.md liger 27 (DX_HALF_FINDING): the backward computes x_hat, W * dY and their products in the input's
# half dtype, so dX of float16 / bfloat16 inputs carries a few roundings of the group's largest term, where it
# cancels too (0.0018 against 0 on the H200). `backward` draws float32; `backward_half` declares the precision the
# kernel keeps (`reduce`, judged by the kernel's dataflow); `backward_half_dx` judges dX as the problem allows.
DX_HALF_FINDING = ("group norm backward computes dX's terms in the input's half dtype: cancellations keep their "
                   "roundings")
tdiff.check(launch=launch_bwd, reference=reference_bwd, name="backward",
            inputs=inputs(grad=True, dtypes=("float32",)))(lib._group_norm_backward_kernel)
tdiff.check(launch=launch_bwd, reference=reference_bwd, name="backward_half",
            tolerances={**BF16_GRADS, "returned[0]": "reduce"},
            inputs=inputs(grad=True, dtypes=("float16", "bfloat16")))(lib._group_norm_backward_kernel)
tdiff.check(launch=launch_bwd, reference=reference_bwd, name="backward_half_dx", tolerances=BF16_GRADS,
            inputs=inputs(grad=True, dtypes=("float16", "bfloat16")), max_examples=20,
            marks=[pytest.mark.xfail(strict=False, reason=DX_HALF_FINDING)])(lib._group_norm_backward_kernel)
tdiff.check(launch=launch_bwd, reference=reference_bwd, name="backward_fp16_dw_via_bf16",
            inputs=inputs(grad=True, dtypes=("float16",)), marks=[pytest.mark.xfail(strict=True, reason=BWD_FINDING)],
            )(lib._group_norm_backward_kernel)

# FINDINGS.md: FINDING, its two regions
for _region in ("overflow", "constant"):
    tdiff.check(launch=launch_fwd, reference=reference_fwd, name=f"forward_{_region}_groups",
                inputs=inputs(region=_region), marks=[pytest.mark.xfail(strict=True, reason=FINDING)],
                )(lib._group_norm_forward_kernel)
