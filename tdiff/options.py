"""The run's options as users write them (pytest `--tdiff-*` flags and `tdiff_*` ini keys, the `tdiff` CLI):
one table (`OPTIONS`: name, type, choices, default, help, the `RunOptions` field it sets), from which the
pytest plugin registers its flags and ini keys and the CLI its arguments, and by which every value is
checked, in one place; `build` turns the values given into `RunOptions`."""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from .core.settings import PROFILES, RUN_DIR, TRACKED_CORPUS, RunOptions

ON_OFF = ("on", "off")


@dataclass(frozen=True)
class Option:
    """One option: `--tdiff-NAME` on pytest's command line, `tdiff_NAME` in its ini file.

    `type` is str, int, float or bool (written `on` / `off`); `choices` the words a str takes; `default`
    what a user gets without it, in words; `field` the `RunOptions` field it sets (None: the pytest
    plugin's own); `minimum` the least number it takes (`zero`: what 0 means), `positive` more than 0;
    `unit` what a number counts; `aliases` older names that still work, with a warning."""

    name: str
    type: type
    help: str
    default: str
    field: str | None = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    zero: str = ""
    positive: bool = False
    unit: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return f"--tdiff-{self.name}"

    @property
    def words(self) -> tuple[str, ...]:
        """The words it takes, if it takes a fixed set."""
        return ON_OFF if self.type is bool else self.choices

    @property
    def metavar(self) -> str:
        if self.words:
            return "{" + ",".join(self.words) + "}"
        return {int: "N", float: "S" if self.unit == "seconds" else "X"}.get(self.type, "VALUE")

    def describe(self) -> str:
        """Its help, with its choices and default."""
        return f"{self.help} (default: {self.default})"

    def parse(self, raw: Any, flag: str | None = None) -> Any:
        """The value of `raw` (a string as written, or a value of the option's type): an int, a float, a str
        (one of its choices) or a bool. Raises ValueError naming the flag (`flag`, else `--tdiff-NAME`) and what
        it takes."""
        flag = flag or self.flag
        text = str(raw).strip()
        if self.words:
            if text not in self.words:
                raise ValueError(f"{flag} must be {_either(self.words)}, not {raw!r}")
            return text == "on" if self.type is bool else text
        try:
            value = self.type(text)
        except (TypeError, ValueError):
            what = {int: "a whole number", float: "a number"}.get(self.type, str(self.type.__name__))
            raise ValueError(f"{flag} must be {what}{' of ' + self.unit if self.unit else ''}, "
                             f"not {raw!r}") from None
        if self.minimum is not None and value < self.minimum:
            zero = f" ({self.zero})" if self.zero else ""
            unit = f" {self.unit}" if self.unit else ""
            raise ValueError(f"{flag} must be {self.minimum:g}{zero} or more{unit}, not {raw!r}")
        if self.positive and value <= 0:
            raise ValueError(f"{flag} must be positive, not {raw!r}")
        return value

    def check(self, raw: str, flag: str | None = None) -> str:
        """`raw` unchanged, once `parse` accepts it: the argparse type of the flag (argparse reports the error)."""
        try:
            self.parse(raw, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return raw


OPTIONS: tuple[Option, ...] = (
    Option("backends", str, "backends to run on every case, comma-separated, e.g. compiled,interpreter; a check's "
           "reference always joins", "compiled and interpreter with a GPU, the interpreter without", "backends"),
    Option("batched-threshold", int, "grids of up to this many programs are interpreted whole, the programs in "
           "batches; larger grids are sampled (as every grid over 64 programs is with the backend "
           "interpreter:sequential)", "4096", "batched_threshold", minimum=0, aliases=("whole-grid",)),
    Option("profile", str, "hypothesis profile: ci (fast, derandomized), dev or thorough (registered with "
           "hypothesis as tdiff-ci, tdiff-dev, tdiff-thorough)", "ci when CI is set, else dev", "profile",
           choices=PROFILES),
    Option("examples", int, "examples drawn per check (overrides the profile)", "the profile's", "max_examples",
           minimum=1),
    Option("seed", int, "hypothesis seed", "none: derandomized (ci) or random", "seed"),
    Option("timeout", float, "per-case timeout for each backend (after a hang, a check's later runs wait less)",
           "60", "timeout", positive=True, unit="seconds"),
    Option("corpus", str, "corpora to replay; 'none' to neither replay nor write. Several, separated by "
           f"{os.pathsep!r}: all are replayed, each entry once. New entries go to the run directory's corpus "
           "(RUN_DIR/corpus, also replayed), never to these: `tdiff corpus promote ENTRY` moves a reviewed one",
           "corpus, the one under version control", "corpus_dir"),
    Option("repro-dir", str, "where reproducers and pictures go; 'none' to skip", "RUN_DIR/repro", "repro_dir"),
    Option("run-dir", str, "the run directory, outside version control (it holds a .gitignore of `*`): new corpus "
           "entries, reproducers and progress files", ".tdiff", "run_dir"),
    Option("isolation", str, "process (workers; a crash or hang fails one case) or none (in this process; hangs "
           "are stopped by a watchdog on the main thread)", "process", "isolation", choices=("process", "none")),
    Option("shrink-budget", float, "seconds tdiff spends shrinking a divergence", "60", "shrink_budget", minimum=0,
           unit="seconds"),
    Option("reduce-budget", float, "seconds tdiff spends reducing a divergence's kernel (statements, branches, "
           "constexprs) for its reproducer, on the shrunk case; 0: off", "30", "reduce_budget", minimum=0,
           zero="off", unit="seconds"),
    Option("compile-budget", float, "compile seconds a check may spend on new combinations of specialization "
           "classes it has compiled before (new classes are always compiled); past it, such cases run without "
           "the compiled backend", "30", "compile_budget", minimum=0, zero="no limit", unit="seconds"),
    Option("max-compiles", int, "the same budget as a number of compiles", "0", "max_compiles", minimum=0,
           zero="no limit"),
    Option("compile-ahead", int, "compile workers per check that compile its planned cases' specializations "
           "before the search reaches them (GPU runs only)", "auto: the cores beyond two per xdist worker, "
           "shared among them, 1 to 4", "compile_ahead", minimum=0, zero="off"),
    Option("compile-only", bool, "on: without a GPU, compile the specializations a check's cases launch for a GPU "
           "(sm_90, through TTGIR, each class once; not run) and fail a case Triton's compiler rejects where the "
           "interpreter ran it (`compiled error (compile only)`); no effect with a GPU, where the compiled backend "
           "compiles them", "on when CI is set, else off", "compile_only"),
    Option("coverage", str, "report (name the kernel lines no case ran) or require (such a check fails)", "report",
           "coverage", choices=("report", "require")),
    Option("targeting", bool, "on: hypothesis climbs each case's largest difference over tolerance and the kernel "
           "lines it ran (at the ci example count it found fewer planted bugs: the power table of "
           "docs/explanation/evidence.md)", "off",
           "targeting"),
    Option("thresholds", bool, "on: size strategies also draw the sizes on the constants the kernel and its "
           "launch compare sizes with", "on", "thresholds"),
    Option("plan", int, "the most cases per check planned before the random search (a budget of their own, on top "
           "of its examples) to cover the triples of boundary classes of the choices that decide memory addressing "
           "(sizes, layouts, dtypes, integers and flags drawn inside user strategies) and the pairs of all of them "
           "(value classes too); 0: none", "as many as cover the triples and the pairs of addressing choices, at most "
           "half the check's examples and 64", "plan", minimum=0),
    Option("localize", bool, "on: name the compiler pass after which a `compiled wrong` case goes wrong (MLIR's "
           "per-pass dumps bisected on the GPU, confirmed by leaving the pass out; "
           "docs/how-to/compiler-change.md)", "off", "localize"),
    Option("database", str, "hypothesis example database shared by processes and machines: a directory (e.g. on "
           "shared storage) or redis://host:port/db (needs the redis package); with --tdiff-fuzz-targets it "
           "becomes the session's default database, the one HypoFuzz uses", "the profile's", "database"),
    Option("shard", str, "K/N: run only the checks of shard K of N (each check's shard is a stable hash of its "
           "id), one per CI job", "off", "shard"),
    Option("campaign", str, "directory where fuzz targets record the campaign (one JSON-lines file per process); "
           "tdiff campaign DIR makes the table", "off", "campaign_dir"),
    # the pytest plugin's own (its output)
    Option("json", str, "write every check's record (what it ran, its pytest outcome, caveats, divergences) and "
           "the run's totals to this JSON file", "off"),
    Option("summary", str, "short (pytest's outcome lines, one block per check that did not pass, the totals "
           "and one table of what was worked around or caveated) or full (also every check's own lines, as -v)",
           "short", choices=("short", "full")),
    Option("progress", float, "seconds between progress lines of a check still running; 0: none",
           "10 with -v, 30 without", unit="seconds"),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


def _either(words: Iterable[str]) -> str:
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def ini_key(name: str) -> str:
    return f"tdiff_{name.replace('-', '_')}"


def register(add_flag: Callable[..., Any], add_ini: Callable[..., Any]) -> None:
    """Register every option (and each old name, marked deprecated) as a flag and an ini key: `add_flag` and
    `add_ini` take pytest's `addoption` and `addini` arguments."""
    for o in OPTIONS:
        add_flag(o.flag, dest=ini_key(o.name), default=None, type=o.check, metavar=o.metavar, help=o.describe())
        add_ini(ini_key(o.name), o.describe(), default=None)
        for old in o.aliases:
            text = f"deprecated: the old name of {o.flag}, which it sets"
            add_flag(f"--tdiff-{old}", dest=ini_key(old), default=None, type=o.check, metavar=o.metavar, help=text)
            add_ini(ini_key(old), text, default=None)


def add_arguments(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """Add the named options to a CLI parser as `--NAME` (no `tdiff-` prefix), checked as pytest checks them."""
    for name in names:
        o = BY_NAME[name]
        parser.add_argument(f"--{name}", dest=name.replace("-", "_"), default=None, metavar=o.metavar,
                            type=partial(o.check, flag=f"--{name}"), help=o.describe())


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
            from .drive.shard import parse

            v = parse(v)
        elif field == "campaign_dir":
            v = root / v
        changes[field] = v  # type: ignore[index]
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
