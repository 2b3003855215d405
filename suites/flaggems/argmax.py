"""FlagGems argmax (`flag_gems.ops.argmax.argmax`): over all elements (`dim=None`: `argmax_kernel_1`
takes the max of each block of next_power_of_2(ceil(sqrt(M))) elements, `argmax_kernel_2` the max
of the block maxima), and over one axis (`argmax_kernel_inner` for the last non-trivial axis,
`argmax_kernel_non_inner` otherwise; LibEntry(heuristics(jit)) with the NVIDIA heuristics).

NaN: torch.argmax takes NaN as the maximum; FlagGems' kernels compare with `>` / `tl.max`, which do
not. Values are drawn without NaN here (a documented semantic difference, not what these checks
look for); ties resolve to the first index in torch, and the kernels ask for the left-most index
(`return_indices_tie_break_left=True`, `tl.argmax`) except `argmax_kernel_1` (`tl.max(...,
return_indices=True)` without tie_break_left: "any index")."""

import math

import pytest
import torch
import triton
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst

from ._gems import op

A = op("argmax")
FLOATS = ["float32", "float16", "bfloat16"]
NO_NAN = tst.values(nan=False)


def launch_full(kernel, x):
    """`argmax(x)` (dim=None, keepdim=False) as FlagGems launches it: note that FlagGems does not make
    `x` contiguous on this path."""
    M = x.numel()
    dtype = x.dtype
    block_size = triton.next_power_of_2(math.ceil(math.sqrt(M)))
    mid_size = triton.cdiv(M, block_size)
    block_mid = triton.next_power_of_2(mid_size)
    mid_value = torch.empty((mid_size,), dtype=dtype, device=x.device)
    mid_index = torch.empty((mid_size,), dtype=torch.int64, device=x.device)
    out = torch.empty([], dtype=torch.int64, device=x.device)
    kernel[(mid_size, 1, 1)](x, mid_value, mid_index, M, block_size)
    A.argmax_kernel_2[(1, 1, 1)](mid_value, mid_index, out, mid_size, block_mid)
    return out


def launch_dim(kernel, x, dim):
    """`argmax(x, dim)` (keepdim=False) as FlagGems launches it."""
    shape = x.shape
    dim = dim % x.ndim
    N = shape[dim]
    M = math.prod(shape[:dim])
    K = x.numel() // M // N
    x = x.contiguous()
    shape_list = list(shape)
    shape_list[dim] = 1
    out_index = torch.empty(shape_list, dtype=torch.int64, device=x.device)
    out_index = torch.squeeze(out_index, dim)
    if K > 1:
        grid = lambda meta: (M, triton.cdiv(K, meta["TILE_K"]))
        kernel[grid](x, out_index, M, N, K)
    else:
        kernel[lambda meta: (M, 1, 1)](x, out_index, M, N)
    return out_index


# Over all elements, FlagGems reads `x` in storage order without making it contiguous: wrong for
# transposed, sliced and padded inputs (FINDINGS.md, "argmax(x) without dim ignores the input's
# strides"). The main check takes the layouts it handles, the second exactly the others.
tdiff.check(
    name="full",
    launch=launch_full,
    reference=lambda x: torch.argmax(x.double()),
    x=tst.tensors(ndim=2, max_side=70, dtype=FLOATS, values=NO_NAN, layouts=["contiguous", "offset"]),
)(A.argmax_kernel_1)

tdiff.check(
    name="full_strided",
    launch=launch_full,
    reference=lambda x: torch.argmax(x.double()),
    x=tst.tensors(shape=(tst.sides(2, 30), tst.sides(2, 30)), dtype=FLOATS, values=NO_NAN,
                  layouts=["transposed", "sliced", "padded"]),
    max_examples=10,
    marks=[pytest.mark.xfail(strict=True, reason="argmax(x) without dim ignores the input's strides")],
)(A.argmax_kernel_1)

tdiff.check(
    name="dim_inner",
    launch=launch_dim,
    reference=lambda x, dim: torch.argmax(x.double(), dim),
    x=tst.tensors(ndim=2, max_side=100, dtype=FLOATS, values=NO_NAN),
    dim=[-1],
)(A.argmax_kernel_inner)

# Over a leading axis (the last axis has 2 or more elements: K > 1, the non-inner kernel). The
# reduced axis N takes 1, powers of two and sizes above 128: for 2 < N <= 128 not a power of two
# FlagGems' heuristic sets TILE_N = N and `tl.arange(0, TILE_N)` does not compile (FINDINGS.md,
# "argmax over a leading axis of 3..127 elements (not a power of two) fails to compile"); the
# second check takes exactly those sizes.
tdiff.check(
    name="dim_non_inner",
    launch=launch_dim,
    reference=lambda x, dim: torch.argmax(x.double(), dim),
    x=tst.tensors(shape=(tst.sides(1, 9), st.sampled_from([1, 2, 4, 8, 16, 32, 129, 131]), tst.sides(2, 24)),
                  dtype=FLOATS, values=NO_NAN, max_numel=9 * 131 * 24),
    dim=[1],
)(A.argmax_kernel_non_inner)

tdiff.check(
    name="dim_non_inner_odd_n",
    launch=launch_dim,
    reference=lambda x, dim: torch.argmax(x.double(), dim),
    x=tst.tensors(shape=(tst.sides(1, 4), st.sampled_from([3, 5, 7, 12, 100, 127]), tst.sides(2, 8)),
                  dtype=FLOATS, values=NO_NAN),
    dim=[1],
    max_examples=5,
    marks=[pytest.mark.xfail(strict=True, reason="argmax over a leading axis of 3..127 elements (not a power of two) "
                                                 "fails to compile")],
)(A.argmax_kernel_non_inner)

# rows longer than 32768: TILE_N = 4096 and the looped path (ONE_TILE_PER_CTA False), with rows that
# are and are not a multiple of 4096 (the `if remainder` tail)
tdiff.check(
    name="dim_inner_loop",
    launch=launch_dim,
    reference=lambda x, dim: torch.argmax(x.double(), dim),
    x=tst.tensors(shape=(tst.sides(1, 2), tst.sizes(block=4096, min_value=32769, max_value=4096 * 9 + 1)),
                  dtype=FLOATS, values=NO_NAN, max_numel=2 * (4096 * 9 + 1)),
    dim=[-1],
    max_examples=8,
)(A.argmax_kernel_inner)

# the non-inner looped path: a reduced axis of more than 4096 elements (TILE_N = 4096 for K < 16,
# 2048 for K = 16, where TILE_K = 16 and TILE_N * TILE_K is capped at 32768)
tdiff.check(
    name="dim_non_inner_loop",
    launch=launch_dim,
    reference=lambda x, dim: torch.argmax(x.double(), dim),
    x=tst.tensors(shape=(tst.sides(1, 2), tst.sizes(block=4096, min_value=4097, max_value=2 * 4096 + 1),
                         tst.sides(2, 16)), dtype=FLOATS, values=NO_NAN, max_numel=2 * (2 * 4096 + 1) * 16),
    dim=[1],
    max_examples=8,
)(A.argmax_kernel_non_inner)

# integer inputs (FlagGems' argmax takes any dtype): `get_dtype_min` then returns the signed minimum
# or 0 (uint8) as the masked lanes' value. The reference compares the integers themselves (int64 is
# not exact in float64).
INTS = ["uint8", "int8", "int16", "int32", "int64"]

tdiff.check(
    name="full_int",
    launch=launch_full,
    reference=lambda x: torch.argmax(x),
    x=tst.tensors(ndim=2, max_side=70, dtype=INTS, layouts=["contiguous", "offset"]),
    max_examples=10,
)(A.argmax_kernel_1)

tdiff.check(
    name="dim_inner_int",
    launch=launch_dim,
    reference=lambda x, dim: torch.argmax(x, dim),
    x=tst.tensors(ndim=2, max_side=100, dtype=INTS),
    dim=[-1],
    max_examples=10,
)(A.argmax_kernel_inner)

tdiff.check(
    name="dim_non_inner_int",
    launch=launch_dim,
    reference=lambda x, dim: torch.argmax(x, dim),
    x=tst.tensors(shape=(tst.sides(1, 9), st.sampled_from([1, 2, 4, 8, 16, 32, 129, 131]), tst.sides(2, 24)),
                  dtype=INTS, max_numel=9 * 131 * 24),
    dim=[1],
    max_examples=10,
)(A.argmax_kernel_non_inner)
