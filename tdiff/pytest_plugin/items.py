"""Collection and the test item: a module of checks (`TdiffModule`), the item of one check (`TdiffItem`),
or, with --tdiff-fuzz-targets, a plain hypothesis test around it."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .session import RESULTS_KEY, session_of_item

if TYPE_CHECKING:
    from ..declaration import Check
    from ..record.check_record import CheckRecord

CHECK_KEY = pytest.StashKey["Check"]()  # the check an item runs (a TdiffItem, or a fuzz target's Function)


class TdiffModule(pytest.Module):
    """A module under tdiff_paths: its items are the checks it declares, nothing else."""

    def collect(self) -> list[pytest.Item]:
        from ..declaration import declared_in

        mod = self.obj
        return [make_item(self, c) for c in declared_in(mod.__name__)]


def make_item(parent: pytest.Collector, check: Check) -> pytest.Item:
    """The check's item: a TdiffItem (its search, shrinking, report), or, with --tdiff-fuzz-targets, a
    pytest.Function around a hypothesis test of one case per example (HypoFuzz fuzzes those)."""
    if not parent.config.getoption("tdiff_fuzz_targets"):
        return TdiffItem.from_parent(parent, name=check.item_name, check=check)
    from ..drive.fuzz import hypothesis_test

    session = session_of_item(parent)
    item = pytest.Function.from_parent(parent, name=check.item_name,
                                       callobj=hypothesis_test(check, session.get_runner, session.get_recorder,
                                                               session.options))
    item.stash[CHECK_KEY] = check
    item.add_marker("tdiff")
    for mark in getattr(check, "marks", ()) or ():
        item.add_marker(mark)
    return item


class TdiffFailure(Exception):
    """A check failed (a divergence); the message is tdiff's report."""


class TdiffError(Exception):
    """A check could not be judged as declared (its run's own error: a strategy or `launch` that raises, a setup
    error, a corpus entry it cannot read); never what an xfail mark expects."""


def _marks(check: Check) -> list[Any]:
    """The check's marks, an xfail without `raises=` expecting a divergence only (`TdiffFailure`): a check that
    errors (or tdiff itself raising) fails, not XFAIL."""
    out = []
    for mark in getattr(check, "marks", ()) or ():
        m = getattr(mark, "mark", mark)
        if m.name == "xfail" and "raises" not in m.kwargs:
            mark = pytest.mark.xfail(*m.args, **{**m.kwargs, "raises": TdiffFailure})
        out.append(mark)
    return out


class TdiffItem(pytest.Item):
    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.stash[CHECK_KEY] = check
        self.add_marker("tdiff")
        for mark in _marks(check):
            self.add_marker(mark)

    def runtest(self) -> None:
        from ..record.check_record import CheckRecord
        from ..record.status import Status

        session = session_of_item(self)
        with session.progress.running(self.nodeid, self.check.id):
            result = session.get_runner().run_check(self.check)
        self.user_properties += properties(result, CheckRecord.of(result))
        if result.status.bad:
            raise (TdiffFailure if result.status == Status.FAILED else TdiffError)(result.report()
                                                                               or "; ".join(result.notes))
        if result.status == Status.SKIPPED:
            pytest.skip("; ".join(result.notes) or "no case could be judged")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """tdiff's report as it is (no traceback); pytest's short summary, which in CI repeats a message
        whole, gets its first line."""
        if not isinstance(excinfo.value, (TdiffFailure, TdiffError)):
            return super().repr_failure(excinfo)
        rep = excinfo.getrepr(style="value")
        crash = getattr(rep, "reprcrash", None)
        if crash is not None:
            crash.message = str(excinfo.value).split("\n", 1)[0]
        return rep

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.name} (tdiff)"


def properties(result: Any, record: CheckRecord) -> list[tuple[str, str]]:
    """The JUnit properties of a check's item: its whole record, and the `tdiff_*` properties CI reads."""
    out = [(RESULTS_KEY, json.dumps(record.to_record())), ("tdiff_compared", result.compared)]
    if result.environments:
        out.append(("tdiff_environments", json.dumps({**result.environments, "here": result.here})))
    if result.discarded:
        out.append(("tdiff_not_judged", json.dumps(dict(result.discarded))))
    if record.caveats:
        out.append(("tdiff_caveats", json.dumps(list(record.caveats))))
    if record.never_ran:
        out.append(("tdiff_never_ran", json.dumps(list(record.never_ran))))
    failed = result.failures
    if failed:
        out.append(("tdiff_verdict", ", ".join(d.verdict.label for d in failed)))
        paths = [str(d.repro_path) for d in failed if d.repro_path]
        if paths:
            out.append(("tdiff_reproducer", ", ".join(paths)))
    return out


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
    return any(fnmatch.fnmatch(path.name, pat) for pat in config.getini("python_files"))


def collects_as_module(config: pytest.Config, path: Path) -> bool:
    """Whether a file is collected as a `TdiffModule`: a module under tdiff_paths that is not a test module
    (pytest collects those, and `add_declared_checks` adds their checks)."""
    if path.suffix != ".py" or path.name in ("conftest.py", "__init__.py") or path.name.startswith("_"):
        return False
    return _in_tdiff_paths(config, path) and not _is_test_module(config, path)


def module_name(config: pytest.Config, path: Path) -> str | None:
    """The name pytest will import a module file under, found as pytest finds it (`--import-mode` prepend or
    append); None where it cannot be told before the import (importlib mode, another pytest)."""
    if str(config.getoption("importmode", "prepend")) == "importlib":
        return None
    try:
        from _pytest.pathlib import CouldNotResolvePathError, resolve_pkg_root_and_module_name

        namespaces = bool(config.getini("consider_namespace_packages"))
        try:
            return resolve_pkg_root_and_module_name(path, consider_namespace_packages=namespaces)[1]
        except CouldNotResolvePathError:  # (no package: pytest imports the file by its stem, its folder on the path)
            return path.stem
    except Exception:  # noqa: BLE001  (another pytest: the module is named once it is imported)
        return None


def add_declared_checks(collector: pytest.Collector, report: pytest.CollectReport) -> None:
    """Add to a test module's collected items an item for each check the module declares (on its own
    kernels or on kernels imported from elsewhere, bound to a name or not)."""
    if not isinstance(collector, pytest.Module) or isinstance(collector, TdiffModule):
        return
    path = Path(str(collector.path))
    if report.outcome != "passed" or collects_as_module(collector.config, path):
        return  # (a module under tdiff_paths named on the command line: its TdiffModule has the checks)
    from ..declaration import declared_in

    module = getattr(collector.obj, "__name__", "")
    report.result.extend(make_item(collector, c) for c in declared_in(module))
