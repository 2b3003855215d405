"""liger_kernel.ops.fused_linear_cross_entropy: the fused linear cross entropy's forward, which runs the cross-entropy
kernel on chunks of `input @ weight.T` and multiplies the gradient it writes over the logits into grad_input and
grad_weight with torch (those outputs are the wrapper's: the kernel's rounding reaches them through torch's matmuls).
"""

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from liger_kernel.ops import fused_linear_cross_entropy as lib  # noqa: E402
from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402


@st.composite
def inputs(draw):
    bt, h, v = draw(tst.sides(1, 6)), draw(tst.sides(1, 16)), draw(tst.sides(2, 200))
    dt = draw(st.sampled_from(["float32"]))
    values = tst.values(-4, 4, nan=False, inf=False, extremes=False)
    ignore_index = -100
    targets = draw(st.lists(st.one_of(st.integers(0, v - 1), st.just(ignore_index)), min_size=bt, max_size=bt))
    if all(t == ignore_index for t in targets):
        targets[0] = 0
    return {
        "_input": draw(tst.tensors(shape=(bt, h), dtype=dt, values=values)),
        "weight": draw(tst.tensors(shape=(v, h), dtype=dt, values=values)),
        "target": torch.tensor(targets, dtype=torch.int64),
        "bias": draw(st.one_of(st.none(), tst.tensors(shape=(v,), dtype=dt, values=values))),
        "ignore_index": ignore_index,
        "reduction": draw(st.sampled_from(["mean", "sum"])),
    }


def launch(kernel, _input, weight, target, bias, ignore_index, reduction):
    assert kernel is liger_cross_entropy_kernel
    loss, _, _, _, grad_input, grad_weight, grad_bias = lib.fused_linear_cross_entropy_forward(
        _input, weight, target, bias=bias, ignore_index=ignore_index, reduction=reduction, compute_gradients=True,
        weight_requires_grad=True)
    return loss, grad_input, grad_weight, grad_bias


def reference(_input, weight, target, bias, ignore_index, reduction):
    """The gradients written out as softmax minus one-hot (a user's formula: its float32 computation rounds
    p - 1 at 1's ulp, where the kernel's `exp(x - lse)` rounds at lse's)."""
    x, w = _input.double(), weight.double()
    logits = x @ w.t() + (bias.double() if bias is not None else 0)
    keep = target != ignore_index
    p = torch.softmax(logits, dim=-1)
    onehot = torch.zeros_like(p)
    onehot[keep, target[keep]] = 1.0
    g = (p - onehot) * keep[:, None]
    loss = -(torch.log_softmax(logits, -1)[keep, target[keep]]).sum()
    if reduction == "mean":
        n = keep.sum()
        g, loss = g / n, loss / n
    gb = g.sum(0).to(bias.dtype) if bias is not None else None
    return loss.float(), (g @ w).to(_input.dtype), (g.t() @ x).to(weight.dtype), gb


tdiff.check(launch=launch, reference=reference, name="fused_linear", inputs=inputs())(liger_cross_entropy_kernel)
