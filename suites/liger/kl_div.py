"""liger_kernel.ops.kl_div: KL divergence (prediction in log-space), forward and backward kernels."""

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
import triton  # noqa: E402
from liger_kernel.ops import kl_div as lib  # noqa: E402
from liger_kernel.utils import infer_device  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402

DIMS = {"BT": tst.sides(1, 8), "V": tst.sides(1, 300)}
probs = tst.values(0, 1)  # y_true without log_target: probabilities


def _num_warps(BLOCK_SIZE):
    return 32 if infer_device() == "xpu" else lib.get_num_warps(BLOCK_SIZE)


def launch_fwd(kernel, y_pred, y_true, y_true_log, log_target, reduction, eps):
    # LigerKLDivLossFunction.forward is @ensure_contiguous; kldiv_forward_triton. The kernel writes per-element
    # losses ("none") or per-row sums (the three other reductions, which differ only in the torch division after)
    y_pred = y_pred.contiguous()
    y_true = (y_true_log if log_target else y_true).contiguous()
    BT, V = y_pred.shape
    BLOCK_SIZE = min(lib.MAX_FUSED_SIZE, triton.next_power_of_2(V))
    mode = lib._str_to_reduction_mode[reduction]
    out_size = (BT, V) if mode == lib._REDUCTION_MODE_NONE.value else (BT,)
    output_tensor = torch.zeros(out_size, device=y_pred.device, dtype=torch.float32)
    kernel[(BT,)](y_pred, y_pred.stride(0), y_true, y_true.stride(0), output_tensor, output_tensor.stride(0), V,
                  eps=eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=_num_warps(BLOCK_SIZE), log_target=log_target,
                  reduction=mode)
    return output_tensor


def reference_fwd(y_pred, y_true, y_true_log, log_target, reduction, eps):
    y = y_pred.double()
    if log_target:
        t = y_true_log.double()
        loss = t.exp() * (t - y)
    else:
        t = y_true.double()
        # liger clamps the target at eps inside the log, y * (log(max(y, eps)) - x): torch.nn.functional.kl_div's
        # xlogy(y, y) - y * x for targets of eps and above (FINDINGS.md, notes)
        loss = t * (torch.log(t.clamp_min(eps)) - y)
    return (loss if reduction == "none" else loss.sum(-1)).float()


tdiff.check(
    launch=launch_fwd, reference=reference_fwd, name="forward", dims=DIMS,
    y_pred=tst.tensors(shape=("BT", "V"), dtype=tst.FLOATS, max_numel=4096),
    y_true=tst.tensors(shape=("BT", "V"), dtype=tst.FLOATS, max_numel=4096, values=probs),
    y_true_log=tst.tensors(shape=("BT", "V"), dtype=tst.FLOATS, max_numel=4096),
    log_target=[False, True], reduction=["batchmean", "none", "sum", "mean"], eps=[1e-10],
)(lib._kldiv_kernel_forward)


def launch_bwd(kernel, y_true, y_true_log, log_target):
    # LigerKLDivLossFunction.backward: y_true is the contiguous target the forward saved; kldiv_backward_triton
    # writes the gradient into new_grads = torch.empty_like(y_true) (then scaled in torch)
    y_true = (y_true_log if log_target else y_true).contiguous()
    new_grads = torch.empty_like(y_true)
    BT, V = y_true.shape
    BLOCK_SIZE = min(lib.MAX_FUSED_SIZE, triton.next_power_of_2(V))
    kernel[(BT,)](y_true, y_true.stride(0), new_grads, new_grads.stride(0), V, BLOCK_SIZE=BLOCK_SIZE,
                  num_warps=_num_warps(BLOCK_SIZE), log_target=log_target)
    return new_grads


def reference_bwd(y_true, y_true_log, log_target):
    t = (y_true_log if log_target else y_true).double()
    return (-t.exp() if log_target else -t).to(y_true.dtype)


tdiff.check(
    launch=launch_bwd, reference=reference_bwd, name="backward", dims=DIMS,
    y_true=tst.tensors(shape=("BT", "V"), dtype=tst.FLOATS, max_numel=4096, values=probs),
    y_true_log=tst.tensors(shape=("BT", "V"), like="y_true"),
    log_target=[False, True],
)(lib._kldiv_kernel_backward)
