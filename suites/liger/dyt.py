"""liger_kernel.ops.dyt: Dynamic Tanh (y = tanh(alpha * x) * gamma + beta), forward and backward (autotuned).

Both kernels call libdevice.tanh, which Triton's interpreter cannot run (a stub returning None); tdiff's
`libdevice` shim computes it (tests/regressions/libdevice_returns_none.py).
"""

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
import triton  # noqa: E402
from liger_kernel.ops import dyt as lib  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402

SHAPE = (tst.sides(1, 4), tst.sides(1, 5), "N")
# 18 autotune configs: BLOCK_N in (1024, 2048, 4096) x num_stages (1, 2) x num_warps (4, 8, 16). The interpreter
# tells only BLOCK_N apart; these three cover every BLOCK_N and every num_warps.
CONFIGS = (0, 7, 14)
# liger_dyt_bwd sizes its grid by the device's SM count and has no CPU path (NUM_SMS is left unset); where the
# kernel runs on CPU tensors (Triton's interpreter), a 4-SM device stands in, which keeps several programs
# striding over the rows.
CPU_SMS = 4


def launch_fwd(kernel, x, alpha, gamma, beta, have_beta):
    # LigerDyTFunction.forward is @ensure_contiguous; liger_dyt_fwd. beta=None unless have_beta
    x, alpha, gamma = x.contiguous(), alpha.contiguous(), gamma.contiguous()
    beta = beta.contiguous() if have_beta else None
    input_shape = x.shape
    x = x.view(-1, input_shape[-1])
    M, N = x.shape
    y = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), M)
    kernel[grid](x, y, alpha, gamma, beta, beta is not None, N)
    return y.view(input_shape)


def reference_fwd(x, alpha, gamma, beta, have_beta):
    y = torch.tanh(alpha.double() * x.double()) * gamma.double()
    if have_beta:
        y = y + beta.double()
    return y.to(x.dtype)


tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward", configs=CONFIGS,
    dims={"N": tst.sides(1, 300)},
    x=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048),
    alpha=tst.tensors(shape=(1,), like="x"),
    gamma=tst.tensors(shape=("N",), like="x"),
    beta=tst.tensors(shape=("N",), like="x"), have_beta=[True, False],
)(lib._dyt_fwd_kernel)


def launch_bwd(kernel, dy, x, alpha, gamma, beta, have_beta):
    # LigerDyTFunction.backward is @ensure_contiguous; liger_dyt_bwd (beta matters only as None or not)
    dy, x, alpha, gamma = dy.contiguous(), x.contiguous(), alpha.contiguous(), gamma.contiguous()
    beta = beta.contiguous() if have_beta else None
    input_shape = x.shape
    x = x.view(-1, input_shape[-1])
    M, N = x.shape
    have_beta = beta is not None
    NUM_SMS = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else CPU_SMS
    da = torch.zeros(NUM_SMS, triton.cdiv(N, 512), dtype=torch.float32, device=x.device)
    dg = torch.empty(NUM_SMS, N, dtype=torch.float32, device=x.device)
    db = torch.empty(NUM_SMS, N, dtype=torch.float32, device=x.device) if have_beta else None
    dx = torch.empty_like(dy)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), NUM_SMS)
    kernel[grid](dy, dx, da, dg, db, x, alpha, gamma, have_beta, M, N)
    if have_beta:
        db = db.sum(0).to(x.dtype)
    dg = dg.sum(0).to(gamma.dtype)
    da = da.sum().to(x.dtype).unsqueeze(0)
    return dx.view(input_shape), da, dg, db


def reference_bwd(dy, x, alpha, gamma, beta, have_beta):
    xd = x.double().reshape(-1, x.shape[-1])
    d = dy.double().reshape(xd.shape)
    a = alpha.double()
    t = torch.tanh(a * xd)
    tmp = (1 - t * t) * d * gamma.double()
    dx = (a * tmp).to(dy.dtype).view(dy.shape)
    da = (xd * tmp).sum().to(x.dtype).unsqueeze(0)
    dg = (d * t).sum(0).to(gamma.dtype)
    db = d.sum(0).to(x.dtype) if have_beta else None
    return dx, da, dg, db


# |dy|, |gamma| <= 100: the kernel computes 1 - tanh(alpha x)^2 in float32, which cancels as tanh saturates; times a
# product dy * gamma far beyond the inputs' own magnitudes that is a visible error (FINDINGS.md liger 21, checked by
# backward_saturated below)
_MODERATE = tst.values(-100, 100)
tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward", configs=CONFIGS,
    dims={"N": tst.sides(1, 300)},
    x=tst.tensors(shape=SHAPE, dtype=tst.FLOATS, max_numel=2048),
    dy=tst.tensors(like="x", values=_MODERATE),
    # |alpha| <= 4 (DyT's alpha is a learnt scale, initialised at 0.5): with dy and gamma moderate, 1 - tanh^2's
    # float32 cancellation (liger 21, `backward_saturated` below) stays within what rounding the inputs allows
    alpha=tst.tensors(shape=(1,), like="x", values=tst.values(-4, 4)),
    gamma=tst.tensors(shape=("N",), like="x", values=_MODERATE),
    beta=tst.tensors(shape=("N",), like="x"), have_beta=[True, False],
)(lib._dyt_bwd_kernel)

SATURATED_FINDING = ("liger 21: dx = alpha * dy * gamma * (1 - tanh(alpha x)^2) with 1 - tanh^2 in float32: it "
                     "cancels as tanh saturates (|alpha x| > 4), numerically unstable where sech^2 is not")
tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward_saturated", configs=CONFIGS,
    dims={"N": tst.sides(1, 4)},
    x=tst.tensors(shape=SHAPE, dtype="float32", values=tst.values(5, 8, specials=False)),
    dy=tst.tensors(like="x", values=tst.values(1e15, 1e16, specials=False)),
    alpha=tst.tensors(shape=(1,), like="x", values=tst.values(1, 1, specials=False)),
    gamma=tst.tensors(shape=("N",), like="x", values=tst.values(1e15, 1e16, specials=False)),
    beta=tst.tensors(shape=("N",), like="x", values=tst.values(0, 0, specials=False)), have_beta=[False],
    max_examples=5, marks=[pytest.mark.xfail(strict=True, reason=SATURATED_FINDING)],
)(lib._dyt_bwd_kernel)
