"""Run options and hypothesis profiles."""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity
from hypothesis import settings as hsettings
from hypothesis.database import DirectoryBasedExampleDatabase

from .backend_spec import BackendSpec, parse_all
from .option_table import BY_FIELD, PROFILES, Option, path_or_none, python_name

# PROFILES: the run's profiles (the table's choices of --tdiff-profile), registered with hypothesis below as
# `tdiff-<name>`: `ci` (20 examples, derandomized: no example database), `dev` (50) and `thorough` (400), which
# keep their examples in `.hypothesis/tdiff` outside CI

#: the hypothesis settings a tdiff profile sets; every other one comes from hypothesis's profile loaded when a
#: search starts
PROFILE_SETTINGS = ("max_examples", "derandomize", "deadline", "suppress_health_check", "phases",
                    "report_multiple_bugs", "verbosity", "print_blob")


def hypothesis_profile(name: str) -> str:
    """The name hypothesis knows a tdiff profile by."""
    return f"tdiff-{name}"


for _name, _examples, _derandomize in zip(PROFILES, (20, 50, 400), (True, False, False)):
    hsettings.register_profile(
        hypothesis_profile(_name), max_examples=_examples, derandomize=_derandomize,
        deadline=None,  # a first compile takes up to half a second; never a reason to fail
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                               HealthCheck.large_base_example],
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # (--tdiff-targeting adds the target phase)
        report_multiple_bugs=False, verbosity=Verbosity.quiet, print_blob=False)


#: the run directory's default name, beside .pytest_cache
RUN_DIR = ".tdiff"
#: the corpus kept under version control, which CI replays (`tdiff corpus promote` moves reviewed entries there)
TRACKED_CORPUS = "corpus"


def default_profile() -> str:
    return "ci" if os.environ.get("CI") else "dev"


def default_compile_only() -> bool:
    """The compile-only opinion is on in CI (CI set), off elsewhere: it costs more than 15% of the CPU main job
    (docs/explanation/opinions.md, "On a CPU-only machine: compile only", has the figures)."""
    return bool(os.environ.get("CI"))


#: the fields no flag sets, checked as the table's options are (Options of no flag: only their checks are used)
UNFLAGGED: tuple[Option, ...] = (
    Option("replay", bool, "", "", "replay"),
    Option("reduce-expected", bool, "", "", "reduce_expected"),
    Option("shrink-expected", bool, "", "", "shrink_expected"),
    Option("verdict", bool, "", "", "verdict"),
    Option("sample-threshold", int, "", "", "sample_threshold", minimum=0),
    Option("sample-size", int, "", "", "sample_size", minimum=0),
    Option("gpu", int, "", "", "gpu", minimum=0),
)


@dataclass(frozen=True)
class RunOptions:
    """How a run draws, executes, judges and records cases. Every field is checked when it is made (also by
    `with_` and `tdiff.verify(kernel, **changes)`): a field a flag sets by the flag's entry in the options table
    (`tdiff.core.option_table.OPTIONS`), with the flag's message, e.g. `RunOptions(isolation="proces")` raises
    `ValueError: RunOptions.isolation (--tdiff-isolation) must be process or none, not 'proces'`."""

    # None: compiled and interpreter with a GPU, the interpreter without
    backends: tuple[BackendSpec, ...] | None = None
    profile: str = field(default_factory=default_profile)
    max_examples: int | None = None
    seed: int | None = None
    timeout: float = 60.0  # per case and backend, seconds
    isolation: str = "process"  # "process" (workers) or "none" (in this process)
    # the run directory: outside version control (it ignores itself), where a run writes what it finds
    run_dir: Path | None = Path(RUN_DIR)
    corpus_dir: Path | None = Path(RUN_DIR, "corpus")  # replayed first; new corpus entries are written here
    # other corpora replayed beside corpus_dir, never written; None: the tracked corpus (`corpus/`) when corpus_dir
    # is the run directory's, else none (a corpus_dir given on its own is the whole corpus, as it always was)
    corpus_more: tuple[Path, ...] | None = None
    repro_dir: Path | None = Path(RUN_DIR, "repro")
    replay: bool = True  # replay corpus entries before drawing new cases
    shrink_budget: float = 60.0
    # seconds spent reducing the kernel of a divergence (its shrunk case) for the reproducer; 0: off
    reduce_budget: float = 30.0
    # ... also for a check that expects its failure (an xfail: a known finding), where a reproducer is written
    # for it; off in pytest runs (a known finding's reduction costs the run its budget and tells nothing new),
    # on in `tdiff replay`, which a user runs to get one finding's reproducer
    reduce_expected: bool = False
    # a check that expects its failure stops at its first divergence in pytest runs: neither hypothesis nor tdiff
    # shrinks it and no reproducer is written (what pytest shows of an XFAIL is its outcome; the finding's corpus
    # entry is its minimal case); True under pytest's --runxfail (which runs xfail checks as any other) and in
    # `tdiff replay`
    shrink_expected: bool = False
    verdict: bool = True
    sample_threshold: int = 64  # grids with more programs than this are sampled by the interpreter
    # ... when it runs programs one by one; in batches (the default), grids up to this many run whole
    batched_threshold: int = 4096
    sample_size: int = 8  # random programs interpreted besides first, last and mask-tail ones
    compile_budget: float = 30.0  # compile seconds per check on new combinations of classes (0: no limit)
    max_compiles: int = 0  # and/or compiles per check on new combinations of classes (0: no limit)
    # compile workers per check compiling its planned cases ahead of the search (None: auto; 0: off)
    compile_ahead: int | None = None
    coverage: str = "report"  # kernel lines no case ran: "report" them, or "require" every line to run (else fail)
    database: Any = None  # a hypothesis ExampleDatabase (--tdiff-database); None: the profile decides
    # hypothesis's target phase climbs each case's closeness and kernel lines run; off by default: at the
    # ci example count it found fewer planted bugs (bench/power/power.md)
    targeting: bool = False
    # size strategies also draw the constants the kernel and its launch compare sizes with (tdiff.generate.thresholds)
    thresholds: bool = True
    # the most planned cases per check, run before (and on top of) the random search's examples, covering triples
    # and pairs of boundary classes (tdiff.generate.plan); None: as many as cover the triples and the pairs of
    # addressing choices, at most the check's examples and 64 (tdiff.drive.search.plan_budget); 0: none
    plan: int | None = None
    # name the compiler pass after which a `compiled wrong` case goes wrong (tdiff.execute.stages; needs a GPU)
    localize: bool = False
    # without a GPU, compile the specializations a case launches for sm_90 (not run) and fail a case the compiler
    # rejects (tdiff.execute.backends.compile_only); with a GPU the compiled backend compiles them anyway. On in CI.
    compile_only: bool = field(default_factory=default_compile_only)
    gpu: int | None = None
    shard: tuple[int, int] | None = None  # (K, N): only the checks of shard K of N run (tdiff.drive.shard)
    campaign_dir: Path | None = None  # where fuzz targets record a campaign (tdiff.record.campaign)

    def __post_init__(self) -> None:
        if self.backends is not None:  # as users write them (strings) or parsed: held as specs from here on
            name = python_name(BY_FIELD["backends"])
            if isinstance(self.backends, (str, BackendSpec)) or not self.backends:
                raise ValueError(f"{name} must be a tuple of backends (e.g. (\"compiled\", \"interpreter\")) or "
                                 f"None, not {self.backends!r}")
            try:
                object.__setattr__(self, "backends", parse_all(self.backends))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{name}: {exc}") from None
        optional = _optional_fields()
        for option in (*BY_FIELD.values(), *UNFLAGGED):
            assert option.field is not None  # (BY_FIELD and UNFLAGGED hold options that set a field)
            value = getattr(self, option.field)
            if value is None and option.field in optional:
                continue
            option.validate(value, python_name(option) if option.field in BY_FIELD else f"RunOptions.{option.field}")
        if self.corpus_more is not None:
            if isinstance(self.corpus_more, (str, os.PathLike)):
                raise ValueError(f"RunOptions.corpus_more must be a tuple of directories or None, "
                                 f"not {self.corpus_more!r}")
            for p in self.corpus_more:
                path_or_none(p, "RunOptions.corpus_more: each")

    def with_(self, **changes: Any) -> RunOptions:
        """A copy with `changes`, checked as a new one is."""
        return replace(self, **changes)

    def corpora(self) -> list[Path]:
        """The corpora a check replays, the one new entries go to (`corpus_dir`) first; none without it."""
        if self.corpus_dir is None:
            return []
        more = self.corpus_more
        if more is None:
            default = self.run_dir is not None and Path(self.corpus_dir) == Path(self.run_dir, "corpus")
            more = (Path(TRACKED_CORPUS),) if default else ()
        out = [Path(self.corpus_dir)]
        for p in more:
            if Path(p).resolve() not in {q.resolve() for q in out}:
                out.append(Path(p))
        return out


@cache
def _optional_fields() -> frozenset[str]:
    """The fields of `RunOptions` that may be None (their type says `| None`)."""
    hints = typing.get_type_hints(RunOptions)
    return frozenset(f.name for f in fields(RunOptions) if type(None) in typing.get_args(hints[f.name]))


def prepare_run_dir(run_dir: Path | None, *paths: Path | None) -> None:
    """Before writing under `run_dir`: create it with a `.gitignore` holding `*` (as pytest does for
    `.pytest_cache`), so that nothing a run writes there shows in `git status`. Paths outside it are left
    alone (a corpus or reproducer folder named elsewhere)."""
    if run_dir is None:
        return
    root = Path(run_dir).resolve()
    if paths and not any(p is not None and (Path(p).resolve() == root or root in Path(p).resolve().parents)
                         for p in paths):
        return
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# written by tdiff: this run directory is never committed\n*\n")


def hypothesis_settings(opts: RunOptions, max_examples: int | None = None) -> hsettings:
    """The settings of a check's search: its tdiff profile's (on top of hypothesis's current profile), with
    `max_examples` (else the run's, else the profile's), the run's database and seed, and the target phase under
    `--tdiff-targeting on`. A derandomized profile keeps no database; a seed or a database given derandomizes
    nothing."""
    if opts.profile not in PROFILES:
        raise ValueError(f"unknown profile {opts.profile!r}: {', '.join(PROFILES)}")
    profile = hsettings.get_profile(hypothesis_profile(opts.profile))
    if opts.database is not None:
        db = opts.database
    elif not profile.derandomize and not os.environ.get("CI"):
        db = DirectoryBasedExampleDatabase(".hypothesis/tdiff")
    else:
        db = None
    own = {name: getattr(profile, name) for name in PROFILE_SETTINGS}
    return hsettings(**{
        **own,
        "max_examples": max_examples or opts.max_examples or profile.max_examples,
        # (a derandomized run uses no database: one given replaces derandomizing, as a seed does)
        "derandomize": profile.derandomize and opts.seed is None and opts.database is None,
        "database": db,
        "phases": [p for p in Phase if p in profile.phases or (p is Phase.target and opts.targeting)],
    })
