"""Other Python environments as lanes: `interpreter@/path/to/venv/bin/python` runs a backend in a
worker started with that Python (another Triton, torch or numpy), so one run compares a kernel
under two versions. The worker imports this checkout of tdiff and the check's modules from their
paths; everything else (triton, torch, numpy, hypothesis, and what the check modules import, such
as pytest) comes from its own environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from ..core.backend_spec import check_exists

#: what a worker in another environment must import, and the versions a report names
_PROBE = ("import json, sys, platform; import numpy, torch, triton, hypothesis; "
          "print(json.dumps({'python': platform.python_version(), 'triton': triton.__version__, "
          "'torch': torch.__version__.split('+')[0], 'numpy': numpy.__version__}))")


def versions_here() -> str:
    """This process's versions, as `describe` writes them."""
    import platform

    import numpy
    import torch
    import triton

    return describe({"python": platform.python_version(), "triton": triton.__version__,
                     "torch": torch.__version__.split("+")[0], "numpy": numpy.__version__})


def describe(v: dict[str, str]) -> str:
    return f"triton {v['triton']}, torch {v['torch']}, numpy {v['numpy']}, python {v['python']}"


@lru_cache(maxsize=16)
def probe(python: str) -> str:
    """The versions of another environment's Python; a ValueError naming it if it cannot run tdiff's
    worker (no triton, torch, numpy or hypothesis there)."""
    check_exists(python, f"@{python}")
    try:
        ran = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                             env=_clean_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"backend lane @{python}: could not start it ({exc})") from None
    if ran.returncode != 0:
        last = (ran.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ValueError(f"backend lane @{python}: its Python cannot import triton, torch, numpy and "
                         f"hypothesis, which a tdiff worker needs there: {last}")
    return describe(json.loads(ran.stdout.strip().splitlines()[-1]))


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONHOME", "TRITON_INTERPRET"):
        env.pop(k, None)
    return env


def sys_path_for_other() -> list[str]:
    """The paths a worker in another environment takes from this process: this checkout of tdiff and
    the directories of user code (the test roots, the suites), never this environment's packages or
    standard library."""
    ours = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    out = [str(Path(__file__).resolve().parents[2])]  # tdiff/execute/environments.py -> the checkout
    for p in sys.path:
        if not p:
            continue
        rp = Path(p).resolve()
        if any(rp == o or o in rp.parents for o in ours) or "site-packages" in rp.parts or "dist-packages" in rp.parts:
            continue
        if rp.suffix == ".zip" or str(rp) in out:
            continue
        out.append(str(rp))
    return out
