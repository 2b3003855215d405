"""pytest plugin: `pytest --tdiff` collects every `@tdiff.check` and runs it as a test item.

Hooks only: each delegates to one `TdiffSession` kept in `config.stash`; options are built by
`tdiff.options`, checks are run by `tdiff.drive.runner`, summaries rendered by `tdiff.record.summary`. Without
`--tdiff` nothing changes. Nothing heavy is imported at module level: pytest loads this plugin in
every run, and the xdist controller never needs torch or triton.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .declaration import Check

RESULTS_KEY = "tdiff_result"
DURATIONS_KEY = "tdiff/durations"


def pytest_addoption(parser: pytest.Parser) -> None:
    from .options import OPTIONS

    group = parser.getgroup("tdiff", "differential testing of Triton kernels")
    group.addoption("--tdiff", action="store_true", default=False,
                    help="collect @tdiff.check kernels (from collected modules and tdiff_paths) and test them")
    for name, _, _, text in OPTIONS:
        key = f"tdiff_{name.replace('-', '_')}"
        group.addoption(f"--tdiff-{name}", dest=key, default=None, help=text)
        parser.addini(key, text, default=None)
    parser.addini("tdiff_paths", "directories or files with @tdiff.check kernels, collected with --tdiff",
                  type="args", default=["suites"])
    group.addoption("--tdiff-fuzz-targets", action="store_true", default=False,
                    help="collect each check as a plain hypothesis test (one case per example, tdiff's pipeline "
                         "in its body) for HypoFuzz: hypothesis fuzz -- --tdiff --tdiff-fuzz-targets PATHS")


class TdiffSession:
    """The state of one pytest session with --tdiff: options, runner, collected summaries."""

    def __init__(self, config: pytest.Config) -> None:
        from . import options
        from .execute.gpus import GPUError, gpu_for_worker

        self.config = config

        def get(name: str) -> Any:
            key = f"tdiff_{name.replace('-', '_')}"
            value = config.getoption(key)
            return config.getini(key) if value is None else value

        worker = re.match(r"gw(\d+)$", os.environ.get("PYTEST_XDIST_WORKER", ""))
        self.xdist_worker = int(worker.group(1)) if worker else None
        self.fuzz = bool(config.getoption("tdiff_fuzz_targets"))
        try:
            gpu = gpu_for_worker(self.xdist_worker) if worker else None
            self.options = options.build(get, Path(str(config.rootpath)), gpu)
        except (ValueError, GPUError) as exc:
            raise pytest.UsageError(str(exc)) from None
        self.runner: Any = None
        self.recorder: Any = None
        self.slot: int | None = None
        self.compat: list[str] = []  # hypothesis names aliased for HypoFuzz (tdiff.drive.fuzz.hypofuzz_compat)
        if self.fuzz:
            from .drive.fuzz import hypofuzz_compat

            self.compat = hypofuzz_compat()
        self.summaries: list[dict] = []
        self.durations: dict[str, float] = {}

    def pin(self) -> None:
        """A fuzz process that xdist does not number (HypoFuzz's) claims a slot of this machine and pins its
        GPU worker to GPU slot % count (tdiff.pinning); once, before its first worker starts."""
        if not self.fuzz or self.xdist_worker is not None or self.slot is not None:
            return
        from .execute.pinning import fuzz_process_gpu

        self.slot, gpu = fuzz_process_gpu()
        if gpu is not None:
            self.options = self.options.with_(gpu=gpu)

    def get_runner(self) -> Any:
        if self.runner is None:
            from .drive.runner import Runner

            self.pin()
            self.runner = Runner(self.options)
        return self.runner

    def get_recorder(self) -> Any:
        """The campaign recorder of this process (--tdiff-campaign), or None."""
        if self.options.campaign_dir is None:
            return None
        if self.recorder is None:
            from .record.campaign import Recorder

            self.pin()
            self.recorder = Recorder(self.options.campaign_dir, {"slot": self.slot, "gpu": self.options.gpu,
                                                                 "xdist_worker": self.xdist_worker})
        return self.recorder

    def warm(self) -> None:
        """Start the worker processes at once: their imports (torch, triton) and CUDA set-up then
        overlap with this process's own imports and collection."""
        config = self.config
        controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
        if config.option.collectonly or controller or self.options.isolation == "none":
            return  # (an xdist controller runs no tests: its workers warm their own)
        from .execute.backends.base import BackendSpec
        from .execute.gpus import device_count
        from .execute.workers import shared_pool

        self.pin()
        if self.options.backends:
            lanes = sorted({BackendSpec.parse(b).lane if b != "metamorphic" else "gpu" for b in self.options.backends}
                           | {"ref"})
        else:
            lanes = ["gpu", "cpu", "ref"] if device_count() else ["cpu", "ref"]
        shared_pool(self.options.gpu).warm(lanes)

    def header(self) -> list[str]:
        from .execute.gpus import device_count

        opts = self.options
        if opts.backends:
            what = ", ".join(opts.backends)
        elif device_count():
            what = "compiled and interpreter"
        else:
            what = "interpreter (no CUDA GPU: the compiled backend is skipped)"
        corpus = os.pathsep.join(str(p) for p in (opts.corpus_dir or "off", *opts.corpus_more))
        extra = f"; shard {opts.shard[0]}/{opts.shard[1]}" if opts.shard else ""
        if opts.database is not None:
            from .drive.database import describe

            extra += f"; example database {describe(opts.database)}"
        if self.compat:
            extra += f"; for HypoFuzz, hypothesis's span_comments also named {' and '.join(self.compat)}"
        return [f"tdiff: {what} on every case, plus each check's reference; profile {opts.profile}; "
                f"corpus {corpus}; isolation {opts.isolation}{extra}"]

    def close(self) -> None:
        if self.runner is not None or self.options.isolation != "none":
            from .execute.workers import close_shared

            close_shared(wait=False)  # the workers exit on their own (CUDA teardown): no need to wait for them

    # -- hooks (this object is registered as a plugin for the session) --------------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # after every plugin's pytest_configure (hypothesis's loads --hypothesis-profile there), before the
        # fuzz targets are made: they and HypoFuzz take the default profile's database
        if self.fuzz and self.options.database is not None:
            from .drive.database import use_as_default

            use_as_default(self.options.database)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        blob = dict(report.user_properties).get(RESULTS_KEY) if report.when == "call" else None
        if blob is not None:
            summary = json.loads(blob)
            self.summaries.append(summary)
            self.durations[report.nodeid] = summary["wall"]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(self.config, "cache", None)
        if cache is None or hasattr(self.config, "workerinput") or not self.durations:
            return
        known = cache.get(DURATIONS_KEY, {})
        known.update(self.durations)
        cache.set(DURATIONS_KEY, known)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if not self.summaries:
            return
        from .record.summary import check_lines, total_lines

        tr = terminalreporter
        tr.section("tdiff summary")
        for s in sorted(self.summaries, key=lambda s: s["id"]):
            for line in check_lines(s):
                tr.write_line(line)
        for line in total_lines(self.summaries):
            tr.write_line(line)


_KEY = pytest.StashKey[TdiffSession]()
CHECK_KEY = pytest.StashKey["Check"]()  # the check an item runs (a TdiffItem, or a fuzz target's Function)


def _session(config: pytest.Config) -> TdiffSession | None:
    return config.stash.get(_KEY, None) if config.getoption("tdiff") else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tdiff: a test item made from a @tdiff.check declaration")
    if not config.getoption("tdiff"):
        return
    session = config.stash[_KEY] = TdiffSession(config)  # (bad options fail here, early)
    config.pluginmanager.register(session, "tdiff-session")
    session.warm()
    source = getattr(config, "args_source", None)
    explicit = source is not None and source.name == "ARGS"
    if not explicit:  # no paths given: add tdiff_paths to what pytest collects
        root = Path(str(config.rootpath))
        for p in config.getini("tdiff_paths"):
            path = str(root / p)
            if os.path.exists(path) and path not in config.args:
                config.args.append(path)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    session = _session(config)
    return session.header() if session is not None else None


def _in_tdiff_paths(config: pytest.Config, path: Path) -> bool:
    root = Path(str(config.rootpath))
    for p in config.getini("tdiff_paths"):
        try:
            path.resolve().relative_to((root / p).resolve())
            return True
        except ValueError:
            continue
    return False


def _is_test_module(config: pytest.Config, path: Path) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(path.name, pat) for pat in config.getini("python_files"))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if _session(config) is None or file_path.suffix != ".py":
        return None
    if file_path.name in ("conftest.py", "__init__.py") or file_path.name.startswith("_"):
        return None
    if not _in_tdiff_paths(config, file_path) or _is_test_module(config, file_path):
        return None  # a test module: pytest collects it, and pytest_pycollect_makeitem adds its checks
    return TdiffModule.from_parent(parent, path=file_path)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """A test module's items, plus an item for each check the module declares (on its own kernels or
    on kernels imported from elsewhere, bound to a name or not), once."""
    outcome = yield
    if _session(collector.config) is None or not isinstance(collector, pytest.Module) \
            or isinstance(collector, TdiffModule):
        return
    report = outcome.get_result()
    path = Path(str(collector.path))
    if report.outcome != "passed" or (_in_tdiff_paths(collector.config, path)
                                      and not _is_test_module(collector.config, path)):
        return  # (a module under tdiff_paths named on the command line: its TdiffModule has the checks)
    from .declaration import declared_in

    module = getattr(collector.obj, "__name__", None)
    report.result.extend(_item(collector, c) for c in declared_in(module))


class TdiffModule(pytest.Module):
    """A module under tdiff_paths: its items are the checks it declares, nothing else."""

    def collect(self) -> list[pytest.Item]:
        from .declaration import declared_in

        mod = self.obj
        return [_item(self, c) for c in declared_in(mod.__name__)]


def _item(parent: pytest.Collector, check: Check) -> pytest.Item:
    """The check's item: a TdiffItem (its search, shrinking, report), or, with --tdiff-fuzz-targets, a
    pytest.Function around a hypothesis test of one case per example (HypoFuzz fuzzes those)."""
    if not parent.config.getoption("tdiff_fuzz_targets"):
        return TdiffItem.from_parent(parent, name=check.item_name, check=check)
    from .drive.fuzz import hypothesis_test

    session = parent.config.stash[_KEY]
    item = pytest.Function.from_parent(parent, name=check.item_name,
                                       callobj=hypothesis_test(check, session.get_runner, session.get_recorder))
    item.stash[CHECK_KEY] = check
    item.add_marker("tdiff")
    for mark in getattr(check, "marks", ()) or ():
        item.add_marker(mark)
    return item


class TdiffFailure(Exception):
    """A check failed; the message is tdiff's report."""


class TdiffItem(pytest.Item):
    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.stash[CHECK_KEY] = check
        self.add_marker("tdiff")
        for mark in getattr(check, "marks", ()) or ():
            self.add_marker(mark)

    def runtest(self) -> None:
        from .record.summary import record

        session = self.config.stash[_KEY]
        result = session.get_runner().run_check(self.check)
        summary = record(result)
        self.user_properties.append((RESULTS_KEY, json.dumps(summary)))
        self.user_properties.append(("tdiff_compared", result.compared))
        if result.discarded:
            self.user_properties.append(("tdiff_not_judged", json.dumps(dict(result.discarded))))
        if summary["caveats"]:
            self.user_properties.append(("tdiff_caveats", json.dumps(summary["caveats"])))
        if summary["never_ran"]:
            self.user_properties.append(("tdiff_never_ran", json.dumps(summary["never_ran"])))
        failed = result.failures
        if failed:
            self.user_properties.append(("tdiff_verdict", ", ".join(d.verdict.label for d in failed)))
            paths = [str(d.repro_path) for d in failed if d.repro_path]
            if paths:
                self.user_properties.append(("tdiff_reproducer", ", ".join(paths)))
        if result.status in ("failed", "error"):
            raise TdiffFailure(result.report() or "; ".join(result.notes))
        if result.status == "skipped":
            pytest.skip("; ".join(result.notes) or "no case could be judged")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, TdiffFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.name} (tdiff)"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the checks of other shards (--tdiff-shard); run the checks that took longest last time
    first (shortest makespan under xdist); checks never timed run first of all. Other items keep their places."""
    state = _session(config)
    if state is not None and state.options.shard is not None:
        from .drive.shard import in_shard

        shard = state.options.shard
        keep = [it for it in items if CHECK_KEY not in it.stash or in_shard(it.stash[CHECK_KEY].id, shard)]
        if len(keep) != len(items):
            kept = set(map(id, keep))
            config.hook.pytest_deselected(items=[it for it in items if id(it) not in kept])
            items[:] = keep
    cache = getattr(config, "cache", None)
    if state is None or cache is None:
        return
    known = cache.get(DURATIONS_KEY, {})
    slots = [i for i, it in enumerate(items) if isinstance(it, TdiffItem)]
    if not known or len(slots) < 2:
        return
    ordered = sorted((items[i] for i in slots), key=lambda it: -known.get(it.nodeid, float("inf")))
    for i, it in zip(slots, ordered):
        items[i] = it


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


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None) if hasattr(config, "stash") else None
    if state is not None:
        state.close()
        if config.pluginmanager.is_registered(state):
            config.pluginmanager.unregister(state)
