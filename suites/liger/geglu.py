"""liger_kernel.ops.geglu: GeGLU with the tanh approximation of GELU, forward and backward."""

import math

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
from liger_kernel.ops import geglu as lib  # noqa: E402
from liger_kernel.ops.utils import calculate_settings  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402

SHAPE = (tst.sides(1, 4), tst.sides(1, 5), "H")
C = math.sqrt(2 / math.pi)


def launch_fwd(kernel, a, b):
    # LigerGELUMulFunction.forward is @ensure_contiguous; geglu_forward views a and b as (-1, n_cols)
    a, b = a.contiguous(), b.contiguous()
    ori_shape = a.shape
    n_cols = ori_shape[-1]
    a, b = a.view(-1, n_cols), b.view(-1, n_cols)
    c = torch.empty_like(a)
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    kernel[(a.shape[0],)](a, b, c, c.stride(-2), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return c.view(*ori_shape)


def reference_fwd(a, b):
    return (torch.nn.functional.gelu(a.double(), approximate="tanh") * b.double()).to(a.dtype)


tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward",
    dims={"H": tst.sides(1, 300)},
    a=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048),
    b=tst.tensors(like="a"),
)(lib._geglu_tanh_forward_kernel)


def launch_bwd(kernel, dc, a, b):
    # LigerGELUMulFunction.backward is @ensure_contiguous (dc); a and b are the contiguous tensors the forward
    # saved: the kernel overwrites them with da and db.
    dc, a, b = dc.contiguous(), a.contiguous(), b.contiguous()
    ori_shape = dc.shape
    n_cols = ori_shape[-1]
    dc = dc.view(-1, n_cols)
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    kernel[(dc.shape[0],)](dc, a, b, dc.stride(-2), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return a.view(*ori_shape), b.view(*ori_shape)


def _in_place(out, grad):
    """What geglu_backward returns for an input it overwrote: nothing new where the input was contiguous (the
    kernel wrote into it; tdiff compares its storage), the contiguous copy it wrote into otherwise."""
    grad = grad.to(out.dtype)
    if out.is_contiguous():
        out.copy_(grad)
        return None
    return grad


def reference_bwd(dc, a, b):
    x = a.double()
    t = torch.tanh(C * (x + 0.044715 * x**3))
    dgelu = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * C * (1 + 3 * 0.044715 * x * x)
    d = dc.double()
    # the kernel rounds gelu(a) to dc's dtype before the product (as PyTorch's unfused ops would)
    gelu = (0.5 * x * (1 + t)).to(dc.dtype).double()
    return _in_place(a, d * b.double() * dgelu), _in_place(b, d * gelu)


#: liger 19 (FINDINGS.md): the kernel's `1 - tanh(z)^2` cancels to 0 in float32 for |z| > 9, where sech(z)^2 is
#: representable; times a gradient dc * b of 1e37 the exact da is -2.9e7 and the kernel's 0 (numerically unstable)
UNSTABLE_FINDING = ("liger 19: da = dc * b * gelu'(a): dc * b in float16 overflows where da fits (inf against 38688), "
                    "and 1 - tanh(z)^2 in float32 is 0 for |z| > 9 where sech(z)^2 is not (numerically unstable "
                    "under |dc * b| near 1e37)")

tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward",
    dims={"H": tst.sides(1, 300)},
    a=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048),
    # |dc|, |b| <= 100: liger 19 (the extreme products: dc * b overflowing float16 on the way, 1 - tanh^2 cancelling
    # under a product near 1e37) is its own check below
    b=tst.tensors(like="a", values=tst.values(-100, 100)),
    dc=tst.tensors(like="a", values=tst.values(-100, 100)),
)(lib._geglu_tanh_backward_kernel)

tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward_extreme_grad",
    dims={"H": tst.sides(1, 300)},
    a=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048),
    b=tst.tensors(like="a"),
    dc=tst.tensors(like="a"),
    marks=[pytest.mark.xfail(strict=False, reason=UNSTABLE_FINDING)],
)(lib._geglu_tanh_backward_kernel)
