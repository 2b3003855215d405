"""tdiff issue: a KernelInterface wrapper that caches what `JITFunction.run` returns and launches
that object itself on later calls (FlagGems' `LibEntry`, flag_gems/utils/libentry.py) fails under
tdiff's interpreter from the second launch with the same specialization on.

FlagGems' LibEntry.run does, per launch:
    entry_key = (dtypes/alignment of tensor args, values of specialized ints, constexprs)
    if entry_key not in self.kernel_cache[device]:
        kernel = self.fn.run(*args, grid=grid, **kwargs)     # JITFunction.run: compiles + launches
        self.kernel_cache[device][entry_key] = kernel       # a CompiledKernel on a GPU
        return
    kernel = self.kernel_cache[device][entry_key]
    kernel[grid](*all_args)                                  # launches the CompiledKernel directly

tdiff routes every `JITFunction.run` to its backend (plan.route_launches). The interpreter's handler
returns None, so LibEntry caches None and the next launch with the same key fails with
"TypeError: 'NoneType' object is not subscriptable". `kernels.rebuild` copies the wrapper with
copy.copy, so the copy shares the original's `kernel_cache`, and the poisoned entry persists across
cases in the same process (a worker): every case after the first with a given key fails.

On an H100 the FlagGems suite fails the same way (interpreter side), and the compiled handler returns
the CompiledKernel, so the second launch bypasses
JITFunction.run altogether: tdiff does not record it (no launch record, no grid, no compile count),
and a kernel-cache entry made in one case (with its own constexprs) is replayed in the next.

Run: python suites/flaggems/_tdiff_issues/libentry_cached_kernel.py   (exits 1 while the issue is present)
"""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


class CachingEntry(triton.KernelInterface):
    """The part of FlagGems' LibEntry that matters here (flag-gems 5.0.2)."""

    def __init__(self, fn):
        self.fn = fn
        self.arg_names = fn.arg_names
        self.kernel_cache = ({},)  # one dict per device, shared by copy.copy

    def run(self, *args, grid, **kwargs):
        key = tuple((a.dtype, a.data_ptr() % 16 == 0) if hasattr(a, "data_ptr") else a for a in args)
        cache = self.kernel_cache[0]
        if key not in cache:
            cache[key] = self.fn.run(*args, grid=grid, **kwargs)
            return
        cache[key][grid](*args, *kwargs.values())


@triton.jit
def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


kernel = CachingEntry(add_one)


def launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


if __name__ == "__main__":  # declared here, not at import, so that `pytest --tdiff suites` does not collect it
    # one shape, so that every case has the same LibEntry key (FlagGems' key holds the values of
    # specialized ints, here n): from the second case on, the cached entry is used
    tdiff.check(launch=launch, reference=lambda x: x + 1,
                x=tst.tensors(shape=(100,), layouts=["contiguous"]))(kernel)
    try:
        tdiff.verify(kernel, isolation="none", max_examples=3, corpus_dir=None, repro_dir=None)
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
    print("passes: the issue is fixed")
