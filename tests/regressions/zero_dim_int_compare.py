"""tdiff issue (crash in the comparison): when a returned 0-d integer tensor differs between the two
sides, `compare.close` raises `ValueError: Changing the dtype of a 0d array is only supported if the
itemsize is unchanged` (`raw_a.view(np.uint8)` on a 0-d array) and the check ends as `error` instead
of reporting the divergence.

Seen on FlagGems' argmax over all elements (`argmax(x)` returns a 0-d int64 tensor) with a
transposed input. Minimal: a kernel storing a wrong 0-d int64 result.

Run: python suites/flaggems/_tdiff_issues/zero_dim_int_compare.py   (exits 1 while the issue is present)
"""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


@triton.jit
def count_plus_one(x_ptr, out_ptr, n):
    tl.store(out_ptr, n + 1)  # off by one on purpose: the reference is n


def launch(kernel, x):
    out = torch.empty((), dtype=torch.int64)
    kernel[(1,)](x, out, x.numel())
    return out


if __name__ == "__main__":  # declared here, not at import, so that `pytest --tdiff suites` does not collect it
    tdiff.check(launch=launch, reference=lambda x: torch.tensor(x.numel(), dtype=torch.int64),
                x=tst.tensors(shape=(tst.sizes(block=16),), layouts=["contiguous"]))(count_plus_one)
    try:
        tdiff.verify(count_plus_one, isolation="none", max_examples=3, corpus_dir=None, repro_dir=None)
    except tdiff.DivergenceError as e:
        print(e)
        ok = "disagrees with reference" in str(e)
        print("expected: a divergence reported;", "got it" if ok else "got a tdiff error instead")
        raise SystemExit(0 if ok else 1) from None
    print("no divergence found at all (unexpected)")
    raise SystemExit(1)
