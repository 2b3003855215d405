"""FlagGems softmax forward (`flag_gems.ops.softmax.softmax(x, dim)`): `softmax_kernel_inner` when dim
is the last non-trivial axis (K == 1), `softmax_kernel_non_inner` otherwise; both are
LibEntry(heuristics(jit)), with the NVIDIA heuristics (TILE_N, TILE_K from the SM count, ONE_TILE_PER_CTA)."""

import pytest
import torch
import triton

import tdiff
from tdiff import strategies as tst

from ._gems import op

S = op("softmax")
FLOATS = ["float32", "float16", "bfloat16"]


def launch(kernel, x, dim):
    """`softmax(x, dim)` with half_to_float=False, as flag_gems.ops.softmax.softmax launches it."""
    dim = dim % x.ndim
    M = 1
    N = x.shape[dim]
    for i in range(dim):
        M *= x.shape[i]
    x = x.contiguous()
    out = torch.empty_like(x, dtype=x.dtype)
    K = x.numel() // M // N
    if K > 1:
        grid = lambda meta: (M, triton.cdiv(K, meta["TILE_K"]), 1)
        kernel[grid](out, x, M, N, K)
    else:
        kernel[(M, 1, 1)](out, x, M, N)
    return out


def reference(x, dim):
    return torch.softmax(x.double(), dim=dim).to(x.dtype)


# rows of up to 80 columns: one tile per program (TILE_N = next_power_of_2(N))
tdiff.check(
    name="inner",
    launch=launch,
    reference=reference,
    x=tst.tensors(ndim=2, max_side=80, dtype=FLOATS),
    dim=[-1],
)(S.softmax_kernel_inner)

LOOP_ROWS = (tst.sides(1, 2), tst.sizes(block=4096, min_value=32769, max_value=4096 * 9 + 1))
NAN_FINDING = ("softmax over rows longer than 32768 (the looped path) passes over NaN: the row's other outputs "
               "stay finite")

# rows longer than 32768: TILE_N = 4096 and the online (looped) path; without NaN (NAN_FINDING, checked below)
tdiff.check(
    name="inner_loop",
    launch=launch,
    reference=reference,
    x=tst.tensors(shape=LOOP_ROWS, dtype=FLOATS, max_numel=2 * (4096 * 9 + 1), values=tst.values(nan=False)),
    dim=[-1],
    max_examples=8,
)(S.softmax_kernel_inner)


def _plant_nan(x):
    x = x.clone()
    x[..., 0] = float("nan")
    return x


# FINDINGS.md flaggems 7: a NaN at the start of every row (tl.maximum passes over NaN on the GPU, propagate_nan=NONE)
tdiff.check(
    name="inner_loop_nan",
    launch=lambda kernel, x, dim: launch(kernel, _plant_nan(x), dim),
    reference=lambda x, dim: reference(_plant_nan(x), dim),
    x=tst.tensors(shape=LOOP_ROWS, dtype=FLOATS, max_numel=2 * (4096 * 9 + 1)),
    dim=[-1],
    max_examples=3,
    marks=[pytest.mark.xfail(strict=True, reason=NAN_FINDING)],
)(S.softmax_kernel_inner)

# softmax over a leading axis (the last axis has 2 or more elements, so K > 1 and FlagGems launches
# the non-inner kernel): TILE_K from the SM count, one tile per program
tdiff.check(
    name="non_inner",
    launch=launch,
    reference=reference,
    x=tst.tensors(shape=(tst.sides(1, 9), tst.sides(1, 24), tst.sides(2, 24)), dtype=FLOATS),
    dim=[0, 1],
)(S.softmax_kernel_non_inner)

# the non-inner kernel's looped path (ONE_TILE_PER_CTA False), without NaN (NON_INNER_NAN_FINDING, checked
# below): with M * K <= 132 programs (the H100's SM count) the heuristics keep TILE_K = 1, so
# TILE_N = cdiv(8192, TILE_K) = 8192 and an axis of more than 8192 elements takes the loop: (1, 8193, 2)
# is the smallest such input (larger M * K doubles TILE_K and halves TILE_N, and needs some 540k
# elements before N exceeds it)
NON_INNER_LOOP = (tst.sides(1, 2), tst.sizes(block=8192, min_value=8193, max_value=2 * 8192 + 1), tst.sides(2, 3))

tdiff.check(
    name="non_inner_loop",
    launch=launch,
    reference=reference,
    x=tst.tensors(shape=NON_INNER_LOOP, dtype=FLOATS, max_numel=2 * (2 * 8192 + 1) * 3, values=tst.values(nan=False)),
    dim=[1],
    max_examples=8,
)(S.softmax_kernel_non_inner)

NON_INNER_NAN_FINDING = ("softmax over a leading axis longer than TILE_N (the looped path) passes over NaN in the "
                         "axis' first tile")


def _plant_nan_axis(x):
    x = x.clone()
    x[:, 0, :] = float("nan")
    return x


# FINDINGS.md flaggems 8: a NaN at the start of the reduced axis, in every column (the running maximum starts
# at -inf and tl.maximum(-inf, NaN) is -inf on the GPU, so the lane's sum skips the NaN)
tdiff.check(
    name="non_inner_loop_nan",
    launch=lambda kernel, x, dim: launch(kernel, _plant_nan_axis(x), dim),
    reference=lambda x, dim: reference(_plant_nan_axis(x), dim),
    x=tst.tensors(shape=NON_INNER_LOOP, dtype=FLOATS, max_numel=2 * (2 * 8192 + 1) * 3),
    dim=[1],
    max_examples=3,
    marks=[pytest.mark.xfail(strict=True, reason=NON_INNER_NAN_FINDING)],
)(S.softmax_kernel_non_inner)
