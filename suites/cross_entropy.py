"""Cross-entropy over a large vocabulary: an online logsumexp over vocabulary chunks, ignore_index rows."""

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst

IGNORE = -100
CHUNK = 256


@st.composite
def inputs(draw):
    rows = draw(tst.sides(1, 6))
    vocab = draw(tst.sizes(block=CHUNK, max_blocks=8))
    logits = draw(tst.tensors(shape=(rows, vocab), dtype=tst.FLOATS, layouts=["contiguous", "split", "padded"],
                              max_numel=rows * vocab, values=tst.values(-30, 30, nan=False, inf=False)))
    targets = draw(st.lists(st.one_of(st.integers(0, vocab - 1), st.just(IGNORE)), min_size=rows, max_size=rows))
    return {"logits": logits, "targets": torch.tensor(targets, dtype=torch.int64)}


def launch(kernel, logits, targets):
    rows, vocab = logits.shape
    loss = torch.empty(rows, dtype=torch.float32, device=logits.device)
    kernel[(rows,)](logits, targets, loss, logits.stride(0), logits.stride(1), vocab, IGNORE, CHUNK=CHUNK)
    return loss


def reference(logits, targets):
    return torch.nn.functional.cross_entropy(logits.float(), targets, ignore_index=IGNORE, reduction="none")


@tdiff.check(launch=launch, reference=reference, inputs=inputs())
@triton.jit
def cross_entropy_fwd(logits_ptr, targets_ptr, loss_ptr, stride_row, stride_col, vocab, ignore_index,
                      CHUNK: tl.constexpr):
    row = tl.program_id(0)
    target = tl.load(targets_ptr + row)
    base = logits_ptr + row * stride_row
    offs = tl.arange(0, CHUNK)
    m = tl.full((CHUNK,), -float("inf"), tl.float32)
    s = tl.zeros((CHUNK,), tl.float32)
    for start in range(0, vocab, CHUNK):  # a loop over a runtime bound: the vocabulary
        x = tl.load(base + (start + offs) * stride_col, mask=start + offs < vocab, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        s = tl.where(m_new == -float("inf"), 0.0, s)
        m = m_new
    mx = tl.max(m, axis=0)
    lse = mx + tl.log(tl.sum(s * tl.exp(m - mx), axis=0))
    valid = target != ignore_index
    picked = tl.load(base + tl.where(valid, target, 0) * stride_col).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - picked, 0.0))
