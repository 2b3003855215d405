"""The run's options as users write them (pytest `--tdiff-*` flags and `tdiff_*` ini keys, the CLI),
turned into `RunOptions` in one place."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .core.settings import PROFILES, RUN_DIR, TRACKED_CORPUS, RunOptions

#: (name, type, RunOptions field, help)
OPTIONS: list[tuple[str, type, str, str]] = [
    ("backends", str, "backends", "backends to run on every case, comma-separated, e.g. compiled,interpreter "
                                  "(default: compiled and interpreter with a GPU, the interpreter without; a "
                                  "check's reference always joins)"),
    ("profile", str, "profile", "hypothesis profile: ci (fast, derandomized), dev or thorough "
                                "(default: ci when CI is set)"),
    ("examples", int, "max_examples", "examples drawn per check (overrides the profile)"),
    ("seed", int, "seed", "hypothesis seed"),
    ("timeout", float, "timeout", "per-case timeout in seconds for each backend (default 60; after a hang, a "
                                  "check's later runs wait less)"),
    ("corpus", str, "corpus_dir", "corpora to replay (default: corpus, the one under version control); 'none' "
                                  "to neither replay nor write. Several, separated by "
                                  f"{os.pathsep!r}: all are replayed, each entry once. New entries go to the run "
                                  "directory's corpus (RUN_DIR/corpus, also replayed), never to these: "
                                  "`tdiff corpus promote ENTRY` moves a reviewed one"),
    ("repro-dir", str, "repro_dir", "where reproducers and pictures go (default: RUN_DIR/repro); 'none' to skip"),
    ("run-dir", str, "run_dir", "the run directory, outside version control (it holds a .gitignore of `*`): new "
                                "corpus entries, reproducers and progress files (default: .tdiff)"),
    ("isolation", str, "isolation", "process (workers; a crash or hang fails one case) or none (in this process; "
                                    "hangs are stopped by a watchdog on the main thread)"),
    ("shrink-budget", float, "shrink_budget", "seconds tdiff spends shrinking a divergence (default 60)"),
    ("compile-budget", float, "compile_budget", "compile seconds a check may spend on new combinations of "
                                                "specialization classes it has compiled before (new classes are "
                                                "always compiled); past it, such cases run without the compiled "
                                                "backend (default 30; 0: no limit)"),
    ("max-compiles", int, "max_compiles", "the same budget as a number of compiles (default 0: no limit)"),
    ("coverage", str, "coverage", "report (default: name the kernel lines no case ran) or require (such a check "
                                  "fails)"),
    ("precompile", int, "precompile", "compile workers that compile a search's specializations ahead of use, "
                                      "beside it, with a GPU (default 0: off; it did not pay on the suites, see "
                                      "the README's compile budget section)"),
    ("targeting", str, "targeting", "on (hypothesis climbs each case's largest difference over tolerance and the "
                                    "kernel lines it ran) or off (default; see the README's power table)"),
    ("thresholds", str, "thresholds", "on (default: size strategies also draw the sizes on the constants the kernel "
                                      "and its launch compare sizes with) or off"),
    ("plan", int, "plan", "cases per check planned before the random search to cover every pair of boundary "
                          "classes across its choice points (sizes, layouts, dtypes, value classes, integers "
                          "drawn inside user strategies) that it can (default: three quarters of the check's "
                          "examples; 0: none)"),
    ("localize", str, "localize", "on (name the compiler pass after which a `compiled wrong` case goes wrong: "
                                  "MLIR's per-pass dumps bisected on the GPU, confirmed by leaving the pass out; "
                                  "README: Check a compiler change) or off (default)"),
    ("database", str, "database", "hypothesis example database shared by processes and machines: a directory "
                                  "(e.g. on shared storage) or redis://host:port/db (needs the redis package); "
                                  "with --tdiff-fuzz-targets it becomes the session's default database, the one "
                                  "HypoFuzz uses"),
    ("shard", str, "shard", "K/N: run only the checks of shard K of N (each check's shard is a stable hash of "
                            "its id), one per CI job"),
    ("campaign", str, "campaign_dir", "directory where fuzz targets record the campaign (one JSON-lines file per "
                                      "process); tdiff campaign DIR makes the table"),
    ("whole-grid", int, "batched_threshold", "grids of up to this many programs are interpreted whole, the programs "
                                             "in batches (default 4096); larger grids are sampled (as every grid "
                                             "over 64 programs is with the backend interpreter:sequential)"),
]

#: options of the pytest plugin alone (its output), not of `RunOptions`: (name, help)
PLUGIN_OPTIONS: list[tuple[str, str]] = [
    ("json", "write every check's record (what it ran, its pytest outcome, caveats, divergences) and the run's "
             "totals to this JSON file"),
    ("summary", "short (default: pytest's outcome lines, one block per check that did not pass, the totals and "
                "one table of what was worked around or caveated) or full (also every check's own lines, as -v)"),
    ("progress", "seconds between progress lines of a check still running (default: 10 with -v, 30 without; "
                 "0: none)"),
]


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
    changes: dict[str, Any] = {}
    given = {name: get(name) for name, *_ in OPTIONS}
    given = {k: v for k, v in given.items() if v not in (None, "", [])}
    run_dir = root / str(given.get("run-dir") or RUN_DIR)
    if str(given.get("run-dir", "")).lower() == "none":
        raise ValueError("--tdiff-run-dir must be a directory (new corpus entries and progress go there)")
    changes["run_dir"] = run_dir
    changes["repro_dir"] = run_dir / "repro"
    changes["corpus_dir"], changes["corpus_more"] = run_dir / "corpus", (root / TRACKED_CORPUS,)
    for name, typ, field, _ in OPTIONS:
        if name not in given or field == "run_dir":
            continue
        raw = given[name]
        try:
            value = typ(raw)
        except (TypeError, ValueError):
            raise ValueError(f"--tdiff-{name} must be a {typ.__name__}, not {raw!r}") from None
        if field == "backends":
            value = _backends(value)
        elif field in ("targeting", "thresholds", "localize"):
            if value not in ("on", "off"):
                raise ValueError(f"--tdiff-{name} must be on or off, not {value!r}")
            value = value == "on"
        elif field == "corpus_dir":
            named = [p.strip() for p in value.split(os.pathsep) if p.strip()] or ["none"]
            if any(p.lower() == "none" for p in named):
                changes["corpus_more"] = ()
                value = None
            else:
                changes["corpus_more"] = tuple(root / p for p in named)
                value = run_dir / "corpus"
        elif field == "repro_dir":
            value = None if value.lower() == "none" else root / value
        elif field == "database":
            from .drive.database import open_database

            value = open_database(value, root)
        elif field == "shard":
            from .drive.shard import parse

            value = parse(value)
        elif field == "campaign_dir":
            value = root / value
        elif field == "plan" and value < 0:
            raise ValueError(f"--tdiff-plan must be 0 or more, not {value}")
        changes[field] = value
    if changes.get("profile") not in (None, *PROFILES):
        raise ValueError(f"--tdiff-profile must be one of {', '.join(PROFILES)}, not {changes['profile']!r}")
    if changes.get("isolation") not in (None, "process", "none"):
        raise ValueError("--tdiff-isolation must be process or none")
    if changes.get("coverage") not in (None, "report", "require"):
        raise ValueError(f"--tdiff-coverage must be report or require, not {changes['coverage']!r}")
    if (changes.get("precompile") or 0) < 0:
        raise ValueError("--tdiff-precompile must be 0 (off) or more workers")
    if changes.get("max_compiles", 0) < 0:
        raise ValueError("--tdiff-max-compiles must be 0 (no limit) or more")
    if changes.get("compile_budget", 0) < 0:
        raise ValueError("--tdiff-compile-budget must be 0 (no limit) or more seconds")
    if changes.get("timeout", 1) <= 0:
        raise ValueError("--tdiff-timeout must be positive")
    if gpu is not None:
        changes["gpu"] = gpu
    return RunOptions(**changes)


def _backends(value: str) -> tuple[str, ...]:
    """The backends of `--tdiff-backends`, each parsed (a ValueError names a bad one; another environment's
    Python is probed)."""
    parts = split_backends(value)
    if not parts:
        raise ValueError(f"--tdiff-backends names no backend: {value!r}")
    from .core.backend_spec import BackendSpec
    from .execute.environments import probe

    if "metamorphic" in parts and len(parts) > 1:
        raise ValueError("--tdiff-backends metamorphic stands alone (it picks compiled variants per check)")
    for p in parts:
        if p == "metamorphic":
            continue
        spec = BackendSpec.parse(p)  # a ValueError names the bad one
        if spec.python:
            try:
                probe(spec.python)
            except ValueError as exc:
                raise ValueError(f"--tdiff-backends {p!r}: {exc}") from None
    return parts
