"""liger_kernel.ops.jsd: generalized Jensen-Shannon divergence (forward KL at beta = 0, reverse KL at beta = 1),
loss and gradient in one kernel, as launched by the Triton backend of the ``jsd_loss_and_grad`` primitive
(liger_kernel.ops.backends._triton.jsd.jsd_loss_and_grad_triton) that jsd_forward dispatches to."""

import pytest

pytest.importorskip("liger_kernel")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from hypothesis import assume  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from liger_kernel.ops import jsd as lib  # noqa: E402
from liger_kernel.ops.backends._triton import jsd as triton_backend  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402
from tdiff.core import dtypes  # noqa: E402

IGNORE = -100


@st.composite
def inputs(draw):
    BT = draw(st.integers(1, 8))
    V = draw(st.one_of(tst.sides(1, 300), st.sampled_from([4095, 4096, 4097, 8200])))  # BLOCK_SIZE <= 4096
    dt = draw(st.sampled_from(tst.FLOATS))
    labels = draw(st.one_of(st.none(), st.lists(st.one_of(st.integers(0, V - 1), st.just(IGNORE)), min_size=BT,
                                                max_size=BT)))
    # log-probabilities, as LigerJSDFunction documents its inputs (log Q and log P, so P, Q <= 1); -inf included
    logp = tst.values(max_value=0)
    out = {
        "_input": draw(tst.tensors(shape=(BT, V), dtype=dt, max_numel=10**6, values=logp)),
        "target": draw(tst.tensors(shape=(BT, V), dtype=dt, max_numel=10**6, values=logp)),
        "shift_labels": None if labels is None else torch.tensor(labels, dtype=torch.int64),
        "beta": draw(st.sampled_from([0.5, 0.0, 1.0, 0.1])),
    }
    # liger 22: at beta 0 (1) a block of the target (input) that is -inf throughout gives NaN; its own check below
    shifted = {0.0: "target", 1.0: "_input"}.get(out["beta"])
    assume(shifted is None or not _all_inf_block(out[shifted]))
    return out



def _all_inf_block(logp, block: int = 4096) -> bool:
    """Whether some row of a drawn 2-D tensor has a block of `block` columns (the last one: its columns inside the
    row) whose largest value is -inf: all -inf, or -inf and NaN (`tl.max` skips NaN on the GPU, as tdiff's
    interpreter does: [nan, -inf] shifts by -inf too)."""
    v = dtypes.as_float64(logp.values(), logp.dt)
    for start in range(0, v.shape[-1], block):
        part = v[:, start:start + block]
        ninf = part == float("-inf")
        if bool(((ninf | np.isnan(part)).all(-1) & ninf.any(-1)).any()):
            return True
    return False


def launch(kernel, _input, target, shift_labels, beta):
    # LigerJSDFunction.forward is @ensure_contiguous; jsd_forward -> jsd_loss_and_grad_triton. dX is a clone of
    # the input the kernel overwrites with the gradient; the loss tile is summed in torch afterwards.
    _input, target = _input.contiguous(), target.contiguous()
    has_label = shift_labels is not None
    if has_label:
        shift_labels = shift_labels.contiguous()
    BT, V = _input.shape
    n_non_ignore = float((shift_labels != IGNORE).sum().item() if has_label else BT)
    dX = _input.clone()
    BLOCK_SIZE = min(triton_backend._JSD_TRITON_BLOCK_SIZE, triton_backend._next_pow2(V))
    loss = torch.zeros((BT, V), dtype=torch.float32, device=dX.device)
    label_arg = shift_labels if has_label else torch.empty(1, device=dX.device)
    kernel[(BT,)](X_ptr=dX, X_stride=dX.stride(-2), Y_ptr=target, Y_stride=target.stride(-2), loss_ptr=loss,
                  loss_stride=loss.stride(-2), dX_ptr=dX, dX_stride=dX.stride(-2), label_ptr=label_arg,
                  beta=float(beta), n_non_ignore=int(round(n_non_ignore)), ignore_index=IGNORE, n_cols=V,
                  BLOCK_SIZE=BLOCK_SIZE, HAS_LABEL=has_label)
    return loss, dX


def reference(_input, target, shift_labels, beta):
    """Per element, scaled by 1 / (rows not ignored): beta = 0: P (log P - log Q) (forward KL); beta = 1:
    Q (log Q - log P) (reverse KL); otherwise beta P (log P - log M) + (1 - beta) Q (log Q - log M) with
    M = beta P + (1 - beta) Q; X = log Q is the input (student), Y = log P the target (teacher)."""
    X, Y = _input.double(), target.double()
    keep = torch.ones(X.shape[0], dtype=torch.bool) if shift_labels is None else shift_labels != IGNORE
    n = int(keep.sum())
    Q, P = X.exp(), Y.exp()
    if beta == 0.0:
        loss, dX = P * (Y - X), -P
    elif beta == 1.0:
        loss = Q * (X - Y)
        dX = loss + Q
    else:
        log_M = torch.logaddexp(Y + torch.log(torch.tensor(beta, dtype=torch.float64)),
                                X + torch.log(torch.tensor(1 - beta, dtype=torch.float64)))
        loss = beta * P * (Y - log_M) + (1 - beta) * Q * (X - log_M)
        dX = (1 - beta) * Q * (X - log_M)
    loss = torch.where(keep[:, None], loss / max(n, 1), 0.0)
    dX = torch.where(keep[:, None], dX / max(n, 1), 0.0)
    return loss.float(), dX.to(_input.dtype)


# FINDINGS.md, "Observation: liger JSD at 0 < beta < 1 rounds log(M) of a nearly equal pair by one float32 ulp of 1":
# where log-probabilities near 0 nearly agree (probabilities near 1), log_M = max + log(M_shifted) keeps an absolute
# rounding of about 6e-8 that a float32 logaddexp does not; the random-rounding ensemble then judges such elements
# `numerically unstable` at 3-4x the problem's own movement (4 of 6 dev-profile seeds on the CPU). `forward` declares
# one float32 ulp of 1 of absolute error on the loss, beside the rtol and dataflow scale tdiff derives for this kernel;
# and on the gradient, dX = (1 - beta) * Q * (X - log_M), which carries the same rounding (a CPU dev-profile soak seed:
# 2.0206e-05 against 2.0177e-05, torch's float32 logaddexp 2.0176e-05)
# (the gradient keeps its dtype's derived tolerance, one float32 ulp of 1 as its absolute part)
LOG_M_ULP = {"returned[0]": tdiff.Tolerance(rtol=1e-4, atol=2.0 ** -23, scale=1e-4, name="log_M's ulp of 1"),
             "returned[1]": {"atol": 2.0 ** -23}}
tdiff.check(launch=launch, reference=reference, name="forward", inputs=inputs(), tolerances=LOG_M_ULP)(lib._jsd_kernel)


ZERO_BLOCK_FINDING = ("liger 22: at beta 0 (1) each 4096-wide block shifts by its own max of the target (input) "
                      "log-probabilities; a block that is -inf throughout gives -inf - -inf = NaN loss and dX")


@st.composite
def zero_probability_block(draw):
    beta = draw(st.sampled_from([0.0, 1.0]))
    V = 8200  # three blocks of 4096; the last holds 8 columns, all of probability 0 on the shifting side
    live = draw(tst.tensors(shape=(1, V), dtype="float32", values=tst.values(-8, 0, specials=False)))
    dead = torch.cat([torch.log_softmax(torch.linspace(-3.0, 3.0, 8192, dtype=torch.float64)[None], -1).float(),
                      torch.full((1, V - 8192), float("-inf"))], -1)
    x, y = (live, dead) if beta == 0.0 else (dead, live)
    return {"_input": x, "target": y, "shift_labels": None, "beta": beta}


tdiff.check(launch=launch, reference=reference, name="zero_probability_block", inputs=zero_probability_block(),
            max_examples=3, marks=[pytest.mark.xfail(strict=True, reason=ZERO_BLOCK_FINDING)])(lib._jsd_kernel)

