"""tdiff issue (interpreter wrong): `a and b` / `a or b` between two block tensors inside a kernel.

Triton's compiler turns a BoolOp on tensors into an elementwise `logical_and` / `logical_or`
(code_generator.visit_BoolOp); Triton's interpreter runs the Python source, where `a and b` is
`b if a else a` (truthiness of a whole tensor), so `mask = (k < K) and (n < N)` keeps only one of
the two masks. tdiff then reports the resulting out-of-bounds access, or a wrong result, as a kernel
bug ("out of bounds", "disagrees with reference") although the compiled kernel is right.
Stock TRITON_INTERPRET=1 (Triton 3.6) behaves the same; compiled on an H100 (Triton 3.6.0) the
kernel below is right (it only warns that `and` on tensors is deprecated). tdiff already rewrites kernel sources
(interpret_scope.rewritten); rewriting BoolOps on tensors to logical_and/logical_or would fix it.

FlagGems uses this form in many kernels: argmax_kernel_non_inner (`mask = k_offset < K and
n_offset[:, None] < N`), index_select_kernel (`rows_mask and (cols_offsets < index_len)`),
sum_dim_kernel / other naive reductions (`row_mask and col_mask`), layer_norm backward, ...

Run: python suites/flaggems/_tdiff_issues/tensor_and_or.py   (exits 1 while the issue is present)
"""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


@triton.jit
def copy_2d(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    mask = rows < M and cols < N  # compiled: (rows < M) & (cols < N)
    tl.store(out_ptr + rows * N + cols, tl.load(x_ptr + rows * N + cols, mask=mask), mask=mask)


def launch(kernel, x):
    out = torch.empty_like(x)
    M, N = x.shape
    kernel[(1,)](x, out, M, N, BM=triton.next_power_of_2(M), BN=triton.next_power_of_2(N))
    return out


if __name__ == "__main__":  # declared here, not at import, so that `pytest --tdiff suites` does not collect it
    tdiff.check(launch=launch, reference=lambda x: x.clone(),
                x=tst.tensors(shape=(3, 5), layouts=["contiguous"]))(copy_2d)
    try:
        tdiff.verify(copy_2d, isolation="none", max_examples=3, corpus_dir=None, repro_dir=None)
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
    print("passes: the issue is fixed")
