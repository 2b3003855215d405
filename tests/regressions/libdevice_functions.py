"""tdiff issue: libdevice functions (`triton.language.extra.libdevice.*` and the vendor module
`triton.language.extra.cuda.libdevice.*`, which FlagGems uses everywhere through its `tl_extra_shim`:
erf, tanh, pow, exp, rsqrt, ...) cannot run in Triton 3.6's interpreter, and tdiff reports them as
an `interpreter error` (a failure) rather than as the known `extern-elementwise` limitation
(tdiff/core/limitations.py), whose pattern ("extern_elementwise not supported in interpreter") Triton 3.6
never raises here:

- `triton.language.extra.cuda.libdevice.erf(x)` (called directly or through a module-level alias,
  as FlagGems does) raises `ValueError: Did you forget to add @triton.jit ? (`_semantic` argument must
  be provided outside of JIT functions.)`: the interpreter only patches `triton.language` and
  `triton.language.math`, so the @core.extern function is called without a semantic;
- `triton.language.extra.libdevice.erf(x)` is a stub whose body is `...`: it returns None, and the
  store fails with `TypeError: cannot convert None of type <class 'NoneType'> to tensor`.

The compiler accepts all three (H100, Triton 3.6.0: all three match torch.erf). Either tdiff maps
libdevice functions to the interpreter's
`tl.math` / numpy equivalents (most have one: erf, exp, tanh, pow, rsqrt, ...), or it should at
least recognise these two errors as the extern-elementwise limitation. Stock TRITON_INTERPRET=1
fails the same way (see `python <this file> --stock`).

Run: python suites/flaggems/_tdiff_issues/libdevice_functions.py   (exits 1 while the issue is present)
"""

import os
import subprocess
import sys

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import libdevice as cuda_libdevice

erf_alias = cuda_libdevice.erf  # how FlagGems' gelu.py refers to it (tl_extra_shim.erf)


@triton.jit
def erf_via_alias(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, erf_alias(tl.load(x_ptr + offs, mask=m)), mask=m)


@triton.jit
def erf_via_cuda_libdevice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, cuda_libdevice.erf(tl.load(x_ptr + offs, mask=m)), mask=m)


@triton.jit
def erf_via_libdevice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, libdevice.erf(tl.load(x_ptr + offs, mask=m)), mask=m)


KERNELS = (erf_via_alias, erf_via_cuda_libdevice, erf_via_libdevice)


def launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=64)
    return out


def stock():
    x = torch.linspace(-2, 2, 10)
    for k in KERNELS:
        try:
            print(k.fn.__name__ if hasattr(k, "fn") else k.__name__, torch.allclose(launch(k, x), torch.erf(x)))
        except Exception as e:
            print(getattr(k, "fn", k).__name__, "stock interpreter:", type(e).__name__, str(e)[:160])


if __name__ == "__main__":  # checks declared here, not at import, so that `pytest --tdiff suites` does not collect them
    if "--stock" in sys.argv:
        stock()
        raise SystemExit(0)
    import tdiff
    from tdiff import strategies as tst

    failed = False
    for k in KERNELS:
        tdiff.check(launch=launch, reference=lambda x: torch.erf(x.double()).float(),
                    x=tst.tensors(shape=(tst.sizes(block=64, max_value=64),), layouts=["contiguous"]))(k)
        try:
            tdiff.verify(k, isolation="none", max_examples=5, corpus_dir=None, repro_dir=None)
            print(k.fn.__name__, "passes")
        except tdiff.DivergenceError as e:
            failed = True
            print("\n".join(str(e).splitlines()[:2]))
    if os.environ.get("TRITON_INTERPRET") is None:
        subprocess.run([sys.executable, __file__, "--stock"], env={**os.environ, "TRITON_INTERPRET": "1"}, check=False)
    raise SystemExit(1 if failed else 0)
