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


def device_count() -> int:
    """CUDA GPUs visible to this process (0 without a CUDA build of torch or a driver)."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "cuda"):
        try:
            return torch.cuda.device_count() if torch.cuda.is_available() else 0
        except Exception:
            return 0
    return _probe(os.environ.get("CUDA_VISIBLE_DEVICES"))


@lru_cache(maxsize=8)
def _probe(visible: str | None) -> int:
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    if not torch_has_cuda():
        return 0
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return int(count.value)
    except (OSError, AttributeError):
        return 0


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
