"""liger_kernel.ops.sparsemax: sparsemax along a dimension (forward over torch-sorted rows, backward)."""

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
from liger_kernel.ops import sparsemax as lib  # noqa: E402
from liger_kernel.ops.utils import calculate_settings  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402

SHAPE = (tst.sides(1, 4), tst.sides(1, 5), "N")
FINDING = "sparsemax leaves the largest value out of the support when it is 2**24 or more in magnitude"
# narrowed away from FINDING (see FINDINGS.md): |x| <= 2**15 and no infinities, so that the support's float32 sum
# (a row of at most 300) stays below 2**24, where `cumsum - 1` still sees the 1 (a row of 96 values 7.42e6, each
# below 2**23, gave 1 for each of 19 elements: a CPU soak seed). No NaN either: a row with a NaN has no sparsemax,
# and Triton 3.6's interpreter and compiled code disagree on tl.maximum(NaN, 0) (FINDINGS.md, "Triton interpreter:
# tl.maximum / tl.minimum propagate NaN")
bounded = tst.values(-(2.0**15), 2.0**15, inf=False, nan=False)


def sparsemax(x, dim):
    """Sparsemax (Martins & Astudillo, 2016) along `dim`, float64: max(x - tau, 0) with tau from the sorted
    values, tau = (sum of the k largest - 1) / k for the largest k with 1 + k z_(k) > sum of the k largest."""
    z = x.double().transpose(dim, -1)
    zs = torch.sort(z, dim=-1, descending=True).values
    cssv = zs.cumsum(-1)
    r = torch.arange(1, z.shape[-1] + 1, dtype=torch.float64, device=z.device)
    support = zs > (cssv - 1) / r
    k = support.sum(-1, keepdim=True).clamp(min=1)
    tau = (torch.where(support, zs, 0.0).sum(-1, keepdim=True) - 1) / k
    return torch.clamp(z - tau, min=0).transpose(dim, -1)


def launch_fwd(kernel, x, dim):
    # LigerSparsemaxFunction.forward is @ensure_contiguous; _sparsemax_forward
    x = x.contiguous()
    if dim < 0:
        dim += x.dim()
    x_sw = x.transpose(dim, -1).contiguous()
    n_cols = x_sw.size(-1)
    n_rows = x_sw.numel() // n_cols
    x_flat = x_sw.view(n_rows, n_cols)
    x_sorted_flat = torch.sort(x_flat.float(), dim=-1, descending=True).values
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    out_flat = torch.empty_like(x_flat)
    kernel[(n_rows,)](x_flat, x_flat.stride(0), x_sorted_flat, x_sorted_flat.stride(0), out_flat, out_flat.stride(0),
                      n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return out_flat.view_as(x_sw).transpose(dim, -1)


def reference_fwd(x, dim):
    return sparsemax(x, dim).to(x.dtype)


tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward",
    dims={"N": tst.sides(1, 300)},
    x=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048, values=bounded),
    dim=[-1, 0, 1],
)(lib._sparsemax_forward_kernel)

# FINDINGS.md FINDING: every element of magnitude 2**25 or more (one row is enough)
tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward_large_values",
    dims={"N": tst.sides(1, 300)},
    x=tst.tensors(shape=SHAPE, dtype=["float32", "bfloat16"], max_numel=2048, layouts=["contiguous"],
                  values=tst.values(2.0**25, 2.0**40, nan=False, inf=False, extremes=False)),
    dim=[-1],
    marks=[pytest.mark.xfail(strict=True, reason=FINDING)],
)(lib._sparsemax_forward_kernel)


def launch_bwd(kernel, x, grad_out, dim):
    # LigerSparsemaxFunction.backward is @ensure_contiguous (grad_out); out_flat is the forward's output, saved
    # as (rows, n_cols) with `dim` last (computed here from x, in x's dtype); _sparsemax_backward
    grad_out = grad_out.contiguous()
    if dim < 0:
        dim += x.dim()
    out_flat = sparsemax(x, dim).to(x.dtype).transpose(dim, -1).contiguous().view(-1, x.shape[dim])
    grad_sw = grad_out.transpose(dim, -1).contiguous()
    n_cols = grad_sw.size(-1)
    n_rows = grad_sw.numel() // n_cols
    go_flat = grad_sw.view(n_rows, n_cols)
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    dx_flat = torch.empty_like(go_flat)
    kernel[(n_rows,)](out_flat, go_flat, dx_flat, out_flat.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE,
                      num_warps=num_warps)
    return dx_flat.view_as(grad_sw).transpose(dim, -1)


def reference_bwd(x, grad_out, dim):
    supp = sparsemax(x, dim).to(x.dtype) > 0
    go = grad_out.double()
    mean = torch.where(supp, go, 0.0).sum(dim, keepdim=True) / supp.sum(dim, keepdim=True).clamp(min=1)
    return torch.where(supp, go - mean, 0.0).to(grad_out.dtype)


# liger 26: the support's mean gradient is cast to the gradient's dtype before it is subtracted; in float16 and
# bfloat16 that rounding cancels where the gradients cluster around their mean (its own check below)
_BWD = dict(launch=launch_bwd, reference=reference_bwd, dims={"N": tst.sides(1, 300)}, grad_out=tst.tensors(like="x"),
            dim=[-1, 0, 1])
tdiff.check(name="backward", x=tst.tensors(shape=SHAPE, dtype="float32", max_numel=2048),
            **_BWD)(lib._sparsemax_backward_kernel)

HALF_MEAN_FINDING = ("liger 26 (observation): _sparsemax_backward_kernel casts go_sum / supp_cnt to the gradient's "
                     "dtype before go - mean; in bfloat16 a case came out 0.3125 against 0.334, beyond what one "
                     "rounding of the inputs and a float32 computation explain (the main job at CI's seed)")


tdiff.check(
    name="backward_half_mean", x=tst.tensors(shape=SHAPE, dtype=["float16", "bfloat16"], max_numel=2048), **_BWD,
    marks=[pytest.mark.xfail(strict=False, reason=HALF_MEAN_FINDING)],
)(lib._sparsemax_backward_kernel)
