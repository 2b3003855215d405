"""tdiff false alarm: "unobserved result ... were never written (they hold torch.empty's fill)".

`launch` makes a contiguous copy of a non-contiguous input (as liger's wrappers do with `.contiguous()`),
the kernel updates only part of the copy in place (e.g. RoPE rotates the first rotary_dim entries of each
head and leaves the rest), and `launch` returns the copy. An input NaN in a part the kernel does not touch
is copied there by torch, not left by torch.empty; tdiff's integrity check (integrity._unobserved with
targets.is_fill: NaN == fill for floats) takes it for an unwritten element and fails the case.

Expected: passes (the returned copy equals the reference). Observed: DivergenceError "unobserved result".
Run: python suites/liger/_tdiff_issues/unwritten_nan_in_copied_input.py
"""

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst


@triton.jit
def double_first(x_ptr):  # doubles x[0] in place; x[1:] are left as they are
    tl.store(x_ptr, tl.load(x_ptr) * 2)


def launch(kernel, x):
    x = x.contiguous()  # a copy: x arrives transposed
    kernel[(1,)](x)
    return x


def reference(x):
    y = x.contiguous().clone()
    y.view(-1)[0] *= 2
    return y


x = torch.tensor([[1.0, 2.0], [float("nan"), 4.0]]).t()  # non-contiguous; the NaN lands at copy index 1
tdiff.check(launch=launch, reference=reference, x=st.just(tst.tensor_arg(x)))(double_first)

if __name__ == "__main__":
    try:
        tdiff.verify(double_first, isolation="none", max_examples=1, corpus_dir=None, repro_dir=None)
        print("passed (issue fixed)")
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
