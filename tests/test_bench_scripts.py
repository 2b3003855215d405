"""The benchmark scripts still run against today's tdiff (a smoke run each, tiny sizes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_bench_runs_a_row():
    r = _run("bench/bench.py", "--quick", "--grids", "1", "--kernels", "vector_add", "--rounds", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tdiff compares:" in r.stdout and "tdiff / bare per case: median" in r.stdout


def test_power_runs_one_mutant(tmp_path):
    out = tmp_path / "power.md"
    r = _run("bench/power.py", "--seeds", "1", "--only", "vector_add_mask_le", "--fa-examples", "5", "--fa-seeds", "1",
             "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vector_add_mask_le" in out.read_text()
