"""pytest plugin: `pytest --tdiff` collects every `@tdiff.check` and runs it as a test item.

Hooks only: each delegates to `tdiff.pytest_plugin` (the session's state, collection and items,
ordering, progress, terminal output, the JSON file). Without `--tdiff` nothing changes, except that a
failing `tdiff.verify` in any test shows its report once. Nothing heavy is imported at module level:
pytest loads this plugin in every run, and the xdist controller never needs torch or triton.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .pytest_plugin.items import CHECK_KEY, RESULTS_KEY, TdiffItem, TdiffModule
from .pytest_plugin.session import SESSION_KEY, TdiffSession, session_of

__all__ = ["CHECK_KEY", "RESULTS_KEY", "TdiffItem", "TdiffModule", "TdiffSession"]


def pytest_addoption(parser: pytest.Parser) -> None:
    from .options import register

    group = parser.getgroup("tdiff", "differential testing of Triton kernels")
    group.addoption("--tdiff", action="store_true", default=False,
                    help="collect @tdiff.check kernels (from collected modules and tdiff_paths) and test them")
    register(group.addoption, parser.addini)  # (every --tdiff-NAME and tdiff_NAME, from tdiff.options.OPTIONS)
    parser.addini("tdiff_paths", "directories or files with @tdiff.check kernels, collected with --tdiff",
                  type="args", default=["suites"])
    group.addoption("--tdiff-fuzz-targets", action="store_true", default=False,
                    help="collect each check as a plain hypothesis test (one case per example, tdiff's pipeline "
                         "in its body) for HypoFuzz: hypothesis fuzz -- --tdiff --tdiff-fuzz-targets PATHS")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tdiff: a test item made from a @tdiff.check declaration")
    if not config.getoption("tdiff"):
        return
    session = config.stash[SESSION_KEY] = TdiffSession(config)  # (bad options fail here, early)
    config.pluginmanager.register(_SessionHooks(session), "tdiff-session")
    session.warm()
    source = getattr(config, "args_source", None)
    explicit = source is not None and source.name == "ARGS"
    if not explicit:  # no paths given: add tdiff_paths to what pytest collects
        root = Path(str(config.rootpath))
        for p in config.getini("tdiff_paths"):
            path = str(root / p)
            if os.path.exists(path) and path not in config.args:
                config.args.append(path)


def pytest_sessionstart(session: pytest.Session) -> None:
    state = session_of(session.config)
    # after every plugin's pytest_configure (hypothesis's loads --hypothesis-profile there), before the
    # fuzz targets are made: they and HypoFuzz take the default profile's database
    if state is not None and state.fuzz and state.options.database is not None:
        from .drive.database import use_as_default

        use_as_default(state.options.database)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = session_of(config)
    return state.header() if state is not None else None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(xdist's controller, per worker) where the worker writes its progress file."""
    state = session_of(node.config)
    if state is not None:
        state.progress.configure_node(node)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    from .pytest_plugin.items import collects_as_module, module_name

    state = session_of(parent.config)
    if state is None or not collects_as_module(parent.config, file_path):
        return None
    name = module_name(parent.config, file_path)
    if name:  # (as pytest will import it, before it does: the zygote imports it while this process does)
        state.preload([name])
    return TdiffModule.from_parent(parent, path=file_path)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """A test module's items, plus an item for each check the module declares, once."""
    outcome = yield
    state = session_of(collector.config)
    if state is not None:
        from .pytest_plugin.items import add_declared_checks

        report = outcome.get_result()
        add_declared_checks(collector, report)
        # (each module's checks as soon as it is collected: the zygote imports it while collection goes on)
        state.preload([it.stash[CHECK_KEY].module for it in report.result if CHECK_KEY in it.stash])


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = session_of(config)
    if state is None:
        return
    from .pytest_plugin import ordering

    if state.options.shard is not None:
        from .drive.shard import in_shard

        shard = state.options.shard
        ordering.keep_shard(config, items, lambda it: CHECK_KEY not in it.stash or in_shard(it.stash[CHECK_KEY].id,
                                                                                               shard))
    ordering.slowest_first(config, items, lambda it: isinstance(it, TdiffItem))
    state.collected([it.stash[CHECK_KEY].module for it in items if CHECK_KEY in it.stash])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    if call.excinfo is not None:
        from .pytest_plugin.terminal import shorten_crash

        shorten_crash(outcome.get_result(), call.excinfo.value)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    if session_of(config) is None:
        return None
    from .pytest_plugin.terminal import teststatus

    return teststatus(report, RESULTS_KEY)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session_of(session.config)
    if state is None:
        return
    from .pytest_plugin import ordering

    ordering.save_durations(session.config, state.durations)
    if state.json_path is not None and not hasattr(session.config, "workerinput"):
        from .pytest_plugin import json_report

        json_report.write(state.json_path, state.ran)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = session_of(config)
    if state is not None:
        from .pytest_plugin.terminal import write_summary

        write_summary(terminalreporter, state.ran, state.verbose or state.summary_mode == "full")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(SESSION_KEY, None) if hasattr(config, "stash") else None
    if state is not None:
        state.close()
        hooks = config.pluginmanager.get_plugin("tdiff-session")
        if hooks is not None:
            config.pluginmanager.unregister(hooks)



class _SessionHooks:
    """The hooks that need the session but are not given the config: registered per session."""

    def __init__(self, state: TdiffSession) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.state.collect(report)
