"""tdiff issue: shrinking a failing case with a large tensor ignores the shrink budget and takes
time quadratic in the tensor's size (the step that zeroes values: "N value(s) of `x` zeroed").

Seen on suites/flaggems/softmax.py `non_inner_loop` (x = float32[67, 4097, 2], 549k elements; the
case failed on the LibEntry issue): "shrunk ... in 691.69 s (1 runs; 532334 value(s) of `x` zeroed)"
with the default --tdiff-shrink-budget of 60 s: one check took 11.5 minutes.

Here (a launch that always raises after its kernel ran, so every shrink step "still fails"), with
shrink_budget=5, on this 2-core machine (tdiff at bdae5c4 plus working-tree changes): 20,000
elements take 1.1 s, 80,000 take 11.8 s, 160,000 take 59.5 s.

Run: python suites/flaggems/_tdiff_issues/shrink_budget_large_tensor.py [N]   (exits 1 while the
shrink of N elements, default 80000, takes more than twice the 5 s budget)
"""

import sys
import time

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BUDGET = 5.0


@triton.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, 1, BLOCK=16)
    raise RuntimeError("always fails after the launch")


if __name__ == "__main__":  # declared here, not at import, so that `pytest --tdiff suites` does not collect it
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 80_000
    tdiff.check(launch=launch, reference=lambda x: x.clone(),
                x=tst.tensors(shape=(N,), layouts=["contiguous"], max_numel=N))(copy)
    t = time.time()
    try:
        tdiff.verify(copy, isolation="none", max_examples=1, corpus_dir=None, repro_dir=None, shrink_budget=BUDGET)
    except tdiff.DivergenceError as e:
        print("\n".join(ln for ln in str(e).splitlines() if "shrunk" in ln))
    took = time.time() - t
    print(f"N={N}: {took:.1f} s with shrink_budget={BUDGET}")
    raise SystemExit(1 if took > 2 * BUDGET else 0)
