"""How many CUDA GPUs this process can use, answered without importing torch when it is not loaded.

pytest loads tdiff's plugin in every run, and the xdist controller and the early worker start
need this answer before anything imports torch (seconds, on CUDA builds). When torch is loaded
its answer is used; otherwise torch's build is read from `torch/version.py` and the CUDA driver
is asked directly (`cuInit`, `cuDeviceGetCount`, which honour CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import sys
from functools import lru_cache
from pathlib import Path


class GPUError(RuntimeError):
    """A CUDA driver is installed but unusable: tdiff will not quietly run without the GPU."""


CUDA_NO_DEVICE = 100
_CUDA_ERRORS = {3: "not initialized", 35: "insufficient driver", 46: "devices unavailable",
                100: "no device", 101: "invalid device", 802: "system not ready",
                803: "system driver mismatch", 804: "compat not supported on device", 999: "unknown"}


def device_count() -> int:
    """CUDA GPUs visible to this process: 0 without a CUDA build of torch, without a driver, or with
    CUDA_VISIBLE_DEVICES empty. Raises `GPUError` where a driver is present but fails."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "cuda") and torch.cuda.is_available():
        return torch.cuda.device_count()
    return _probe(visible)


@lru_cache(maxsize=8)
def _probe(visible: str | None) -> int:
    if not torch_has_cuda():
        return 0
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0  # a CUDA build of torch on a machine without a GPU driver
    count = ctypes.c_int(0)
    err = lib.cuInit(0)
    if err == CUDA_NO_DEVICE:
        return 0
    if err == 0:
        err = lib.cuDeviceGetCount(ctypes.byref(count))
    if err != 0:
        raise GPUError(f"a CUDA driver is installed but unusable (cuInit/cuDeviceGetCount: error {err}, "
                       f"{_CUDA_ERRORS.get(err, 'see cudaError_enum')}): fix the install, or set "
                       "CUDA_VISIBLE_DEVICES= to run without the GPU")
    return int(count.value)


def torch_has_cuda() -> bool:
    """Whether the installed torch is a CUDA build, read from torch/version.py without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    try:
        text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
    except OSError:
        return False
    m = re.search(r"^cuda\b[^=\n]*=\s*(.+)$", text, re.M)
    return m is not None and m.group(1).strip() not in ("None", "''", '""')


def gpu_for_worker(worker: int) -> int | None:
    """The GPU an xdist worker (gw<worker>) is pinned to, round-robin, without initializing CUDA here;
    None without GPUs."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip()]
        return int(ids[worker % len(ids)]) if ids and all(i.strip().isdigit() for i in ids) else None
    n = device_count()
    return worker % n if n else None
