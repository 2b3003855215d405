"""tdiff issue: kernel arguments that are not torch.Tensors but pointer-like objects (anything with
`data_ptr()` and `dtype`, which Triton's launcher and its interpreter accept as pointers) are not
registered as memory by tdiff's interpreter backend: a store through one is reported as
"out of bounds ... outside every allocation", and the object's memory is neither compared nor
traced.

FlagGems passes such objects to every generated pointwise kernel: `PointwiseDynamicFunction.prepare_args`
wraps inputs and outputs in `flag_gems.utils.tensor_wrapper.StridedBuffer` (a view with its own
shape/strides/offset over a base tensor, used e.g. for negative strides in flip) and the generated
wrapper launches the kernel with them. Triton's compiled launcher accepts them (it only calls
`data_ptr()`); Triton 3.6's own TRITON_INTERPRET=1 does not either (`_init_args_hst` calls
`new_empty`, `storage_offset()`, `size()` on them: AttributeError), so FlagGems' pointwise ops cannot
run under the stock interpreter at all. tdiff's interpreter passes them through to the kernel
(`_to_host` and `LiveArgs.add` only look at torch.Tensor), where the pointer checks reject them.
A fix could register such an argument's `untyped_storage()` (StridedBuffer has it) as the region.

Run: python suites/flaggems/_tdiff_issues/pointer_like_args.py   (exits 1 while the issue is present)
"""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


class Buffer:
    """Minimal stand-in for FlagGems' StridedBuffer: a base tensor seen through data_ptr()/dtype/untyped_storage()."""

    def __init__(self, base):
        self._base = base
        self.dtype = base.dtype
        self.device = base.device

    def data_ptr(self):
        return self._base.data_ptr()

    def untyped_storage(self):  # Triton's own interpreter uses it (StridedBuffer has it too)
        return self._base.untyped_storage()


@triton.jit
def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 64),)](Buffer(x), Buffer(out), x.numel(), BLOCK=64)
    return out


if __name__ == "__main__":  # declared here, not at import, so that `pytest --tdiff suites` does not collect it
    tdiff.check(launch=launch, reference=lambda x: x * 2,
                x=tst.tensors(shape=(tst.sizes(block=64),), layouts=["contiguous"]))(double)
    try:
        tdiff.verify(double, isolation="none", max_examples=5, corpus_dir=None, repro_dir=None)
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
    print("passes: the issue is fixed")
