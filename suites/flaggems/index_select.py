"""FlagGems index_select (`flag_gems.ops.index_select.index_select(x, dim, index)`):
`index_select_kernel`, LibEntry(heuristics(jit)); the input is permuted so that `dim` is last
(`dim_compress`, contiguous) and the kernel gathers columns of an (M, N) matrix."""

import pytest
import torch
import triton
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst

from ._gems import module, op

IS = op("index_select")
dim_compress = module("flag_gems.utils.shape_utils").dim_compress

DTYPES = ["float32", "float16", "bfloat16", "int32", "int64"]


def launch(kernel, x, dim, index):
    """`index_select(x, dim, index)` as FlagGems launches it (note: `index` is passed as it is,
    without `.contiguous()`)."""
    if index.ndim == 0:
        index = index.unsqueeze(0)
    dim = dim % x.ndim
    inp_shape = list(x.shape)
    index_len = index.numel()
    inp = dim_compress(x, dim)
    N = inp_shape[dim]
    M = inp.numel() // N
    out_shape = list(inp.shape)
    out_shape[inp.ndim - 1] = index_len
    out = torch.empty(out_shape, dtype=inp.dtype, device=inp.device)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(index_len, meta["BLOCK_N"]))
    kernel[grid](inp, out, M, N, index, index_len)
    if dim != out.ndim - 1:
        order = [i for i in range(out.ndim - 1)]
        order.insert(dim, out.ndim - 1)
        return out.permute(order).contiguous()
    return out


def reference(x, dim, index):
    return torch.index_select(x, dim, index)


# indices in range: torch raises on others (FlagGems' kernel skips them silently), so an index
# outside [0, N) is not a valid input of the op
def case(layouts):
    @st.composite
    def draw(draw):
        dim = draw(st.sampled_from([0, 1]))
        x_shape = (draw(tst.sides(1, 24)), draw(tst.sides(1, 40)))
        n = x_shape[dim]
        x = draw(tst.tensors(shape=x_shape, dtype=DTYPES))
        index = draw(tst.tensors(shape=(tst.sides(1, 50),), dtype=["int64", "int32"], readonly=True,
                                 layouts=layouts, values=tst.values(0, n - 1)))
        return {"x": x, "dim": dim, "index": index}
    return draw()


# FlagGems passes `index` to the kernel without `.contiguous()` and the kernel reads it with unit
# stride: a strided index (e.g. idx[::2]) selects the wrong columns (FINDINGS.md, "index_select
# reads a non-contiguous index as if it were contiguous"). The main check takes contiguous indices,
# the second exactly strided ones.
tdiff.check(
    name="contiguous_index",
    launch=launch,
    reference=reference,
    inputs=case(["contiguous", "offset"]),
)(IS.index_select_kernel)

tdiff.check(
    name="strided_index",
    launch=launch,
    reference=reference,
    inputs=case(["sliced"]),
    max_examples=10,
    marks=[pytest.mark.xfail(strict=True, reason="index_select reads a non-contiguous index as if it were contiguous")],
)(IS.index_select_kernel)
