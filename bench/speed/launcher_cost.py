"""What Triton's C launchers cost on this machine (CUDA only): Triton builds one with the C compiler per kernel
signature, at a kernel's first launch (not in `triton.compile`), and caches it on disk. Builds `--n` launchers
of distinct signatures in a fresh cache directory and times each; with `--cache DIR`, also counts the launchers
and kernels a run left in that Triton cache directory.

    python -m bench.speed.launcher_cost [--n 8] [--cache /tmp/triton-cache-XXXX]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def count(cache: str) -> str:
    launchers = kernels = utils = 0
    for _, _, files in os.walk(cache):
        for f in files:
            if f.startswith("__triton_launcher"):
                launchers += 1
            elif f.startswith("cuda_utils"):
                utils += 1
            elif f.endswith(".cubin"):
                kernels += 1
    return f"{cache}: {kernels} kernels (cubin), {launchers} launchers, {utils} cuda_utils builds"


def build(n: int) -> str:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="launcher-cost-")
    from triton.backends.nvidia import driver as nv
    from triton.runtime.build import compile_module_from_src

    times = []
    for i in range(n):
        signature = {j: "*fp32" for j in range(i % 4 + 1)}
        signature.update({len(signature) + j: "i32" for j in range(i // 4 + 1)})
        src = nv.make_launcher({}, signature, [])
        t0 = time.perf_counter()
        compile_module_from_src(src=src, name="__triton_launcher", library_dirs=nv.library_dirs(),
                                include_dirs=nv.include_dirs, libraries=nv.libraries)
        times.append(time.perf_counter() - t0)
    return (f"{n} launchers built in {sum(times):.2f} s: median {1e3 * statistics.median(times):.0f} ms, "
            f"first {1e3 * times[0]:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--cache")
    args = ap.parse_args()
    if args.cache:
        print(count(args.cache))
    print(build(args.n))


if __name__ == "__main__":
    main()
