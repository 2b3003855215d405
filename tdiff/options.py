"""The run's options as users write them (pytest `--tdiff-*` flags and `tdiff_*` ini keys, the `tdiff` CLI):
one table (`OPTIONS`, in `tdiff.core.option_table`: name, type, choices, default, help, the `RunOptions` field
it sets), from which the pytest plugin registers its flags and ini keys and the CLI its arguments, and by which
every value is checked, in one place (`RunOptions` checks its fields by the same table); `build` turns the
values given into `RunOptions`."""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .core.option_table import BY_FIELD, BY_NAME, ON_OFF, OPTIONS, PROFILES, Option, parse_shard
from .core.settings import RUN_DIR, TRACKED_CORPUS, RunOptions

# (the table lives in tdiff.core.option_table, where RunOptions reads it too; its names stay importable here)
__all__ = ["BY_FIELD", "BY_NAME", "ON_OFF", "OPTIONS", "PROFILES", "Option", "add_arguments", "build",
           "flag_type", "ini_key", "register", "split_backends", "value"]


def flag_type(o: Option, flag: str | None = None) -> Callable[[str], str]:
    """The argparse type of option `o`'s flag (`flag`, else `--tdiff-NAME`): `raw` unchanged once `Option.parse`
    accepts it, else an `argparse.ArgumentTypeError` with its message (argparse reports it)."""
    def check(raw: str) -> str:
        try:
            o.parse(raw, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return raw

    return check


def ini_key(name: str) -> str:
    return f"tdiff_{name.replace('-', '_')}"


def register(add_flag: Callable[..., Any], add_ini: Callable[..., Any]) -> None:
    """Register every option (and each old name, marked deprecated) as a flag and an ini key: `add_flag` and
    `add_ini` take pytest's `addoption` and `addini` arguments."""
    for o in OPTIONS:
        add_flag(o.flag, dest=ini_key(o.name), default=None, type=flag_type(o), metavar=o.metavar, help=o.describe())
        add_ini(ini_key(o.name), o.describe(), default=None)
        for old in o.aliases:
            text = f"deprecated: the old name of {o.flag}, which it sets"
            add_flag(f"--tdiff-{old}", dest=ini_key(old), default=None, type=flag_type(o), metavar=o.metavar, help=text)
            add_ini(ini_key(old), text, default=None)


def add_arguments(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """Add the named options to a CLI parser as `--NAME` (no `tdiff-` prefix), checked as pytest checks them."""
    for name in names:
        o = BY_NAME[name]
        parser.add_argument(f"--{name}", dest=name.replace("-", "_"), default=None, metavar=o.metavar,
                            type=flag_type(o, f"--{name}"), help=o.describe())


def value(get: Callable[[str], Any], name: str) -> Any:
    """The value given for option `name` (`get(name)`: as written, None when not given), parsed; None when not
    given. An old name's value counts where the new one is not given, with a deprecation warning."""
    o = BY_NAME[name]
    raw = get(name)
    for old in o.aliases:
        if raw in (None, "", []) and get(old) not in (None, "", []):
            raw = get(old)
            warnings.warn(f"--tdiff-{old} (ini {ini_key(old)}) is deprecated: it is now {o.flag} "
                          f"(ini {ini_key(o.name)})", FutureWarning, stacklevel=3)
    return None if raw in (None, "", []) else o.parse(raw)


def split_backends(text: str) -> tuple[str, ...]:
    """`compiled,compiled[num_warps=2,num_stages=1]` -> its backends (commas inside [...] stay)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return tuple(p.strip() for p in parts if p.strip())


def build(get: Callable[[str], Any], root: Path, gpu: int | None = None) -> RunOptions:
    """`RunOptions` from raw option values: `get(name)` returns the value given for an option of
    `OPTIONS` (None when not given). Raises ValueError with a message a user can act on.

    Paths are relative to `root`. New corpus entries go to `<run dir>/corpus`, which is replayed first; the
    corpora named by `corpus` (default: the tracked `corpus`) are replayed after it and never written."""
    given = {o.name: value(get, o.name) for o in OPTIONS if o.field is not None}
    if str(given.get("run-dir") or "").lower() == "none":
        raise ValueError("--tdiff-run-dir must be a directory (new corpus entries and progress go there)")
    run_dir = root / (given.get("run-dir") or RUN_DIR)
    changes: dict[str, Any] = {"run_dir": run_dir, "repro_dir": run_dir / "repro", "corpus_dir": run_dir / "corpus",
                               "corpus_more": (root / TRACKED_CORPUS,)}
    for name, v in given.items():
        field = BY_NAME[name].field
        if v is None or field == "run_dir":
            continue
        if field == "backends":
            v = _backends(v)
        elif field == "corpus_dir":
            named = [p.strip() for p in v.split(os.pathsep) if p.strip()] or ["none"]
            if any(p.lower() == "none" for p in named):
                changes["corpus_more"], v = (), None
            else:
                changes["corpus_more"], v = tuple(root / p for p in named), run_dir / "corpus"
        elif field == "repro_dir":
            v = None if v.lower() == "none" else root / v
        elif field == "database":
            from .drive.database import open_database

            v = open_database(v, root)
        elif field == "shard":
            v = parse_shard(v)
        elif field == "campaign_dir":
            v = root / v
        changes[field] = v  # type: ignore[index]  # (options a user gives set a field: BY_NAME's others are none)
    if gpu is not None:
        changes["gpu"] = gpu
    return RunOptions(**changes)


def _backends(value: str) -> tuple[Any, ...]:
    """The backends of `--tdiff-backends`, parsed once into `BackendSpec`s (a ValueError names a bad one; another
    environment's Python is probed)."""
    parts = split_backends(value)
    if not parts:
        raise ValueError(f"--tdiff-backends names no backend: {value!r}")
    from .core.backend_spec import parse_all
    from .execute.environments import probe

    try:
        specs = parse_all(parts)  # a ValueError names the bad one
    except ValueError as exc:
        raise ValueError(f"--tdiff-backends: {exc}") from None
    for p, spec in zip(parts, specs):
        if spec.python:
            try:
                probe(spec.python)
            except ValueError as exc:
                raise ValueError(f"--tdiff-backends {p!r}: {exc}") from None
    return specs
