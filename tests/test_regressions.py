"""Problems tdiff had on real library kernels (liger-kernel, FlagGems), each a standalone script
that reproduced it; each must now exit 0. The script's docstring says what the problem was."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted(p for p in (Path(__file__).parent / "regressions").glob("*.py") if p.name != "conftest.py")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_problem_stays_fixed(script):
    if "compiled" in script.stem:
        import torch

        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA GPU")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if "compiled" not in script.stem:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the scripts reproduce what the CPU path did (their launches allocate on CPU)
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=str(ROOT), env=env,
                         timeout=600)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
