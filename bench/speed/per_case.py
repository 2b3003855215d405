"""Cases per second: a bare hand-written loop against tdiff, on the same cases, in one run.

    python -m bench.speed.per_case                 # every kernel and grid; prints a table and ratios
    python -m bench.speed.per_case --quick         # fewer cases (for a smoke run)

The bare loop builds the inputs, launches the kernel compiled (where a GPU is present),
launches it in Triton's interpreter (its own InterpretedFunction, inside tdiff's selective
interpretation scope, since Triton alone cannot interpret next to compiling), and compares with
torch.allclose. Without a GPU both sides compare the interpreter with the kernel's reference.
tdiff runs the same cases as `pytest --tdiff` judges them (`CaseJudge.verdict`): every opinion
(the reference too), guard bands, instrumented interpreter, storage-by-storage comparison, worker
processes, every program of the grid. Columns: `bare` (Triton's own interpreter, program by program),
`tdiff` (its interpreter in batches, the default), `1-by-1` (tdiff with `interpreter:sequential`, the
whole grid), `sampled` (one by one, a sample of large grids: the default before batches). Ratios are
tdiff time / bare time, and 1-by-1 time / tdiff time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from typing import Any

import numpy as np
import torch
import triton
from triton.runtime.interpreter import InterpretedFunction

import tdiff
from suites import matmul, softmax, vector_add
from tdiff.core import kernels
from tdiff.core.case import Case
from tdiff.drive.runner import Runner
from tdiff.execute.interpreter.scope import interpreting
from tdiff.strategies import tensor_arg

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


_interpreted: dict[Any, InterpretedFunction] = {}


def bare_case(check, case: Case) -> None:
    """The hand-written loop's body for one case."""
    jit = kernels.jit_function(check.kernel)
    interp = _interpreted.get(jit)
    if interp is None:
        interp = _interpreted[jit] = InterpretedFunction(jit.fn)
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


_judges: dict[tuple[int, str], Any] = {}


def tdiff_case(runner: Runner, check, case: Case) -> None:
    """One case as `pytest --tdiff` judges it: every opinion of the check on this machine (the
    reference too, where declared), the comparison of every pair, and the verdict."""
    key = (id(runner), check.id)
    judge = _judges.get(key)
    if judge is None:
        judge = _judges[key] = runner.judge(check)
    verdict, _ = judge.verdict(case)
    assert not verdict.failed, str(verdict)


def measure(loops: dict[str, Any], cases: list[Case], rounds: int) -> dict[str, list[float]]:
    """Seconds each loop spent on all cases, per round; the loops take turns pass by pass, in an
    order that rotates, so the machine's drift hits every loop alike. (Turns case by case would
    make the bare loop's process and tdiff's GPU worker switch the GPU between them every case.)"""
    times: dict[str, list[float]] = {k: [] for k in loops}
    names = list(loops)
    for r in range(rounds):
        k0 = r % len(names)
        order = names[k0:] + names[:k0]
        for k in (order if r % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            for case in cases:
                loops[k](case)
            times[k].append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer rounds and cases")
    ap.add_argument("--grids", default="1,16,256,1024,4096")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--rounds", type=int, default=None, help="rounds on small grids (default 11, --quick 7)")
    args = ap.parse_args()
    grids = [int(g) for g in args.grids.split(",")]
    full = tdiff.RunOptions(isolation="process", corpus_dir=None, repro_dir=None, sample_size=0, timeout=900)
    seq = ("compiled", "interpreter:sequential") if GPU else ("interpreter:sequential",)
    sampled = full.with_(sample_size=8, sample_threshold=64, backends=seq)
    runners = {"tdiff": Runner(full), "one-by-one": Runner(full.with_(backends=seq)), "sampled": Runner(sampled)}
    compared = runners["tdiff"].new_result(tdiff.checks_of(KERNELS[args.kernels.split(",")[0]])[0]).compared
    print(f"device: {torch.cuda.get_device_name() if GPU else 'CPU only'}; tdiff compares: {compared}; "
          f"triton {triton.__version__}, torch {torch.__version__}, numpy {np.__version__}")
    print("each row: the same cases through every loop, taking turns pass by pass; c/s from the median round;")
    print("tdiff/bare is the median of the per-round ratios, with their middle half (quartiles) on small grids")
    print(f"{'kernel':11} {'grid':>5} {'cases':>5} {'rounds':>6} {'bare c/s':>9} {'tdiff c/s':>10} "
          f"{'1-by-1 c/s':>11} {'sampled c/s':>11} {'tdiff/bare':>10} {'quartiles':>11} {'1-by-1/tdiff':>12}")
    ratios, speedups = [], []
    for name in args.kernels.split(","):
        check = tdiff.checks_of(KERNELS[name])[0]
        for g in grids:
            warm = make_cases(name, g, 2)
            bare_case(check, warm[0])  # warm: compile, first interpretation
            t0 = time.perf_counter()
            bare_case(check, warm[1])
            one = time.perf_counter() - t0
            for r in runners.values():
                tdiff_case(r, check, warm[0])
            big = g >= 256
            # small grids: enough cases for a pass of ~0.3 s; large ones: a single case
            n = 1 if big else max(2, min(60, int(0.3 / max(one, 1e-4))))
            rounds = 2 if big else (args.rounds or (7 if args.quick else 11))
            cases = make_cases(name, g, n)
            loops = {"bare": partial(bare_case, check),
                     "tdiff": partial(tdiff_case, runners["tdiff"], check),
                     "one-by-one": partial(tdiff_case, runners["one-by-one"], check)}
            if g > sampled.sample_threshold:
                loops["sampled"] = partial(tdiff_case, runners["sampled"], check)
            times = measure(loops, cases, rounds)
            per_round = [t / b for t, b in zip(times["tdiff"], times["bare"])]
            ratio = statistics.median(per_round)
            ratios.append(ratio)
            q = statistics.quantiles(per_round, n=4) if len(per_round) >= 4 else None
            spread = f"{q[0]:.2f}-{q[2]:.2f}" if q else ""
            cps = {k: n / statistics.median(v) for k, v in times.items()}
            sp = statistics.median(o / t for o, t in zip(times["one-by-one"], times["tdiff"]))
            speedups.append((name, g, sp, 1 / ratio))
            c = {k: f"{cps[k]:.2f}" if k in cps else "-" for k in ("bare", "tdiff", "one-by-one", "sampled")}
            print(f"{name:11} {g:5d} {n:5d} {rounds:6d} {c['bare']:>9} {c['tdiff']:>10} {c['one-by-one']:>11} "
                  f"{c['sampled']:>11} {ratio:10.2f} {spread:>11} {sp:12.1f}", flush=True)
    print(f"tdiff / bare per case: median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x "
          f"over {len(ratios)} rows")
    for name, g, sp, vs_bare in speedups:
        if g >= 1024:
            print(f"{name} on {g} programs: batches {sp:.1f}x faster than one by one; tdiff {vs_bare:.1f}x the "
                  "speed of the bare loop on Triton's interpreter")
    for r in runners.values():
        r.executor.close()


if __name__ == "__main__":
    main()
