"""tdiff issue (false alarm): an fp32 intermediate that overflows to inf for inputs near the dtype's
limits and then turns into a *finite* result (here `1/sqrt(inf) = 0`) is failed as `disagrees with
reference` against the float64 reference, while the same overflow ending in inf or NaN is passed
with the `range-edge` caveat ("inputs near the dtype's limits overflowed on the way").

Seen on FlagGems' layer_norm (suites/flaggems/layer_norm.py, check `multiline`): x = [FLT_MAX, 0, 0, 0,
0, 0, 0], weight[1] = FLT_MAX: the variance overflows in fp32, rstd = rsqrt(inf) = 0, y[1] = 0, while
the float64 reference gives -1.389e38. torch's own float32 layer_norm returns NaN everywhere for
that input, so the kernel is not wrong (compiled on an H100, FlagGems' layer_norm and the kernel below give the
same 0 / -0 as the interpreter); tdiff's interpreter dataflow sees the overflow, so it could
give the same caveat.

Minimal: that row through a simplified layer-norm kernel (below).

Run: python suites/flaggems/_tdiff_issues/range_edge_finite_result.py   (exits 1 while the issue is present)
"""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


@triton.jit
def normalize(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """One row of layer norm without bias (FlagGems' layer_norm_persistent_kernel, simplified)."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    w = tl.load(w_ptr + offs, mask=m)
    mean = tl.sum(x) / n
    d = tl.where(m, x - mean, 0.0)
    rstd = tl.math.rsqrt(tl.sum(d * d) / n + 1e-5)
    tl.store(out_ptr + offs, (x - mean) * rstd * w, mask=m)


def launch(kernel, x, w):
    out = torch.empty_like(x)
    kernel[(1,)](x, w, out, x.numel(), BLOCK=8)
    return out


def reference(x, w):
    xd = x.double()
    d = xd - xd.mean()
    return (d * torch.rsqrt((d * d).mean() + 1e-5) * w.double()).to(x.dtype)


if __name__ == "__main__":  # declared here, not at import, so that `pytest --tdiff suites` does not collect it
    from hypothesis import strategies as st

    big = float(torch.finfo(torch.float32).max)
    # one fixed case: x = [FLT_MAX, 0, ..., 0], w[1] = FLT_MAX
    x = torch.zeros(7)
    x[0] = big
    w = torch.zeros(7)
    w[1] = big
    print("torch float32:", torch.nn.functional.layer_norm(x, (7,), w, None, 1e-5).tolist())
    print("float64 reference:", reference(x, w).tolist())
    tdiff.check(launch=launch, reference=reference,
                inputs=st.just({"x": tst.tensor_arg(x), "w": tst.tensor_arg(w)}))(normalize)
    try:
        tdiff.verify(normalize, isolation="none", max_examples=1, corpus_dir=None, repro_dir=None)
    except tdiff.DivergenceError as e:
        print(e)
        raise SystemExit(1) from None
    print("passes: the issue is fixed")
