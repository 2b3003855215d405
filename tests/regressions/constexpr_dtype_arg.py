"""tdiff issue: a @triton.jit device function called with a dtype (`get_dtype_min(x_ptr.type.element_ty)`)
receives a `tl.constexpr` wrapping the dtype when compiled (the code generator wraps non-tensor
arguments of device-function calls in constexpr), so `dtype.value` works; in the interpreter it gets
the bare `tl.dtype`, and `.value` raises `AttributeError: 'dtype' object has no attribute 'value'`.
Stock TRITON_INTERPRET=1 (Triton 3.6) fails the same way; compiled (H100, Triton 3.6.0) FlagGems'
argmax kernels, which call it, run.

FlagGems' `flag_gems.utils.limits.get_dtype_min` / `get_dtype_max` do exactly this, and every
argmax / argmin / max / min / topk kernel calls them, so none of those can be interpreted.

Run: python suites/flaggems/_tdiff_issues/constexpr_dtype_arg.py   (exits 1 while the issue is present)
"""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


@triton.jit
def get_dtype_min(dtype):
    """FlagGems' flag_gems/utils/limits.py (flag-gems 5.0.2), verbatim."""
    dtype_ = dtype.value  # tl.dtype
    if dtype_.is_floating():
        value: tl.constexpr = float("-inf")
        return value
    if dtype_.is_int_signed():
        width: tl.constexpr = dtype_.int_bitwidth
        value: tl.constexpr = -1 * 2 ** (width - 1)
        return value
    if dtype_.is_int_unsigned():
        value: tl.constexpr = 0
        return value


@triton.jit
def row_max(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    lowest = get_dtype_min(x_ptr.type.element_ty)
    x = tl.load(x_ptr + offs, mask=offs < n, other=lowest)
    tl.store(out_ptr, tl.max(x, axis=0))


def launch(kernel, x):
    out = torch.empty((), dtype=x.dtype, device=x.device)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


if __name__ == "__main__":  # declared here, not at import, so that `pytest --tdiff suites` does not collect it
    tdiff.check(launch=launch, reference=lambda x: x.max(),
                x=tst.tensors(shape=(tst.sizes(block=16),), layouts=["contiguous"],
                              values=tst.values(nan=False)))(row_max)
    try:
        (result,) = tdiff.verify(row_max, isolation="none", max_examples=5, corpus_dir=None, repro_dir=None)
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
    if not result.shims.get("constexpr-args"):  # applied, so counted (and named in the summary)
        print(f"the constexpr-args shim was not counted: {dict(result.shims)}")
        raise SystemExit(1)
    print("passes: the issue is fixed")
