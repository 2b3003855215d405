"""What one Triton compile costs on this machine, stage by stage: liger-kernel's RMSNorm forward compiled for an
H100 (sm_90) in 24 specializations (block sizes and casting modes), with each stage of Triton's CUDA backend timed.
No GPU needed: the last stage is ptxas.

    python -m bench.speed.compile_stages
"""

from __future__ import annotations

import os
import tempfile
import time

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tdiff-stages-")

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import CUDABackend  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

TIMES: dict[str, float] = {}
_add_stages = CUDABackend.add_stages


def _timed_stages(self, stages, options, *rest):  # type: ignore[no-untyped-def]
    _add_stages(self, stages, options, *rest)
    for name, fn in list(stages.items()):
        def timed(src, metadata, fn=fn, name=name):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            try:
                return fn(src, metadata)
            finally:
                TIMES[name] = TIMES.get(name, 0.0) + time.perf_counter() - t0
        stages[name] = timed


CUDABackend.add_stages = _timed_stages


def main() -> None:
    from liger_kernel.ops import rms_norm

    fn = rms_norm._rms_norm_forward_kernel
    names = fn.arg_names
    target = GPUTarget("cuda", 90, 32)
    total, n = 0.0, 0
    for block in (16, 32, 64, 128, 256, 512, 1024, 2048):
        for mode in (-1, 0, 1):
            sig = {a: "i32" for a in names}
            sig.update({a: "*fp32" for a in ("Y_ptr", "X_ptr", "W_ptr", "RSTD_ptr")}, eps="fp32", offset="fp32")
            const = {"casting_mode": mode, "elementwise_affine": True, "BLOCK_SIZE": block}
            sig.update({a: "constexpr" for a in const})
            src = ASTSource(fn, sig, {(names.index(a),): v for a, v in const.items()}, {})
            t0 = time.perf_counter()
            triton.compile(src, target=target)
            total += time.perf_counter() - t0
            n += 1
    staged = sum(TIMES.values())
    print(f"triton {triton.__version__}: {n} compiles in {total:.2f} s ({1e3 * total / n:.0f} ms each)")
    print("per compile: " + ", ".join(f"{k} {1e3 * v / n:.0f} ms" for k, v in TIMES.items())
          + f", the rest (frontend, cache files) {1e3 * (total - staged) / n:.0f} ms")


if __name__ == "__main__":
    main()
