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
    r = _run("-m", "bench.speed.per_case", "--quick", "--grids", "1", "--kernels", "vector_add", "--rounds", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tdiff compares:" in r.stdout and "tdiff / bare per case: median" in r.stdout


def test_power_runs_one_mutant(tmp_path):
    out = tmp_path / "power.md"
    r = _run("-m", "bench.power.power", "--seeds", "1", "--only", "vector_add_mask_le", "--fa-examples", "5",
             "--fa-seeds", "1", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vector_add_mask_le" in out.read_text()


def test_power_rope_finds_the_decode_bug_from_the_generic_declaration():
    r = _run("-m", "bench.power.rope", "--seeds", "1", "--examples", "10")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(the decode bug)" in r.stdout and "found in 1 of 1 seeds" in r.stdout


def test_reduce_runs_a_corpus_entry_and_counts_unchecked_reductions_as_not_reduced(tmp_path):
    out, rows = tmp_path / "reduce.md", tmp_path / "rows.json"
    r = _run("-m", "bench.reduce.reduce", "--no-mutants", "--only", "f32_to_f16_rtz", "--budget", "10",
             "--out", str(out), "--json", str(rows))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| f32_to_f16_rtz[tdiff] |" in out.read_text() and "4 -> 2 | 4 -> 2 |" in out.read_text()
    # (its helpers are functions: called here, not in a process of their own)
    from bench.reduce.reduce import statements, summary

    rows = [dict(name="a", kind="corpus", verdict="v", before=8, after=2, statements=(8, 2)),
            dict(name="b", kind="corpus", verdict="v", before=8, after=2, statements=(8, 2), unchecked=True)]
    text = summary(rows)
    assert text.startswith("1 of 2 entries that fail here (50%) reduced to at most a quarter"), text
    assert "1 reduced with the compiled verdict not rechecked (no GPU) count as not reduced" in text
    assert statements('def k(a):\n    """doc"""\n    x = 1\n') == 2  # (the def and `x = 1`; not the docstring)


def test_interpreter_reach_runs_liger_swiglu_and_tables_it(tmp_path, monkeypatch, capsys):
    import json

    import pytest

    pytest.importorskip("liger_kernel")
    out = tmp_path / "reach.json"
    r = _run("-m", "bench.reach.interpreter_reach", "--libraries", "liger-kernel", "--only", "ops.swiglu.",
             "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads(out.read_text())["results"]
    assert len(results) >= 6 and {x["status"] for x in results} == {"runs"}, results
    # (--table only reads the JSON: its command line run here, not in a process of its own)
    from bench.reach import interpreter_reach

    monkeypatch.setattr(sys, "argv", ["interpreter_reach", "--table", str(out)])
    interpreter_reach.main()
    table = capsys.readouterr().out
    assert f"| all: runs in tdiff's interpreter | {len(results)} / {len(results)} (100%) |" in table, table
