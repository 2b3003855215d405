"""How compiled Triton divides float32 on an NVIDIA GPU: `/` lowers to PTX `div.full.f32` (not IEEE `div.rn`), which
PTX documents as a full-range approximation with at most 2 ulps of error. This probe measures it against candidate
models, so the interpreter's modelled GPU run (`execute.interpreter.gpu_arith`) computes what the GPU computes:

- `ieee`: numpy's correctly rounded `a / b`;
- `rcp`: `a * (1 / b)`, the reciprocal rounded to float32, then the product rounded;
- the ulp distance from `ieee`, as a histogram.

Needs a CUDA GPU for the compiled kernel; prints one line per input family and a verdict line. Usage:
`python -m bench.gpu.div_full [--n 4000000]`.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _div(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) / tl.load(y_ptr + i, mask=m), mask=m)


def gpu_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    out = torch.empty_like(x)
    _div[(triton.cdiv(a.size, 1024),)](x, y, out, a.size, BLOCK=1024)
    return out.cpu().numpy()


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Signed ulp distance between float32 arrays of one sign (the integer patterns' difference)."""
    g = got.view(np.int32).astype(np.int64)
    w = want.view(np.int32).astype(np.int64)
    return np.where(np.signbit(got) == np.signbit(want), g - w, 1 << 40)


def families(n: int, rng: np.random.Generator) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    def normal(size: int, lo: int, hi: int) -> np.ndarray:
        mant = rng.uniform(1, 2, size)
        return (np.where(rng.random(size) < 0.5, -1, 1) * mant * 2.0 ** rng.integers(lo, hi, size)).astype(np.float32)

    out = {
        "random normals, exponents -60..60": (normal(n, -60, 60), normal(n, -60, 60)),
        "a row's sum by its length (1..4096)": (normal(n, -20, 20), rng.integers(1, 4097, n).astype(np.float32)),
        "by 3, 5, 6, 7, 10, 100": (normal(n, -20, 20), rng.choice([3, 5, 6, 7, 10, 100], n).astype(np.float32)),
        "large divisors (2^100..2^127)": (normal(n, -20, 20), normal(n, 100, 127)),
        "tiny quotients (results near 2^-126)": (normal(n, -100, -90), normal(n, 30, 40)),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=4_000_000)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("div_full: no CUDA GPU; nothing measured")
        return 0
    rng = np.random.default_rng(20261129)
    every_rcp = True
    for name, (a, b) in families(args.n, rng).items():
        got = gpu_div(a, b)
        with np.errstate(all="ignore"):
            ieee = (a / b).astype(np.float32)
            rcp = (a * (np.float32(1) / b)).astype(np.float32)
        d = ulps(got, ieee)
        hist = {int(k): int(v) for k, v in zip(*np.unique(np.clip(d, -3, 3), return_counts=True))}
        same_rcp = float(np.mean((got == rcp) | (np.isnan(got) & np.isnan(rcp))))
        same_ieee = float(np.mean(got == ieee))
        every_rcp &= same_rcp == 1.0
        bad = np.flatnonzero(got != rcp)[:3]
        print(f"{name}: {a.size} pairs; equal to IEEE {same_ieee:.6f}, to a * (1/b) {same_rcp:.6f}; "
              f"ulps from IEEE (clipped to 3) {hist}; first differing from a * (1/b): "
              + ", ".join(f"{a[i]!r}/{b[i]!r} gpu {got[i]!r} rcp {rcp[i]!r} ieee {ieee[i]!r}" for i in bad))
    print(f"div.full.f32 is a * (1/b) in float32 on every pair: {every_rcp}")
    flaggems_row()
    liger_row()
    return 0


def flaggems_row() -> tuple[dict[str, float], Any] | None:
    """FlagGems' LayerNorm (`layer_norm_persistent_kernel_multiline`, the kernel of a GPU red at a random seed) on a
    row whose mean div.full rounds onto its first element, weight[0] = inf: y[0, 0] by backend and tdiff's verdict
    (None where FlagGems is not installed)."""
    return _row("FlagGems LayerNorm multiline", "suites.flaggems.layer_norm",
                "L.layer_norm_persistent_kernel_multiline", "multiline", ("x", "weight", "bias"), {})


def liger_row() -> tuple[dict[str, float], Any] | None:
    """liger-kernel's LayerNorm forward (`_layer_norm_forward_kernel`, the kernel of the open GPU red of the soak's
    second session; it divides its row's sum by `n_cols` with `/` too) on the same row: as `flaggems_row`."""
    return _row("liger LayerNorm forward", "suites.liger.layer_norm", "lib._layer_norm_forward_kernel", "forward",
                ("X", "W", "B"), {"eps": 1e-5})


def _row(title: str, module: str, kernel: str, name: str, args: tuple[str, str, str],
         more: dict[str, Any]) -> tuple[dict[str, float], Any] | None:
    """Judge check `name` of `kernel` (an attribute path in suite `module`) on the div.full row, its weight infinite
    at 0: the first output's (0, 0) by backend and the verdict, printed (None where the suite's library is missing)."""
    import importlib

    try:
        suite = importlib.import_module(module)
    except BaseException as e:  # (its library not installed: the suite skips itself)
        print(f"{title}: not run ({type(e).__name__}: {e})")
        return None
    import tdiff
    from tdiff.core.case import Case
    from tdiff.judge.targets import view
    from tdiff.strategies import tensor_arg
    from tests.gpu_arith_kernels import DIV_FULL_ROW

    fn: Any = suite
    for part in kernel.split("."):
        fn = getattr(fn, part)
    check = next(c for c in fn.__tdiff_checks__ if c.name == name)
    x = torch.tensor([DIV_FULL_ROW])
    w, b = torch.ones(5), torch.zeros(5)
    w[0] = float("inf")
    runner = tdiff.Runner(tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none"))
    case = Case({**dict(zip(args, (tensor_arg(x), tensor_arg(w), tensor_arg(b)))), **more})
    v, ev = runner.judge(check).verdict(case, final=True)
    y = {n: float(view(o, ev.case).targets["returned[0]"].values.reshape(-1)[0])
         for n, o in ev.outcomes.items() if o.error is None}
    print(f"{title}, x = {DIV_FULL_ROW}, weight[0] = inf: y[0, 0] by backend {y}; verdict {v.label}; "
          f"notes {[k for k, _ in v.notes]}")
    return y, v


if __name__ == "__main__":
    raise SystemExit(main())
