"""SwiGLU: silu(a) * b on the two halves of a fused projection, read through strided views."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def launch(kernel, ab):
    rows, two_h = ab.shape
    h = two_h // 2
    a, b = ab[:, :h], ab[:, h:]  # the halves of torch.chunk: views into one storage
    out = torch.empty((rows, h), dtype=ab.dtype, device=ab.device)
    block = 64
    kernel[(rows, triton.cdiv(h, block))](a, b, out, a.stride(0), a.stride(1), b.stride(0), b.stride(1), h,
                                         BLOCK=block)
    return out


def reference(ab):
    a, b = ab.float().chunk(2, dim=-1)
    return (torch.nn.functional.silu(a) * b).to(ab.dtype)


@tdiff.check(
    launch=launch,
    reference=reference,
    dims={"H": tst.sizes(block=64, max_blocks=3)},
    ab=tst.tensors(shape=(tst.sides(1, 8), lambda d: 2 * d["H"]), dtype=tst.FLOATS,
                   values=tst.values(-20, 20, nan=False)),
)
@triton.jit
def swiglu_fwd(a_ptr, b_ptr, out_ptr, stride_ar, stride_ac, stride_br, stride_bc, h, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < h
    a = tl.load(a_ptr + row * stride_ar + cols * stride_ac, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride_br + cols * stride_bc, mask=mask, other=0.0).to(tl.float32)
    silu = a * tl.sigmoid(a)
    tl.store(out_ptr + row * h + cols, silu * b, mask=mask)
