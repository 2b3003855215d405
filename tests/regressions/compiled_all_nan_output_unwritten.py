"""tdiff false alarm (GPU only): a compiled result that is legitimately all NaN is reported as "never written".

With the compiled backend there is no trace of stores, so integrity._unobserved decides that a returned tensor
the kernel was given was never written when every element still holds the fill pattern, and the fill pattern of
a float tensor is NaN (targets.is_fill). A kernel whose correct output is NaN everywhere (a one-element softmax of
a NaN, the loss of a row holding NaN, ...) then fails with "unobserved result: compiled: 1 of 1 element(s) of
`returned` were never written (they hold torch.empty's fill)", although the interpreter and the reference both
give the same NaN. On the H100 run of suites/liger this failed 7 checks (softmax, layer_norm backward,
fused_add_rms_norm backward, poly_norm backward, kl_div forward, relu_squared backward, cross entropy).

Expected: passes (compiled = interpreter = reference = NaN). Observed on a GPU: "unobserved result".
Run (GPU): python suites/liger/_tdiff_issues/compiled_all_nan_output_unwritten.py
"""

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst


def launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out)
    return out


def reference(x):
    return x + 1


@tdiff.check(launch=launch, reference=reference, x=st.just(tst.tensor_arg(torch.tensor([float("nan")]))))
@triton.jit
def add_one(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr) + 1)


if __name__ == "__main__":
    try:
        tdiff.verify(add_one, isolation="none", max_examples=1, corpus_dir=None, repro_dir=None)
        print("passed (issue fixed, or no GPU: the compiled backend did not run)")
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
