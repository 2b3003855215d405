"""Loader for FlagGems (flag-gems 5.0.2): imports it, with stand-ins for its GPU queries on CPU machines only.

`from suites.flaggems._gems import gems` gives the `flag_gems` package; when FlagGems (or one of its
import-time dependencies, pyyaml and sqlalchemy) is missing, the importing module is skipped with the
reason (`pytest.importorskip`).

On a machine where `torch.cuda.is_available()` is True FlagGems is imported untouched: nothing
below is installed.

On a CPU machine FlagGems cannot be imported as it is: at import it detects the vendor by running
each vendor's query command (`nvidia-smi`, ...) and raises "No device were detected on your
machine" when none succeeds, names its tuning database after `torch.cuda.get_device_name()`, and
sizes its `LibEntry` kernel caches by `torch.cuda.device_count()` (0 on CPU: every `LibEntry` launch
would then fail with an IndexError). At launch time `LibEntry.run` calls
`torch.cuda.current_device()` and some heuristics call `torch.cuda.get_device_properties(...)`
(`multi_processor_count`), which raise on a CPU build of torch. So, on CPU machines only, this
module

1. sets the environment variable `GEMS_VENDOR=nvidia` *during the import of flag_gems only*
   (FlagGems' own vendor override; restored afterwards): FlagGems takes its NVIDIA code paths,
   configs and heuristics, the ones our GPU machine runs, without running vendor query commands;
2. replaces five functions of `torch.cuda` for the life of the process (each of them raises on a
   CPU machine, so only callers that would otherwise fail see a difference; `torch.cuda.is_available()`
   is left alone and still answers False, which is what tdiff and FlagGems' arch detection read):
   - `device_count()` -> 1
   - `current_device()` -> 0
   - `get_device_name(device=None)` -> "tdiff-cpu-stand-in"
   - `get_device_capability(device=None)` -> (9, 0)
   - `get_device_properties(device=None)` -> a namespace describing an H100 SXM (the GPU machine):
     name, major=9, minor=0, multi_processor_count=132, total_memory=80 GiB, L2_cache_size=50 MiB
     (132 SMs: FlagGems' heuristics, e.g. softmax's TILE_K, then pick what they pick on the H100)
   and marks `torch.cuda._tdiff_flaggems_stand_ins = True` so a second import installs nothing.

Nothing else is changed: FlagGems writes its caches where it always does (`~/.flaggems`, or
`FLAGGEMS_CACHE_DIR`: generated pointwise code, a tuning database named after the stand-in device).

Because `is_available()` stays False, FlagGems loads no arch-specific (hopper/ampere) overrides on CPU;
the kernels tested here are the generic ones in `flag_gems.ops`, which the suites name directly.

tdiff's worker processes import the module that declares a check, which imports this loader, so the
stand-ins apply there too.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

STAND_IN_NAME = "tdiff-cpu-stand-in"

#: True when this process runs FlagGems with the stand-ins above (a CPU machine)
STUBBED = False


def _props(device=None):
    return SimpleNamespace(
        name=STAND_IN_NAME,
        major=9,
        minor=0,
        multi_processor_count=132,
        total_memory=80 * 1024**3,
        L2_cache_size=50 * 1024**2,
        is_integrated=False,
        is_multi_gpu_board=False,
    )


def _install_cpu_stand_ins() -> None:
    global STUBBED
    if getattr(torch.cuda, "_tdiff_flaggems_stand_ins", False):
        STUBBED = True
        return
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_name = lambda device=None: STAND_IN_NAME
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    torch.cuda.get_device_properties = _props
    torch.cuda._tdiff_flaggems_stand_ins = True
    STUBBED = True


def _import():
    pytest.importorskip("yaml", reason="FlagGems needs pyyaml at import")
    pytest.importorskip("sqlalchemy", reason="FlagGems needs sqlalchemy at import")
    if torch.cuda.is_available():
        return pytest.importorskip("flag_gems")
    _install_cpu_stand_ins()
    saved = os.environ.get("GEMS_VENDOR")
    os.environ["GEMS_VENDOR"] = "nvidia"
    try:
        return pytest.importorskip("flag_gems")
    finally:
        if saved is None:
            os.environ.pop("GEMS_VENDOR", None)
        else:
            os.environ["GEMS_VENDOR"] = saved


gems = _import()


def module(name: str):
    """A FlagGems module by its dotted name, imported after the stand-ins above (suites import
    nothing from flag_gems directly, so that no import reaches it before this loader)."""
    import importlib

    return importlib.import_module(name)


def op(name: str):
    """The module `flag_gems.ops.<name>` (the package's `__init__` re-exports functions under the same
    names as its modules, so `flag_gems.ops.softmax` is the function, not the module)."""
    return module(f"flag_gems.ops.{name}")


def pointwise_kernel(fn, ndim: int):
    """The kernel FlagGems generates for the pointwise op `fn` (a `PointwiseDynamicFunction`) at rank
    `ndim`: `<name>_kernel_rank_<ndim>`, a LibEntry around a @triton.jit function, found in the module
    FlagGems writes to its code cache and loads (the same object its generated wrapper launches)."""
    wrapper = fn.instantiate(ndim)
    return wrapper.__globals__[f"{fn._scalar_fn.__name__}_kernel_rank_{ndim}"]
