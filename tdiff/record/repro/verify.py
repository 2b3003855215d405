"""Keeping a reproducer: write it (and its sidecar) and, before keeping it, run it in a fresh process and
check it shows the same kind of divergence on the same targets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ...core.case import Case
from ...core.outcome import Outcome
from ...execute.forkserver import run_script
from ...judge.evidence import Evidence
from ...judge.verdict import Verdict
from .errors import MARK, ReproError
from .render import render


def verify(folder: Path, verdict: Verdict, timeout: float) -> None:
    """Run the reproducer in a fresh process (`python repro.py`, forked after the imports: `run_script`); raise
    unless it shows the same kind of divergence on the same targets."""
    try:
        proc = run_script(["repro.py"], folder, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ReproError(f"it did not finish in {timeout:.0f} s in a fresh process") from None
    tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-6:])
    shown = []
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            try:
                shown.append(json.loads(line[len(MARK):].strip()))
            except ValueError:
                continue
    want = {"guard": "oob"}.get(verdict.kind, verdict.kind)
    same = [s for s in shown if {"guard": "oob"}.get(s.get("kind"), s.get("kind")) == want
            and (not verdict.targets or not s.get("targets") or set(s["targets"]) & set(verdict.targets))]
    if proc.returncode != 1 or not same:
        raise ReproError(f"it did not show the same divergence ({verdict.kind}"
                         + (f" in {', '.join(verdict.targets)}" if verdict.targets else "")
                         + f") in a fresh process (exit {proc.returncode}): {tail}")


def write(folder: Path, check: Any, case: Case, verdict: Verdict, ev: Evidence, validate: bool = True,
          timeout: float = 600.0, dry: Outcome | None = None, case_timeout: float = 60.0, reduced: str = "") -> Path:
    """Write `folder/repro.py` (and `inputs.npz`); with `validate`, keep it only if it reproduces. `reduced`: the
    check carries a reduced kernel; a comment above it (see `render`)."""
    text, sidecar = render(check, case, verdict, ev, dry, case_timeout, reduced)
    folder = Path(folder)
    if (folder / "repro.py").exists():  # the same case, already written (e.g. by another worker)
        return folder / "repro.py"
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        (tmp / "repro.py").write_text(text)
        if sidecar:
            np.savez(tmp / "inputs.npz", **sidecar)  # type: ignore[arg-type]  # numpy's stubs let **kwds feed allow_pickle
        if validate:
            verify(tmp, verdict, timeout)
        if folder.exists():  # (pictures of an earlier run): add the files
            for f in tmp.iterdir():
                if not (folder / f.name).exists():
                    os.replace(f, folder / f.name)
        else:
            try:
                os.rename(tmp, folder)
            except OSError:
                if not (folder / "repro.py").exists():
                    raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder / "repro.py"
