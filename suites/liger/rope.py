"""liger_kernel.ops.rope: rotary position embedding (HF Llama layout, full and partial), forward and backward.

The inputs are drawn in their physical layout (bsz, seq_len, n_heads, head_dim), as a model's q/k projections
produce them; `launch` hands the wrapper `q.transpose(1, 2)` as HF attention does. Where that transposed view
is contiguous after transposing back, rope_forward rotates q and k in place.
"""

import pytest

pytest.importorskip("liger_kernel")

import triton  # noqa: E402
from hypothesis import assume  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from liger_kernel.ops import rope as lib  # noqa: E402

import tdiff  # noqa: E402
from tdiff import strategies as tst  # noqa: E402


def _torch_contiguous(shape, strides):
    expected = 1
    for n, st_ in zip(reversed(shape), reversed(strides)):
        if n != 1:
            if st_ != expected:
                return False
            expected *= n
    return True


def misaddressed(t):
    """FINDINGS.md "RoPE misaddresses rows when seq_len == 1": the kernel addresses row pid = b * seq_len + s at
    pid * stride(1) of the (bsz, seq_len, ...) tensor it is given, which is right only if stride(0) ==
    seq_len * stride(1). `.contiguous()` does not copy a tensor PyTorch calls contiguous, and PyTorch ignores the
    stride of a size-1 dimension: with seq_len == 1 and bsz > 1 that stride can be anything."""
    return (t.shape[0] > 1 and _torch_contiguous(t.shape, t.strides)
            and t.strides[0] != t.shape[1] * t.strides[1])


@st.composite
def inputs(draw, grad=False):
    bs, sl = draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 3, 5, 8]))
    n_qh = draw(st.sampled_from([1, 2, 3, 4, 5, 8]))
    n_kh = draw(st.sampled_from([d for d in range(1, n_qh + 1) if n_qh % d == 0]))
    hd = draw(st.sampled_from([2, 4, 6, 8, 16, 18, 32, 64]))
    # cos/sin width: HF's duplicated cat(freqs, freqs) of width rotary_dim (== head_dim, or less: partial
    # RoPE), with rotary_dim=None; or GPT-OSS's undoubled width rotary_dim / 2 with rotary_dim passed
    rotary_dim = draw(st.sampled_from([None, None, hd] + ([hd // 2] if hd % 4 == 0 else [])))
    if rotary_dim is None:
        width = draw(st.sampled_from(sorted({hd, max(2, hd // 2), 2})))
    else:
        width = rotary_dim // 2 + draw(st.sampled_from([0, 1]))
    cos_bs = draw(st.sampled_from([None, 1, bs]))  # None: 2-D (seq_len, width)
    dt = draw(st.sampled_from(tst.FLOATS))
    cos_dt = draw(st.sampled_from([dt, "float32"]))
    names = ("dq", "dk") if grad else ("q", "k")
    out = {
        names[0]: draw(tst.tensors(shape=(bs, sl, n_qh, hd), dtype=dt, max_numel=10**6)),
        names[1]: draw(tst.tensors(shape=(bs, sl, n_kh, hd), dtype=dt, max_numel=10**6)),
        "rotary_dim": rotary_dim,
    }
    cshape = (sl, width) if cos_bs is None else (cos_bs, sl, width)
    # cosines and sines: in [-1, 1]. Beyond it (a cos of 2) a half q * cos overflows before the sum brings it back
    # into range, in the kernel as in HF's eager rotation (each product rounded to the half dtype), where the
    # float64 reference does not: a domain no model hands RoPE (seen on the H100: dk -inf against -52000)
    unit = tst.values(-1.0, 1.0, inf=False)
    out["cos"] = draw(tst.tensors(shape=cshape, dtype=cos_dt, max_numel=10**6, readonly=True, values=unit))
    out["sin"] = draw(tst.tensors(shape=cshape, dtype=cos_dt, max_numel=10**6, readonly=True, values=unit))
    # narrowed away from the tracked finding (see misaddressed); the check "seq_len_1_contiguous" covers it
    assume(not any(misaddressed(out[n]) for n in (*names, "cos", "sin")))
    return out


def _launch(kernel, q, k, cos, sin, rotary_dim, backward, hf_view=True):
    # rope_forward / rope_backward (LigerRopeFunction is not @ensure_contiguous); `q` and `k` arrive as
    # (bsz, n_heads, seq_len, head_dim) views, the transpose of the tensors drawn
    if hf_view:
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # what HF attention passes
    if cos.ndim == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    batch_size, seq_len, n_q_head, head_dim = q.shape
    n_kv_head = k.shape[2]
    rotary_dim = lib._resolve_rotary_dim(cos, head_dim, rotary_dim)
    pad_hd = triton.next_power_of_2(head_dim)
    pad_rd = triton.next_power_of_2(rotary_dim)
    pad_n_q_head = triton.next_power_of_2(n_q_head)
    pad_n_kv_head = triton.next_power_of_2(n_kv_head)
    BLOCK_SIZE = max(pad_n_q_head, pad_n_kv_head)
    q, k, cos, sin = q.contiguous(), k.contiguous(), cos.contiguous(), sin.contiguous()
    kernel[(batch_size * seq_len,)](q, q.stride(1), k, k.stride(1), cos, cos.stride(-2), sin, sin.stride(-2), seq_len,
                                    batch_size, cos.shape[0], n_q_head, n_kv_head, head_dim, pad_n_q_head,
                                    pad_n_kv_head, pad_hd, pad_rd, rotary_dim, BLOCK_SIZE=BLOCK_SIZE,
                                    BACKWARD_PASS=backward)
    return q.transpose(1, 2), k.transpose(1, 2)


def _rotate(x, cos, sin, rotary_dim, backward):
    """x: (bsz, seq_len, n_heads, head_dim). HF's apply_rotary_pos_emb on the first rotary_dim entries of each
    head (rotate_half), cos/sin given by their first half (liger reads only cos[..., :rotary_dim // 2]: HF's
    cos is cat(freqs, freqs); GPT-OSS passes the half alone)."""
    rd = min(cos.shape[-1], x.shape[-1]) if rotary_dim is None else rotary_dim
    h = rd // 2
    c = cos.double()[..., :h]
    s = sin.double()[..., :h]
    if c.ndim == 2:
        c, s = c[None], s[None]
    c, s = c[:, :, None, :], s[:, :, None, :]  # broadcast over heads (and over the batch when cos_bs == 1)
    if backward:
        s = -s
    xd = x.double()
    x1, x2 = xd[..., :h], xd[..., h:2 * h]
    out = xd.clone()
    out[..., :h] = x1 * c - x2 * s
    out[..., h:2 * h] = x2 * c + x1 * s
    out = out.to(x.dtype)
    if x.is_contiguous():  # rotated in place (tdiff compares the input's storage)
        x.copy_(out)
        return None
    return out.transpose(1, 2)


def launch_fwd(kernel, q, k, cos, sin, rotary_dim):
    return _launch(kernel, q, k, cos, sin, rotary_dim, False)


def reference_fwd(q, k, cos, sin, rotary_dim):
    return _rotate(q, cos, sin, rotary_dim, False), _rotate(k, cos, sin, rotary_dim, False)


tdiff.check(launch=launch_fwd, reference=reference_fwd, name="forward", inputs=inputs())(lib._triton_rope)


def launch_bwd(kernel, dq, dk, cos, sin, rotary_dim):
    return _launch(kernel, dq, dk, cos, sin, rotary_dim, True)


def reference_bwd(dq, dk, cos, sin, rotary_dim):
    return _rotate(dq, cos, sin, rotary_dim, True), _rotate(dk, cos, sin, rotary_dim, True)


tdiff.check(launch=launch_bwd, reference=reference_bwd, name="backward", inputs=inputs(grad=True))(lib._triton_rope)


# FINDINGS.md "RoPE misaddresses rows when seq_len == 1": q and k contiguous in the documented
# (bsz, n_head, seq_len, head_dim) shape, at a decoding step (seq_len == 1) with bsz > 1 and several heads.
@st.composite
def decode_inputs(draw):
    bs, n_qh, hd = draw(st.integers(2, 3)), draw(st.sampled_from([2, 4])), draw(st.sampled_from([4, 8]))
    n_kh = draw(st.sampled_from([1, n_qh]))
    dt = draw(st.sampled_from(tst.FLOATS))
    q = draw(tst.tensors(shape=(bs, n_qh, 1, hd), dtype=dt, layouts=["contiguous"]))
    k = draw(tst.tensors(shape=(bs, n_kh, 1, hd), dtype=dt, layouts=["contiguous"]))
    cos = draw(tst.tensors(shape=(1, 1, hd), dtype=dt, layouts=["contiguous"]))
    sin = draw(tst.tensors(shape=(1, 1, hd), dtype=dt, layouts=["contiguous"]))
    return {"q": q, "k": k, "cos": cos, "sin": sin}


def launch_decode(kernel, q, k, cos, sin):
    # q, k handed to the wrapper as they are: (bsz, n_head, 1, head_dim), contiguous
    return _launch(kernel, q, k, cos, sin, None, False, hf_view=False)


def reference_decode(q, k, cos, sin):
    # the rotation of the (bsz, 1, n_head, head_dim) view, which rope_forward rotates in place
    return tuple(_rotate(x.transpose(1, 2), cos, sin, None, False) for x in (q, k))


tdiff.check(launch=launch_decode, reference=reference_decode, name="seq_len_1_contiguous", inputs=decode_inputs(),
            marks=[pytest.mark.xfail(strict=True, reason="RoPE misaddresses rows when seq_len == 1")])(lib._triton_rope)


# The inputs as a user declares them, aiming at no bug: batch 1-3, seq 1-9, heads from {1, 2, 3, 4, 8} (k: one head
# or as many as q), head dims, dtypes, q and k head-major or in HF's layout (a flag), cos and sin for a batch of
# one or for every batch. FINDINGS liger 1 needs four of those at once (seq 1, batch > 1, heads > 1, head-major);
# the boundary plan reaches it by construction (README: "Boundaries by construction": a size at 1 with ordinary
# sizes and each value of the flag; triples of the choices that decide addressing).
@st.composite
def generic_inputs(draw):
    bs, sl = draw(st.integers(1, 3)), draw(st.integers(1, 9))
    n_qh = draw(st.sampled_from([1, 2, 3, 4, 8]))
    n_kh = draw(st.sampled_from([1, n_qh]))
    hd = draw(st.sampled_from([2, 4, 8, 16, 32, 64]))
    dt = draw(st.sampled_from(tst.FLOATS))
    head_major = draw(st.booleans())  # (bsz, n_head, seq_len, head_dim) packed, as a decode step's cache keeps them
    cos_bs = draw(st.sampled_from([1, bs]))

    def shape(heads):
        return (bs, heads, sl, hd) if head_major else (bs, sl, heads, hd)

    unit = tst.values(-1.0, 1.0, inf=False)
    return {"q": draw(tst.tensors(shape=shape(n_qh), dtype=dt, layouts=["contiguous"])),
            "k": draw(tst.tensors(shape=shape(n_kh), dtype=dt, layouts=["contiguous"])),
            "cos": draw(tst.tensors(shape=(cos_bs, sl, hd), dtype=dt, layouts=["contiguous"], readonly=True,
                                    values=unit)),
            "sin": draw(tst.tensors(shape=(cos_bs, sl, hd), dtype=dt, layouts=["contiguous"], readonly=True,
                                    values=unit)),
            "head_major": head_major}


def launch_generic(kernel, q, k, cos, sin, head_major):
    # head-major: q and k handed to the wrapper as they are (as the decode check does); else as HF attention passes
    # them, the transposed view of (bsz, seq_len, n_head, head_dim) tensors
    return _launch(kernel, q, k, cos, sin, None, False, hf_view=not head_major)


def reference_generic(q, k, cos, sin, head_major):
    if head_major:
        return reference_decode(q, k, cos, sin)
    return reference_fwd(q, k, cos, sin, None)


tdiff.check(launch=launch_generic, reference=reference_generic, name="generic", inputs=generic_inputs(),
            marks=[pytest.mark.xfail(strict=True, reason="RoPE misaddresses rows when seq_len == 1")])(
    lib._triton_rope)
