"""tdiff's interpreter cannot run `tl.atomic_add` on bfloat16 (liger's group norm backward does, for bf16 inputs).

Triton's interpreter (3.6.0) keeps bf16 as uint16 bits and its atomic_add has no bf16 path: it raises
`ValueError: Unsupported data type`. tdiff reports "interpreter error" and fails the case; the error is not in
limitations.KNOWN (so not reported as an "interpreter limitation") and tdiff has no shim for it (bf16-arith
covers binary/ternary/unary ops, not atomics). Every bf16 case of liger's _group_norm_backward_kernel fails on
CPU with it.

Expected: a bf16 atomic_add shim (add on the values in fp32, round to bf16: what the GPU's atom.add.bf16 does),
or at least an "interpreter limitation" verdict.
Run: python suites/liger/_tdiff_issues/bf16_atomic_add.py
"""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def launch(kernel, x):
    out = torch.zeros(1, dtype=x.dtype, device=x.device)
    kernel[(x.numel(),)](x, out)
    return out


def reference(x):
    return x.float().sum().to(x.dtype).reshape(1)


@tdiff.check(launch=launch, reference=reference,
             x=tst.tensors(shape=(tst.sides(1, 4),), dtype="bfloat16", layouts=["contiguous"],
                           values=tst.values(-4, 4, nan=False, inf=False)))
@triton.jit
def bf16_atomic_sum(x_ptr, out_ptr):
    tl.atomic_add(out_ptr, tl.load(x_ptr + tl.program_id(0)))


if __name__ == "__main__":
    try:
        tdiff.verify(bf16_atomic_sum, isolation="none", max_examples=3, corpus_dir=None, repro_dir=None)
        print("passed (issue fixed)")
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
