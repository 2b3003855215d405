"""A check's boundary plan, kept between runs: the plan is a pure function of the check's declaration, tdiff's
source, the versions that draw values and the plan's own parameters (rows, least, seed), so a run builds it once
and later runs load it from the run directory (`<run dir>/plans/`, never committed: `prepare_run_dir`).

A stored plan is used only where its key matches (`key`: those inputs hashed) and where its choice sequences,
replayed through the check's strategy as it is now, draw the very cases the plan drew (`Case.digest`); else the
plan is built again and stored over it. A plan is seeded by the check's id (or `--tdiff-seed`) in every profile
(`tdiff.drive.search.planned`), so every run finds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

#: where a run directory keeps its plans
FOLDER = "plans"
#: the stored file's format; another is rebuilt
FORMAT = 1
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")


@functools.lru_cache(maxsize=1)
def _tdiff_source() -> str:
    """A digest of tdiff's own source (every module: an edited strategy or plan builder is a new plan)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=256)
def _folder_source(folder: str) -> str:
    """A digest of the Python files beside a declaration (the helpers its strategies may come from)."""
    h = hashlib.sha256()
    for f in sorted(Path(folder).glob("*.py")):
        h.update(f.name.encode())
        with contextlib.suppress(OSError):
            h.update(f.read_bytes())
    return h.hexdigest()


def _source_files(check: Any) -> set[str]:
    """The files that declare the check, its kernel, launch and reference."""
    import inspect

    from ..core.kernels import jit_function

    files = {check.file} if check.file else set()
    for obj in (jit_function(check.kernel).fn, check.launch, check.reference):
        with contextlib.suppress(TypeError, OSError):
            if obj is not None and (f := inspect.getsourcefile(obj)):
                files.add(f)
    return {str(Path(f).resolve()) for f in files}


def _versions() -> str:
    import hypothesis
    import numpy
    import torch
    import triton

    import tdiff

    return (f"tdiff {tdiff.__version__}, hypothesis {hypothesis.__version__}, numpy {numpy.__version__}, "
            f"torch {torch.__version__}, triton {triton.__version__}, python {sys.version_info[:2]}")


def key(check: Any, params: tuple) -> str:
    """The plan's key: the check's declaration (its id, the source files around it, its strategies as they print,
    the kernel's source and configs), tdiff's source, the versions that draw values, and `params` (what else
    shapes the plan: rows, least, seed, thresholds)."""
    from ..core.kernels import configs, jit_function

    h = hashlib.sha256(f"plan {FORMAT}|{_versions()}|{_tdiff_source()}|{check.id}|{params!r}".encode())
    for f in sorted(_source_files(check)):
        h.update(f.encode())
        with contextlib.suppress(OSError):
            h.update(Path(f).read_bytes())
        h.update(_folder_source(str(Path(f).parent)).encode())
    h.update(jit_function(check.kernel).src.encode())
    declared = (check.strategies, check.dims, check.inputs, check.configs, check.max_examples,
                [repr(c) for c in configs(check.kernel)])
    h.update(_ADDRESS.sub("", repr(declared)).encode())
    return h.hexdigest()[:32]


def _path(run_dir: Path | None, plan_key: str) -> Path | None:
    return None if run_dir is None else Path(run_dir) / FOLDER / f"{plan_key}.json"


def replay(strategy: Any, choices: tuple) -> Any:
    """What `strategy` draws from `choices` exactly (as hypothesis's reuse phase would), or None where they no
    longer fit it."""
    from hypothesis.control import BuildContext
    from hypothesis.errors import StopTest, UnsatisfiedAssumption
    from hypothesis.internal.conjecture.data import ConjectureData

    from ..generate.plan.build import _build_context

    data = ConjectureData.for_choices(choices)
    try:
        with _build_context(BuildContext, data):
            value = data.draw(strategy)
        data.freeze()
    except (StopTest, UnsatisfiedAssumption):
        return None
    if getattr(data, "misaligned_at", None) is not None or data.status.name != "VALID":
        return None
    return value


def load(run_dir: Path | None, plan_key: str, strategy: Any) -> Any:
    """The stored plan under `plan_key` (a `Plan`, its cases replayed), or None: none stored, unreadable, or
    its cases no longer the ones its choices draw."""
    from hypothesis.database import choices_from_bytes

    from ..generate.plan.build import Coverage, Plan

    path = _path(run_dir, plan_key)
    if path is None or not path.exists():
        return None
    try:
        stored = json.loads(path.read_text())
        if stored.get("format") != FORMAT or stored.get("key") != plan_key:
            return None
        parsed = [choices_from_bytes(bytes.fromhex(c)) for c in stored["choices"]]
        choices: list[tuple[Any, ...]] = [c for c in parsed if c is not None]
        if len(choices) != len(parsed):
            return None
        coverage = Coverage(**stored["coverage"])
        cases = []
        for c, digest in zip(choices, stored["digests"], strict=True):
            case = replay(strategy, c)
            if case is None or _digest(case) != digest:
                return None
            cases.append(case)
    except Exception:  # noqa: BLE001 - a stored plan that cannot be read is built again
        return None
    return Plan(list(choices), coverage, cases)


def _digest(case: Any) -> str:
    return case.digest() if hasattr(case, "digest") else hashlib.sha256(repr(case).encode()).hexdigest()[:16]


def store(run_dir: Path | None, plan_key: str, plan: Any) -> bool:
    """Keep `plan` under `plan_key` in the run directory (written whole, then renamed: workers may race)."""
    from hypothesis.database import choices_to_bytes

    from ..core.settings import prepare_run_dir

    path = _path(run_dir, plan_key)
    if path is None:
        return False
    try:
        prepare_run_dir(run_dir, path.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"format": FORMAT, "key": plan_key,
                           "choices": [choices_to_bytes(c).hex() for c in plan.choices],
                           "digests": [_digest(c) for c in plan.cases],
                           "coverage": dataclasses.asdict(plan.coverage)})
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        return False
    return True
