"""Cases per second: a bare hand-written loop against tdiff, on the same cases, in one run.

    python bench/bench.py                 # every kernel and grid; prints a table and ratios
    python bench/bench.py --quick         # fewer cases (for a smoke run)

The bare loop builds the inputs, launches the kernel compiled (where a GPU is present),
launches it in Triton's interpreter (its own InterpretedFunction, inside tdiff's selective
interpretation scope, since Triton alone cannot interpret next to compiling), and compares with
torch.allclose. Without a GPU both sides compare the interpreter with the kernel's reference.
tdiff runs the same cases through `Runner.evaluate`: guard bands, instrumented interpreter,
storage-by-storage comparison, worker processes. Ratios are tdiff time / bare time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

import tdiff  # noqa: E402
from suites import matmul, softmax, vector_add  # noqa: E402
from tdiff import kernels  # noqa: E402
from tdiff.backends.interpret_scope import interpreting  # noqa: E402
from tdiff.case import Case  # noqa: E402
from tdiff.runner import Runner  # noqa: E402
from tdiff.strategies import tensor_arg  # noqa: E402

GPU = torch.cuda.is_available()


def _numpy24_shim() -> None:
    """The bare loop uses Triton's own interpreter, which needs the numpy >= 2.4 fix for runtime loops."""
    import triton.runtime.interpreter as interp

    orig = interp._patch_lang_tensor

    def patched(tensor, *rest):
        orig(tensor, *rest)
        tensor.__index__ = lambda self: int(self.handle.data.reshape(-1)[0])

    interp._patch_lang_tensor = patched


_numpy24_shim()


def make_cases(name: str, programs: int, n: int) -> list[Case]:
    """n cases of one kernel whose launch has exactly `programs` programs."""
    out = []
    for seed in range(n):
        g = torch.Generator().manual_seed(seed)
        if name == "vector_add":
            size = programs * vector_add.BLOCK - 1
            x, y = torch.randn(size, generator=g), torch.randn(size, generator=g)
            out.append(Case({"x": tensor_arg(x), "y": tensor_arg(y)}))
        elif name == "softmax":
            out.append(Case({"x": tensor_arg(torch.randn(programs, 61, generator=g))}))
        else:
            gm = int(round(programs ** 0.5))
            gn = programs // gm
            a = torch.randn(gm * matmul.BM - 1, 32, generator=g)
            b = torch.randn(32, gn * matmul.BN - 1, generator=g)
            out.append(Case({"a": tensor_arg(a), "b": tensor_arg(b)}, dims={}))
    return out


KERNELS = {"vector_add": vector_add.add_kernel, "softmax": softmax.softmax_kernel, "matmul": matmul.matmul_kernel}


def bare_loop(check, cases: list[Case]) -> float:
    """Seconds for the hand-written loop over `cases`."""
    jit = kernels.jit_function(check.kernel)
    interp = InterpretedFunction(jit.fn)
    t0 = time.perf_counter()
    for case in cases:
        inputs = {k: torch.from_numpy(v.values().astype(np.float32)) for k, v in case.tensors().items()}
        with interpreting():
            got = check.launch(interp, **inputs)
        if GPU:
            want = check.launch(check.kernel, **{k: v.cuda() for k, v in inputs.items()})
            torch.cuda.synchronize()
            want = want.cpu() if isinstance(want, torch.Tensor) else want
        else:
            want = check.reference(**inputs)
        assert torch.allclose(got, want, rtol=1e-2, atol=5e-2, equal_nan=True)  # loose: tf32 in matmul
    return time.perf_counter() - t0


def tdiff_loop(runner: Runner, check, cases: list[Case], pair) -> float:
    t0 = time.perf_counter()
    for case in cases:
        cmp, _ = runner.evaluate(check, case, pair)
        assert cmp is not None and cmp.ok, cmp and cmp.summary()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--grids", default="1,16,256,1024")
    args = ap.parse_args()
    grids = [int(g) for g in args.grids.split(",")]
    pair = ("compiled", "interpreter") if GPU else ("interpreter", "reference")
    full = tdiff.RunOptions(isolation="process", corpus_dir=None, repro_dir=None, sample_size=0)
    sampled = full.with_(sample_size=8, sample_threshold=64)
    runners = {"tdiff": Runner(full), "tdiff in-process": Runner(full.with_(isolation="none")),
               "tdiff sampled": Runner(sampled)}
    print(f"device: {torch.cuda.get_device_name() if GPU else 'CPU only'}; pair: {pair[0]} vs {pair[1]}")
    print(f"{'kernel':11} {'grid':>5} {'cases':>5} {'bare c/s':>9} " + " ".join(f"{k + ' c/s':>20}" for k in runners)
          + f" {'tdiff/bare':>10} {'full/sampled':>12}")
    ratios, speedups = [], []
    for name, kernel in KERNELS.items():
        check = tdiff.checks_of(kernel)[0]
        for g in grids:
            n = 2 if (args.quick or g >= 256) else 6
            cases = make_cases(name, g, n)
            bare_loop(check, cases[:1])  # warm: compile, first interpretation
            for r in runners.values():
                tdiff_loop(r, check, cases[:1], pair)
            times = {"bare": min(bare_loop(check, cases) for _ in range(2))}
            for label, r in runners.items():
                times[label] = min(tdiff_loop(r, check, cases, pair) for _ in range(2))
            ratio = times["tdiff"] / times["bare"]
            speed = times["tdiff"] / times["tdiff sampled"]
            ratios.append(ratio)
            if g >= 1024:
                speedups.append(speed)
            cps = {k: n / v for k, v in times.items()}
            print(f"{name:11} {g:5d} {n:5d} {cps['bare']:9.2f} " + " ".join(f"{cps[k]:20.2f}" for k in runners)
                  + f" {ratio:10.2f} {speed:12.1f}")
    print(f"tdiff / bare per case: median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x")
    if speedups:
        print(f"sampling on 1024-program grids: {min(speedups):.1f}x to {max(speedups):.1f}x faster than full")
    for r in runners.values():
        r.executor.close()


if __name__ == "__main__":
    main()
