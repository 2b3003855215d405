"""FlagGems bmm (`flag_gems.ops.bmm.bmm(A, B)`): `bmm_kernel`, LibEntry(LibTuner(heuristics(jit))),
tiles from FlagGems' NVIDIA tune configs (config 0: 32x32x32, GROUP_M 1; config 2: 64x64x32, GROUP_M 2,
which reorders programs in groups), DIVISIBLE_M/N/K heuristics dropping the masks. FlagGems passes
the operands' strides without making them contiguous, so every layout is drawn."""

import pytest
import torch
import triton
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst

from ._gems import op

B = op("bmm")
FLOATS = ["float32", "float16", "bfloat16"]


def launch(kernel, a, b):
    batch, M, K = a.shape
    _, _, N = b.shape
    out = torch.empty((batch, M, N), dtype=a.dtype, device=a.device)
    grid_fn = lambda meta: (triton.cdiv(meta["M"], meta["TILE_M"]), triton.cdiv(meta["N"], meta["TILE_N"]), batch)
    kernel[grid_fn](
        a, b, out, M, N, K,
        a.stride(0), a.stride(1), a.stride(2),
        b.stride(0), b.stride(1), b.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
    )
    return out


def reference(a, b):
    return torch.bmm(a.double(), b.double()).to(a.dtype)


def operands(dtypes):
    return {
        "dims": {"Bt": tst.sides(1, 3), "M": tst.sizes(block=32, max_blocks=3),
                 "N": tst.sizes(block=32, max_blocks=3), "K": tst.sizes(block=32, max_blocks=2)},
        "a": tst.tensors(shape=("Bt", "M", "K"), dtype=dtypes, readonly=True, max_numel=3 * 97 * 65),
        "b": tst.tensors(shape=("Bt", "K", "N"), like="a", readonly=True, max_numel=3 * 65 * 97),
    }


# float32 and float16. bfloat16 is checked on its own below: Triton 3.6's interpreter multiplies the
# raw bits of bf16 operands in tl.dot (FINDINGS.md, "Triton interpreter: tl.dot on bfloat16 multiplies
# the raw 16-bit patterns"). The K tail's lanes are zero-filled here (masked_loads="zero", named in the
# summary): the kernel loads them without other= and feeds them to tl.dot (FINDINGS.md flaggems 9,
# pinned by the `undefined_k_tail` check below).
tdiff.check(
    launch=launch,
    reference=reference,
    configs=[0, 2],
    masked_loads="zero",
    **operands(["float32", "float16"]),
)(B.bmm_kernel)

# FINDINGS.md flaggems 9: `a = tl.load(a_ptrs, mask_a)` and `b = tl.load(b_ptrs, mask_b)` have no other=,
# so the lanes past K are undefined, and tl.dot sums their products into every output: K not a multiple
# of TILE_K (32) gives a result that depends on them (NVIDIA happens to zero-fill them)
tdiff.check(
    name="undefined_k_tail",
    launch=launch,
    reference=reference,
    configs=[0],
    max_examples=5,
    marks=[pytest.mark.xfail(strict=True, reason="FlagGems bmm feeds tl.dot the undefined lanes past K "
                                                 "(loads without other=; FINDINGS.md flaggems 9)")],
    dims={"Bt": tst.sides(1, 2), "M": tst.sizes(block=32, max_blocks=2), "N": tst.sizes(block=32, max_blocks=2),
          "K": st.sampled_from([1, 7, 33])},
    a=tst.tensors(shape=("Bt", "M", "K"), dtype=["float32", "float16"], readonly=True),
    b=tst.tensors(shape=("Bt", "K", "N"), like="a", readonly=True),
)(B.bmm_kernel)

tdiff.check(
    name="bf16",
    launch=launch,
    reference=reference,
    configs=[0],
    max_examples=5,
    masked_loads="zero",  # the K tail: FINDINGS.md flaggems 9, below
    marks=[pytest.mark.xfail(strict=True,
                             reason="Triton interpreter: tl.dot on bfloat16 multiplies the raw 16-bit patterns")],
    **operands(["bfloat16"]),
)(B.bmm_kernel)

# K a multiple of TILE_K (32 in both configs): the DIVISIBLE_K path, with M and N multiples of the
# tile (32 for config 0, 64 for both configs) or not, so that every DIVISIBLE_M / DIVISIBLE_N
# combination of the loads and the store is taken
tdiff.check(
    name="divisible_k",
    launch=launch,
    reference=reference,
    configs=[0, 2],
    max_examples=10,
    dims={"Bt": tst.sides(1, 2), "M": st.sampled_from([64, 32, 17]), "N": st.sampled_from([64, 32, 17]),
          "K": st.sampled_from([32, 64])},
    a=tst.tensors(shape=("Bt", "M", "K"), dtype=["float32", "float16"], readonly=True),
    b=tst.tensors(shape=("Bt", "K", "N"), like="a", readonly=True),
)(B.bmm_kernel)
