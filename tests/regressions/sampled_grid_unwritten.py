"""FIXED in the working tree during this session (tdiff/judge/integrity.py changed around 14:28): kept as a regression
script.

tdiff false alarm: on a sampled grid (more than 64 programs), every element written by a program that was not
interpreted is reported as "never written (they hold torch.empty's fill)" ("unobserved result").

The README says only what the sampled programs wrote is compared; integrity._unobserved flags
`(target.writers < 0) & is_fill(target)` without excluding the programs left out by sampling. tdiff's own
tests/test_sampling.py::test_sampled_interpreter_runs_few_programs_and_agrees_with_the_reference fails the same
way in this working tree. liger's sparsemax checks (rows = numel / n_cols, often > 64 with dim=0) hit it.

Expected: passes (each program doubles one row). Observed: "unobserved result: 165 of 195 element(s) of
`returned` were never written".
Run: python suites/liger/_tdiff_issues/sampled_grid_unwritten.py
"""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def reference(x):
    return x * 2


@tdiff.check(launch=launch, reference=reference, x=tst.tensors(shape=(65, 3), layouts=["contiguous"]))
@triton.jit
def double_rows(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + r * n + offs, tl.load(x_ptr + r * n + offs, mask=offs < n) * 2, mask=offs < n)


if __name__ == "__main__":
    try:
        tdiff.verify(double_rows, isolation="none", max_examples=2, corpus_dir=None, repro_dir=None)
        print("passed (issue fixed)")
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
