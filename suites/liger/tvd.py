"""liger_kernel.ops.tvd: total variation distance, loss and gradient in one kernel."""

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402
import triton  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from liger_kernel.ops import tvd as lib  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402

IGNORE = -100


NAN_FINDING = "TVD gradient is -0.5 * scale where p or q is NaN"
ALL_IGNORED_FINDING = "TVD raises ZeroDivisionError when every label is ignore_index"


@st.composite
def inputs(draw, nan=False, all_ignored=False, dtypes=tst.FLOATS, bound=None,
           reductions=("batchmean", "none", "sum", "mean"), some_ignored=False):
    """`nan`: exactly the region of NAN_FINDING (float32 p and q, NaN among them); otherwise p and q hold no NaN.
    `all_ignored`: exactly the region of ALL_IGNORED_FINDING (labels given, all ignore_index, reduction "batchmean"
    or "mean"); otherwise that case is left out. See FINDINGS.md.
    `reductions`: the reductions drawn from; `some_ignored`: labels given, at least one of them ignore_index."""
    BT = draw(st.integers(1, 8))
    V = draw(st.one_of(tst.sides(1, 300), st.sampled_from([16383, 16384, 16385])))  # BLOCK_SIZE <= 16384
    dt = "float32" if nan else draw(st.sampled_from(dtypes))
    vals = tst.values(nan=nan) if bound is None else tst.values(-bound, bound, nan=nan)
    reduction = draw(st.sampled_from(["batchmean", "mean"] if all_ignored else list(reductions)))
    if all_ignored:
        labels = [IGNORE] * BT
    else:
        label_lists = st.lists(st.one_of(st.integers(0, V - 1), st.just(IGNORE)), min_size=BT, max_size=BT)
        labels = draw(label_lists if some_ignored else st.one_of(st.none(), label_lists))
        if some_ignored and IGNORE not in labels:
            labels[draw(st.integers(0, BT - 1))] = IGNORE
        if labels is not None and reduction in ("batchmean", "mean") and all(t == IGNORE for t in labels):
            labels[0] = 0  # narrowed away from ALL_IGNORED_FINDING
    return {
        "p": draw(tst.tensors(shape=(BT, V), dtype=dt, max_numel=10**6, values=vals)),
        "q": draw(tst.tensors(shape=(BT, V), dtype=dt, max_numel=10**6, values=vals)),
        "shift_labels": None if labels is None else torch.tensor(labels, dtype=torch.int64),
        "reduction": reduction,
    }


def launch(kernel, p, q, shift_labels, reduction):
    # LigerTVDLossFunction.forward is @ensure_contiguous; tv_distance_forward_triton. Returned: what the kernel
    # writes (per-element losses for "none", per-row scaled sums otherwise; the gradients)
    p, q = p.contiguous(), q.contiguous()
    has_label = shift_labels is not None
    if has_label:
        shift_labels = shift_labels.contiguous()
    BT, V = p.shape
    BLOCK_SIZE = min(lib.MAX_FUSED_SIZE, triton.next_power_of_2(V))
    mode = lib._str_to_reduction_mode[reduction]
    out_size = (BT, V) if mode == lib._REDUCTION_MODE_NONE.value else (BT,)
    output_tensor = torch.zeros(out_size, device=p.device, dtype=torch.float32)
    grads = torch.empty_like(p)
    n_non_ignore = (shift_labels != IGNORE).sum().item() if has_label else BT
    if mode == lib._REDUCTION_MODE_BATCHMEAN.value:
        scale = 1.0 / n_non_ignore
    elif mode == lib._REDUCTION_MODE_MEAN.value:
        scale = 1.0 / (n_non_ignore * V)
    else:
        scale = 1.0
    kernel[(BT,)](p, p.stride(0), q, q.stride(0), output_tensor, output_tensor.stride(0), grads, grads.stride(0),
                  shift_labels if has_label else torch.empty(1, device=p.device), IGNORE, V, scale,
                  BLOCK_SIZE=BLOCK_SIZE, HAS_LABEL=has_label, num_warps=lib.get_num_warps(BLOCK_SIZE),
                  reduction=mode)
    return output_tensor, grads


def reference(p, q, shift_labels, reduction):
    BT, V = p.shape
    keep = torch.ones(BT, dtype=torch.bool) if shift_labels is None else shift_labels != IGNORE
    n = int(keep.sum())
    scale = {"batchmean": 1 / max(n, 1), "mean": 1 / max(n * V, 1)}.get(reduction, 1.0)
    d = p.double() - q.double()
    loss = torch.where(keep[:, None], 0.5 * d.abs(), 0.0)
    grad = torch.where(keep[:, None], 0.5 * scale * torch.sign(d), 0.0)  # torch.sign(nan) == 0, as autograd
    if reduction != "none":
        loss = loss.sum(-1) * scale
    return loss.float(), grad.to(p.dtype)


tdiff.check(launch=launch, reference=reference, name="forward", inputs=inputs(dtypes=["float32"]))(
    lib._tv_distance_kernel)

# reduction "none" with ignored rows: the kernel zeroes their per-element losses (the draws of `forward` above, CI
# profile, derandomized, never combine the two)
tdiff.check(launch=launch, reference=reference, name="reduction_none_ignored",
            inputs=inputs(dtypes=["float32"], reductions=("none",), some_ignored=True), max_examples=10)(
    lib._tv_distance_kernel)

# liger computes p - q and the row sums in the inputs' dtype (the loss carries their rounding, though it
# is stored in float32), which tdiff reports unless the check accepts it: for bf16 inputs the losses are
# judged with bf16's reduction tolerance. float16 sums overflow for ordinary rows (FINDINGS.md, liger 11):
# that region is the xfail check below.
HALF = tdiff.Tolerance.preset("reduce", "bfloat16")
HALF_SUM_FINDING = ("TVD sums a row's float16 losses with tl.sum in float16: past 65504 the interpreter's sum is inf, "
                    "while the H100's compiled kernel keeps it in float32 (FINDINGS.md, liger 11)")


@st.composite
def long_half_rows(draw):
    """Exactly the region of HALF_SUM_FINDING: float16 rows of 16383 or 16384 losses whose sum passes 65504, with
    every value far from float16's range edge (|p - q| <= 16): p = 0, q in [8, 16], reduction "batchmean"."""
    BT = draw(st.integers(1, 2))
    V = draw(st.sampled_from([16383, 16384]))
    return {
        "p": draw(tst.tensors(shape=(BT, V), dtype="float16", values=tst.values(0, 0, specials=False))),
        "q": draw(tst.tensors(shape=(BT, V), dtype="float16", values=tst.values(8, 16, specials=False))),
        "shift_labels": None,
        "reduction": "batchmean",
    }
tdiff.check(launch=launch, reference=reference, name="forward_bf16", inputs=inputs(dtypes=["bfloat16"]),
            tolerances={"returned[0]": HALF, "returned[1]": HALF})(lib._tv_distance_kernel)
tdiff.check(launch=launch, reference=reference, name="forward_fp16_sums", inputs=long_half_rows(), max_examples=3,
            tolerances={"returned[0]": HALF, "returned[1]": HALF},
            marks=[pytest.mark.xfail(strict=True, reason=HALF_SUM_FINDING)])(lib._tv_distance_kernel)

# FINDINGS.md NAN_FINDING
tdiff.check(launch=launch, reference=reference, name="nan_inputs", inputs=inputs(nan=True),
            marks=[pytest.mark.xfail(strict=True, reason=NAN_FINDING)])(lib._tv_distance_kernel)

# FINDINGS.md ALL_IGNORED_FINDING
tdiff.check(launch=launch, reference=reference, name="all_labels_ignored", inputs=inputs(all_ignored=True),
            marks=[pytest.mark.xfail(strict=True, reason=ALL_IGNORED_FINDING)])(lib._tv_distance_kernel)
