"""pytest plugin: `pytest --tdiff` collects every `@tdiff.check` and runs it as a test item.

Options and hooks only; the work is done by `tdiff.runner`. Without `--tdiff` nothing changes.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .declaration import Check

# Nothing heavy is imported at module level: pytest loads this plugin in every run, and the xdist
# controller never needs torch or triton.

RESULTS_KEY = "tdiff_result"

_OPTIONS = [
    # (name, type, help)
    ("backends", str, "two backends to compare, e.g. compiled,interpreter (default: compiled vs interpreter with "
                      "a GPU, interpreter vs reference without)"),
    ("profile", str, "hypothesis profile: ci (fast, derandomized), dev or thorough (default: ci when CI is set)"),
    ("examples", int, "examples drawn per check (overrides the profile)"),
    ("seed", int, "hypothesis seed"),
    ("timeout", float, "per-case timeout in seconds for each backend (default 60)"),
    ("corpus", str, "corpus directory (default: corpus); 'none' to neither replay nor write"),
    ("repro-dir", str, "where reproducers and pictures go (default: tdiff-out); 'none' to skip"),
    ("isolation", str, "process (workers; a crash fails one case) or none (fastest)"),
    ("shrink-budget", float, "seconds tdiff spends shrinking a divergence (default 60)"),
    ("max-compiles", int, "specializations a check may compile before drawn cases needing new ones are "
                          "skipped (default 8; 0: no limit)"),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tdiff", "differential testing of Triton kernels")
    group.addoption("--tdiff", action="store_true", default=False,
                    help="collect @tdiff.check kernels (from collected modules and tdiff_paths) and test them")
    for name, typ, text in _OPTIONS:
        group.addoption(f"--tdiff-{name}", dest=f"tdiff_{name.replace('-', '_')}", type=typ, default=None, help=text)
        parser.addini(f"tdiff_{name.replace('-', '_')}", text, default=None)
    parser.addini("tdiff_paths", "directories or files with @tdiff.check kernels, collected with --tdiff",
                  type="args", default=["suites"])


def _opt(config: pytest.Config, name: str) -> Any:
    key = f"tdiff_{name.replace('-', '_')}"
    value = config.getoption(key)
    if value is None:
        value = config.getini(key)
    if value in (None, "", []):
        return None
    typ = next(t for n, t, _ in _OPTIONS if n == name)
    return typ(value)


def run_options(config: pytest.Config) -> Any:
    from .settings import RunOptions

    changes: dict[str, Any] = {}
    backends = _opt(config, "backends")
    if backends:
        parts = [p.strip() for p in backends.split(",") if p.strip()]
        if len(parts) != 2:
            raise pytest.UsageError(f"--tdiff-backends needs two backends separated by a comma, got {backends!r}")
        changes["backends"] = (parts[0], parts[1])
    for name, field in (("profile", "profile"), ("examples", "max_examples"), ("seed", "seed"),
                        ("timeout", "timeout"), ("isolation", "isolation"), ("shrink-budget", "shrink_budget"),
                        ("max-compiles", "max_compiles")):
        v = _opt(config, name)
        if v is not None:
            changes[field] = v
    root = Path(str(config.rootpath))
    for name, field in (("corpus", "corpus_dir"), ("repro-dir", "repro_dir")):
        v = _opt(config, name)
        if v is not None:
            changes[field] = None if v.lower() == "none" else (root / v)
        else:
            changes[field] = root / ("corpus" if name == "corpus" else "tdiff-out")
    if changes.get("profile") not in (None, "ci", "dev", "thorough"):
        raise pytest.UsageError(f"--tdiff-profile must be ci, dev or thorough, not {changes['profile']!r}")
    if changes.get("isolation") not in (None, "process", "none"):
        raise pytest.UsageError("--tdiff-isolation must be process or none")
    if changes.get("max_compiles", 0) < 0:
        raise pytest.UsageError("--tdiff-max-compiles must be 0 (no limit) or more")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    m = re.match(r"gw(\d+)$", worker)
    if m:
        changes["gpu"] = _gpu_for(int(m.group(1)))
    return RunOptions(**changes)


def _gpu_for(worker: int) -> int | None:
    """Round-robin GPU for an xdist worker, without initializing CUDA in this process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip()]
        return int(ids[worker % len(ids)]) if ids and all(i.strip().isdigit() for i in ids) else None
    from .gpus import device_count

    n = device_count()
    return worker % n if n else None


class _State:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.runner: Any = None
        self.results: dict[str, dict] = {}

    def get_runner(self) -> Any:
        if self.runner is None:
            from .runner import Runner

            self.runner = Runner(run_options(self.config))
        return self.runner


_KEY = pytest.StashKey[_State]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tdiff: a test item made from a @tdiff.check declaration")
    if not config.getoption("tdiff"):
        return
    config.stash[_KEY] = _State(config)
    _warm(config, run_options(config))  # (bad options fail here, early)
    source = getattr(config, "args_source", None)
    explicit = source is not None and source.name == "ARGS"
    if not explicit:  # no paths given: add tdiff_paths to what pytest collects
        root = Path(str(config.rootpath))
        for p in config.getini("tdiff_paths"):
            path = str(root / p)
            if os.path.exists(path) and path not in config.args:
                config.args.append(path)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if not config.getoption("tdiff"):
        return None
    from .gpus import device_count

    opts = run_options(config)
    if opts.backends:
        pair = f"{opts.backends[0]} vs {opts.backends[1]}"
    elif device_count():
        pair = "compiled vs interpreter"
    else:
        pair = ("interpreter vs reference (no CUDA GPU: the compiled backend is skipped; checks without a "
                "reference compare the interpreter with itself in reversed program order)")
    return [f"tdiff: {pair}; profile {opts.profile}; corpus {opts.corpus_dir or 'off'}; "
            f"isolation {opts.isolation}"]


def _in_tdiff_paths(config: pytest.Config, path: Path) -> bool:
    root = Path(str(config.rootpath))
    for p in config.getini("tdiff_paths"):
        base = (root / p).resolve()
        try:
            path.resolve().relative_to(base)
            return True
        except ValueError:
            continue
    return False


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not config.getoption("tdiff") or file_path.suffix != ".py":
        return None
    if file_path.name in ("conftest.py", "__init__.py") or file_path.name.startswith("_"):
        return None
    if not _in_tdiff_paths(config, file_path):
        return None
    if _is_test_module(config, file_path):
        return None  # pytest collects it; pytest_pycollect_makeitem adds its checks
    return TdiffModule.from_parent(parent, path=file_path)


def _is_test_module(config: pytest.Config, path: Path) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(path.name, pat) for pat in config.getini("python_files"))


def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: Any) -> list[pytest.Item] | None:
    if not collector.config.getoption("tdiff") or isinstance(collector, TdiffModule):
        return None
    from .declaration import checks_of

    checks = checks_of(obj)
    if not checks or getattr(obj, "__module__", None) is None:
        return None
    return [TdiffItem.from_parent(collector, name=c.item_name, check=c) for c in checks]


class TdiffModule(pytest.Module):
    """A module under tdiff_paths: its items are its kernels' checks, nothing else."""

    def collect(self) -> list[pytest.Item]:
        from .declaration import checks_of

        mod = self.obj
        items = []
        seen: set[int] = set()
        for value in vars(mod).values():
            for c in checks_of(value):
                if id(c) in seen or c.module != mod.__name__:
                    continue
                seen.add(id(c))
                items.append(TdiffItem.from_parent(self, name=c.item_name, check=c))
        return items


class TdiffFailure(Exception):
    """A check failed; the message is tdiff's report."""


class TdiffItem(pytest.Item):
    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.add_marker("tdiff")
        for mark in getattr(check, "marks", ()) or ():
            self.add_marker(mark)

    def runtest(self) -> None:
        state = self.config.stash[_KEY]
        result = state.get_runner().run_check(self.check)
        summary = _summary(result)
        self.user_properties.append((RESULTS_KEY, json.dumps(summary)))
        failed = result.failures
        if failed:
            self.user_properties.append(("tdiff_verdict", ", ".join(d.verdict.label if d.verdict else "divergence"
                                                                    for d in failed)))
            paths = [str(d.repro_path) for d in failed if d.repro_path]
            if paths:
                self.user_properties.append(("tdiff_reproducer", ", ".join(paths)))
        if result.status in ("failed", "error"):
            raise TdiffFailure(result.report() or "; ".join(result.notes))
        if result.status == "skipped":
            pytest.skip("; ".join(result.notes) or "no case could be run")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, TdiffFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.name} (tdiff)"


def _summary(result: Any) -> dict:
    return {
        "id": result.check_id,
        "status": result.status,
        "backends": list(result.backends),
        "cases": result.cases,
        "discarded": sum(result.discarded.values()),
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        "compiles": result.compiles,
        "compile_seconds": round(result.compile_seconds, 3),
        "budget_skipped": result.budget_skipped,
        "budget_beyond": result.budget_beyond,
        "wall": round(result.wall, 3),
        "replayed": [list(x) for x in result.replayed],
        "divergences": [{
            "verdict": d.verdict.label if d.verdict else None,
            "quiet": d.quiet,
            "shrunk": d.shrink.describe() if d.shrink else None,
            "size": list(d.shrink.after) if d.shrink else None,
            "repro": str(d.repro_path) if d.repro_path else None,
            "corpus": str(d.corpus_path) if d.corpus_path else None,
            "source": d.source,
        } for d in result.divergences],
        "notes": result.notes,
        "pair_note": result.pair_note,
    }


def _warm(config: pytest.Config, opts: Any) -> None:
    """Start the worker processes at once: their imports (torch, triton) and CUDA set-up then
    overlap with this process's own imports and collection."""
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if config.option.collectonly or controller:
        return  # (an xdist controller runs no tests: its workers warm their own)
    if opts.isolation == "none":
        return
    from .backends.base import BackendSpec
    from .gpus import device_count
    from .workers import shared_pool

    if opts.backends:
        lanes = sorted({BackendSpec.parse(b).lane for b in opts.backends})
    else:
        lanes = ["gpu", "cpu"] if device_count() else ["cpu", "ref"]
    shared_pool(opts.gpu).warm(lanes)


DURATIONS_KEY = "tdiff/durations"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the checks that took longest last time first (shortest makespan under xdist);
    checks never timed run first of all. Other items keep their places."""
    cache = getattr(config, "cache", None)
    if not config.getoption("tdiff") or cache is None:
        return
    known = cache.get(DURATIONS_KEY, {})
    slots = [i for i, it in enumerate(items) if isinstance(it, TdiffItem)]
    if not known or len(slots) < 2:
        return
    ordered = sorted((items[i] for i in slots), key=lambda it: -known.get(it.nodeid, float("inf")))
    for i, it in zip(slots, ordered):
        items[i] = it


_durations: dict[str, float] = {}


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    cache = getattr(config, "cache", None)
    if not config.getoption("tdiff") or cache is None or hasattr(config, "workerinput") or not _durations:
        return
    known = cache.get(DURATIONS_KEY, {})
    known.update(_durations)
    cache.set(DURATIONS_KEY, known)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    if report.when != "call":
        return None
    blob = dict(report.user_properties).get(RESULTS_KEY)
    if blob is None:
        return None
    s = json.loads(blob)
    word = f"{report.outcome.upper()} ({s['cases']} cases, {s['wall']:.1f}s)"
    if report.passed:
        return "passed", ".", (word, {"green": True})
    if report.failed:
        return "failed", "F", (word, {"red": True})
    return None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    blob = dict(report.user_properties).get(RESULTS_KEY) if report.when == "call" else None
    if blob is not None:
        summary = json.loads(blob)
        _collected.append(summary)
        _durations[report.nodeid] = summary["wall"]


_collected: list[dict] = []


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not config.getoption("tdiff") or not _collected:
        return
    tr = terminalreporter
    tr.section("tdiff summary")
    by_kernel: dict[str, list[dict]] = defaultdict(list)
    for s in _collected:
        by_kernel[s["id"]].append(s)
    totals: dict[str, float] = defaultdict(float)
    cases = compiles = 0
    compile_seconds = 0.0
    for kid, runs in sorted(by_kernel.items()):
        for s in runs:
            cases += s["cases"]
            compiles += s["compiles"]
            compile_seconds += s["compile_seconds"]
            for k, v in s["seconds"].items():
                totals[k] += v
            verdicts = defaultdict(int)
            for d in s["divergences"]:
                verdicts[d["verdict"] or "divergence"] += 1
            vtext = ", ".join(f"{n} {v}" for v, n in verdicts.items()) or "no divergence"
            times = ", ".join(f"{k} {v:.2f}s" for k, v in s["seconds"].items())
            replay = f", replayed {len(s['replayed'])}" if s["replayed"] else ""
            comp = f", {s['compiles']} compiles ({s['compile_seconds']:.1f}s)" if s["compiles"] else ""
            tr.write_line(f"{s['status'].upper():7} {kid}: {s['cases']} cases{replay}; {vtext}; {s['wall']:.1f}s "
                          f"({times}{comp})")
            for d in s["divergences"]:
                if d["shrunk"]:
                    tr.write_line(f"          shrunk: {d['shrunk']}")
                if d["repro"]:
                    tr.write_line(f"          reproducer: {d['repro']}")
                if d["corpus"]:
                    tr.write_line(f"          corpus entry: {d['corpus']}")
            for n in s["notes"]:
                tr.write_line(f"          note: {n}")
    t = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(totals.items()))
    comp = f"; {compiles} specializations compiled in {compile_seconds:.1f}s" if compiles else ""
    tr.write_line(f"tdiff: {len(by_kernel)} checks, {cases} cases; time in backends: {t}{comp}")
    for note in sorted({s.get("pair_note") for s in _collected if s.get("pair_note")}):
        tr.write_line(f"tdiff: {note}")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None) if hasattr(config, "stash") else None
    if state is not None:
        from .workers import close_shared

        close_shared(wait=False)  # the workers exit on their own (CUDA teardown): no need to wait for them
    _collected.clear()
    _durations.clear()
