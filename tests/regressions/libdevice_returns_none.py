"""tdiff's interpreter needs a shim for `triton.language.extra.libdevice` functions.

`from triton.language.extra.libdevice import rsqrt, tanh` (what liger-kernel does on Triton >= 3.0: rms_norm,
layer_norm, group_norm, fused_add_rms_norm, poly_norm use rsqrt; dyt, geglu and cross_entropy's softcap use
tanh) binds the *stubs* in triton/language/extra/libdevice.py, whose bodies are `...`: the compiler dispatches
them to CUDA/HIP libdevice, but Triton's interpreter (3.6.0, stock TRITON_INTERPRET=1 and tdiff's) calls the
stub, which returns None. The kernel then fails at the first use of the value, e.g.
    tl.store(...): TypeError: cannot convert None of type <class 'NoneType'> to tensor
and tdiff reports "interpreter error" (not an "interpreter limitation": the exception does not match
limitations.KNOWN, and the message does not name libdevice). Every check on those liger kernels fails on CPU.

Expected: a shim mapping the libdevice stubs the interpreter can compute (rsqrt, tanh, exp, log, erf, pow,
...) to numpy, as `float-args` / `bf16-arith` do; or at least a clear "interpreter limitation" naming libdevice.
Run: python suites/liger/_tdiff_issues/libdevice_returns_none.py
"""

import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt, tanh

import tdiff
from tdiff import strategies as tst


def launch(kernel, x):
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    kernel[(1,)](x, y, z, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y, z


def reference(x):
    return torch.rsqrt(x), torch.tanh(x)


@tdiff.check(launch=launch, reference=reference,
             x=tst.tensors(shape=(tst.sides(1, 8),), layouts=["contiguous"], values=tst.values(0.5, 4)))
@triton.jit
def libdevice_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
    tl.store(y_ptr + offs, rsqrt(x), mask=offs < n)
    tl.store(z_ptr + offs, tanh(x), mask=offs < n)


if __name__ == "__main__":
    try:
        tdiff.verify(libdevice_kernel, isolation="none", max_examples=3, corpus_dir=None, repro_dir=None)
        print("passed (issue fixed)")
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
