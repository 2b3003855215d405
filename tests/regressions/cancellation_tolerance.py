"""tdiff false alarm: an fp32 result obtained as the difference of two much larger intermediate terms is judged
with a tolerance that knows nothing of those terms.

liger's PolyNorm backward computes the gradient of norm(x^3) = x^3 * rsqrt(mean(x^6) + eps) in closed form,
    w0 * (3 x^2 rstd dy - (3 / n) x^5 rstd^3 S),   S = sum(dy x^3),
in fp32. For one column (n = 1), x = 0.6404, dy = 8, w0 = 12, the two terms are about 450 and cancel to 0.0065:
fp32 rounding of 450-sized terms leaves an absolute error of about 1e-4 (here 0.00640869 against the float64
value 0.00651396), as any fp32 evaluation of this formula (or autograd of x / sqrt(mean(x^2) + eps)) would.
tdiff's tolerance ("arith+reduce/float32": rtol=1.91e-06, scale=1.91e-06, no `inputs` term) scales with the
result and the largest input (12), not with the intermediate magnitudes (rstd = 3.8 amplifies them), and fails
the case. The interpreter has the dataflow to know the magnitudes of the operands of that subtraction.

The kernel below is that expression on its own, with the exact rstd liger's forward saves (fp32).
Expected: passes. Observed: "disagrees with reference" (1.6% relative on a cancelled result).
Run: python suites/liger/_tdiff_issues/cancellation_tolerance.py

Since issue 41 (forgiveness by measurement) one rounding of x moves the float64 answer by far less than 1e-4, so
the cancellation is the formula's, not the problem's (for n = 1 the stable form is w0 * 3 x^2 rstd dy * eps * rstd^2).
But the reference is this same formula, and computed in float32 (the float32 runs of the measurement,
`reference:fp32`) it cancels as much: the kernel is as accurate as float32 arithmetic of the reference's formula.
Expected: passed, with the counted caveat `float32 computation` that says so; and a pass with no such caveat where
the check declares the precision it accepts (`tolerance="arith"`: the dataflow scale).
"""

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst

EPS = 1e-6


def launch(kernel, x, dy, w):
    rstd = torch.rsqrt(x.double() ** 6 + EPS).float()
    out = torch.empty_like(x)
    kernel[(1,)](x, dy, w, rstd, out, x.shape[-1])
    return out


def reference(x, dy, w):
    rstd = torch.rsqrt(x.double() ** 6 + EPS).float().double()
    xd, d = x.double(), dy.double()
    s = d * xd**3
    return (w.double() * (3 * xd**2 * rstd * d - 3 * xd**5 * rstd**3 * s)).float()


CASE = dict(x=st.just(tst.tensor_arg(torch.tensor([0.6404226422309875]))),
            dy=st.just(tst.tensor_arg(torch.tensor([8.0]))),
            w=st.just(tst.tensor_arg(torch.tensor([12.0]))))


@tdiff.check(launch=launch, reference=reference, tolerance="arith", name="declared", **CASE)
@tdiff.check(launch=launch, reference=reference, **CASE)
@triton.jit
def poly_norm_cubic_grad(x_ptr, dy_ptr, w_ptr, rstd_ptr, out_ptr, n_cols):  # liger's expression, n_cols = 1
    x = tl.load(x_ptr)
    dy = tl.load(dy_ptr)
    w0 = tl.load(w_ptr)
    rstd_3 = tl.load(rstd_ptr)
    S_3 = dy * (x * x * x)
    grad_x_3 = w0 * (3.0 * (x * x) * rstd_3 * dy
                     - (3.0 / n_cols) * x * x * x * x * x * (rstd_3 * rstd_3 * rstd_3) * S_3)
    tl.store(out_ptr, grad_x_3)


if __name__ == "__main__":
    try:
        ran = tdiff.verify(poly_norm_cubic_grad, isolation="none", max_examples=1, corpus_dir=None, repro_dir=None)
    except tdiff.DivergenceError as e:
        ran = e.results
    results = {r.check_id.rsplit("[", 1)[-1].rstrip("]"): r for r in ran}
    plain, declared = results["tdiff"], results["declared"]
    print(plain.status, dict(plain.caveats), "|", declared.status, dict(declared.caveats))
    if not (plain.status == "passed" and plain.caveats["float32 computation"] == 1
            and declared.status == "passed" and not declared.caveats["float32 computation"]):
        raise SystemExit(1)
    print("as expected: passed with the float32-computation caveat undeclared, and without it declared")
