"""The one table of the run's options (`OPTIONS`: name, type, choices, default, help, the `RunOptions` field it
sets) and the checks of their values: a value as written (`Option.parse`, for pytest's `--tdiff-*` flags, its
`tdiff_*` ini keys and the `tdiff` CLI) and a value given in Python (`Option.validate`, for `RunOptions`, which
checks every field a flag sets when it is made). Both give one message per bad value. Pure data: the faces
(`tdiff.options`) register flags from it, `tdiff.core.settings` validates from it."""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

ON_OFF = ("on", "off")
#: the run's profiles, registered with hypothesis as `tdiff-<name>` (`tdiff.core.settings`)
PROFILES = ("ci", "dev", "thorough")


@dataclass(frozen=True)
class Option:
    """One option: `--tdiff-NAME` on pytest's command line, `tdiff_NAME` in its ini file.

    `type` is str, int, float or bool (written `on` / `off`); `choices` the words a str takes; `default`
    what a user gets without it, in words; `field` the `RunOptions` field it sets (None: the pytest
    plugin's own); `minimum` the least number it takes (`zero`: what 0 means), `positive` more than 0;
    `unit` what a number counts; `aliases` older names that still work, with a warning; `accepts` checks
    the value a field holds where the flag's words become something else (a path, a database, a shard):
    `accepts(value, name)` raises ValueError naming `name`."""

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
    accepts: Callable[[Any, str], None] | None = None

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
            raise ValueError(self._not_a_number(flag, raw)) from None
        self._in_range(value, raw, flag)
        return value

    def validate(self, value: Any, name: str) -> None:
        """Check `value` as Python holds it (a `RunOptions` field: a bool, an int, a float, one of the choices,
        or what `accepts` takes); raises the ValueError `parse` raises for the same bad value, naming `name`.
        A bool takes True or False (the flag's on / off); None is for the caller to allow."""
        if self.type is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False (on or off), not {value!r}")
        elif self.choices:
            if not isinstance(value, str) or value not in self.choices:
                raise ValueError(f"{name} must be {_either(self.choices)}, not {value!r}")
        elif self.type in (int, float):
            kind = numbers.Integral if self.type is int else numbers.Real
            if isinstance(value, bool) or not isinstance(value, kind):
                raise ValueError(self._not_a_number(name, value))
            self._in_range(value, value, name)
        elif self.accepts is not None:
            self.accepts(value, name)

    def _not_a_number(self, name: str, raw: Any) -> str:
        what = {int: "a whole number", float: "a number"}.get(self.type, str(self.type.__name__))
        return f"{name} must be {what}{' of ' + self.unit if self.unit else ''}, not {raw!r}"

    def _in_range(self, value: Any, raw: Any, name: str) -> None:
        # (written `not >=` so that NaN is out of every range)
        if self.minimum is not None and not value >= self.minimum:
            zero = f" ({self.zero})" if self.zero else ""
            unit = f" {self.unit}" if self.unit else ""
            raise ValueError(f"{name} must be {self.minimum:g}{zero} or more{unit}, not {raw!r}")
        if self.positive and not value > 0:
            raise ValueError(f"{name} must be positive, not {raw!r}")


def _either(words: Iterable[str]) -> str:
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def path_or_none(value: Any, name: str) -> None:
    """A directory's path (a str or an `os.PathLike`) or None."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name} must be a directory (a str or a Path) or None, not {value!r}")


def database_or_none(value: Any, name: str) -> None:
    """A hypothesis `ExampleDatabase` or None (the flag's directory or redis URL is opened into one)."""
    from hypothesis.database import ExampleDatabase

    if value is not None and not isinstance(value, ExampleDatabase):
        raise ValueError(f"{name} must be a hypothesis ExampleDatabase or None (the flag opens a directory or a "
                         f"redis URL into one), not {value!r}")


def parse_shard(text: Any) -> tuple[int, int]:
    """`"K/N"` -> (K, N), 1 <= K <= N. Raises ValueError naming --tdiff-shard."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m:
        raise ValueError(f"--tdiff-shard must be K/N (this job's shard K of N, counted from 1), not {text!r}")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"--tdiff-shard {text!r}: K must be between 1 and N (N at least 1)")
    return k, n


def shard_or_none(value: Any, name: str) -> None:
    """(K, N) with 1 <= K <= N, or None."""
    if value is None:
        return
    if not (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value)):
        raise ValueError(f"{name} must be K/N (this job's shard K of N, counted from 1) as a tuple (K, N), "
                         f"not {value!r}")
    k, n = value
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"{name} {value!r}: K must be between 1 and N (N at least 1)")


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
           "corpus, the one under version control", "corpus_dir", accepts=path_or_none),
    Option("repro-dir", str, "where reproducers and pictures go; 'none' to skip", "RUN_DIR/repro", "repro_dir",
           accepts=path_or_none),
    Option("run-dir", str, "the run directory, outside version control (it holds a .gitignore of `*`): new corpus "
           "entries, reproducers and progress files", ".tdiff", "run_dir", accepts=path_or_none),
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
           "docs/how-to/compiler-change.md: Check a compiler "
           "change)", "off", "localize"),
    Option("database", str, "hypothesis example database shared by processes and machines: a directory (e.g. on "
           "shared storage) or redis://host:port/db (needs the redis package); with --tdiff-fuzz-targets it "
           "becomes the session's default database, the one HypoFuzz uses", "the profile's", "database",
           accepts=database_or_none),
    Option("shard", str, "K/N: run only the checks of shard K of N (each check's shard is a stable hash of its "
           "id), one per CI job", "off", "shard", accepts=shard_or_none),
    Option("campaign", str, "directory where fuzz targets record the campaign (one JSON-lines file per process); "
           "tdiff campaign DIR makes the table", "off", "campaign_dir", accepts=path_or_none),
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
#: the option that sets each `RunOptions` field
BY_FIELD: dict[str, Option] = {o.field: o for o in OPTIONS if o.field is not None}


def python_name(o: Option) -> str:
    """How a message names an option given in Python: its `RunOptions` field, and the flag that sets it."""
    return f"RunOptions.{o.field} ({o.flag})"
