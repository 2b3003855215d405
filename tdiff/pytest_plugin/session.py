"""`TdiffSession`: the state of one pytest session with --tdiff (its options, runner, progress, and the
records of the checks that ran), kept in `config.stash`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from ..core.backend_spec import BackendSpec, Lane
from ..record.check_record import CheckRecord

SESSION_KEY = pytest.StashKey["TdiffSession"]()

#: the user property under which a check item hands its whole record to the controller (and to JUnit XML)
RESULTS_KEY = "tdiff_result"


@dataclass(frozen=True)
class Ran:
    """A check that ran: its record (a record's dict is read back once, here) and how pytest labelled it."""

    nodeid: str
    record: CheckRecord
    label: str  # PASSED, FAILED, ERROR, SKIPPED, XFAIL, XPASS, XPASS(strict)
    reason: str = ""  # an xfail's reason

    def __post_init__(self) -> None:
        if not isinstance(self.record, CheckRecord):
            object.__setattr__(self, "record", CheckRecord.from_record(self.record))

    def as_json(self) -> dict[str, Any]:
        return {**self.record.to_record(), "nodeid": self.nodeid, "outcome": self.label,
                "xfail_reason": self.reason or None}


def session_of(config: pytest.Config) -> TdiffSession | None:
    """The session's tdiff state; None without --tdiff."""
    return config.stash.get(SESSION_KEY, None) if config.getoption("tdiff") else None


def session_of_item(node: pytest.Item | pytest.Collector) -> TdiffSession:
    return node.config.stash[SESSION_KEY]


def get_option(config: pytest.Config, name: str) -> Any:
    """A --tdiff-NAME option, or its ini key tdiff_NAME; None when neither is given."""
    key = f"tdiff_{name.replace('-', '_')}"
    value = config.getoption(key)
    return config.getini(key) if value is None else value


class TdiffSession:
    """The state of one pytest session with --tdiff: options, runner, progress, the checks that ran."""

    def __init__(self, config: pytest.Config) -> None:
        from .. import options
        from ..execute.gpus import GPUError, gpu_for_worker
        from .progress import Progress

        self.config = config
        self.warm_lanes: list[Lane] = []  # (the lanes `warm` started for, in a test process)
        worker = re.match(r"gw(\d+)$", os.environ.get("PYTEST_XDIST_WORKER", ""))
        self.xdist_worker = int(worker.group(1)) if worker else None
        self.fuzz = bool(config.getoption("tdiff_fuzz_targets"))
        try:
            gpu = gpu_for_worker(self.xdist_worker) if self.xdist_worker is not None else None
            get = lambda name: get_option(config, name)  # noqa: E731
            self.options = options.build(get, Path(str(config.rootpath)), gpu)
            if config.getoption("runxfail", False):  # (xfail checks run as any other: shrunk, reduced, reproduced)
                self.options = self.options.with_(shrink_expected=True, reduce_expected=True)
            self.summary_mode = options.value(get, "summary") or "short"
            interval = options.value(get, "progress")
            json_path = options.value(get, "json")
        except (ValueError, GPUError) as exc:
            raise pytest.UsageError(str(exc)) from None
        self.verbose = config.get_verbosity() > 0
        if interval is None:
            interval = 10.0 if self.verbose else 30.0
        self.json_path = Path(config.invocation_params.dir, json_path) if json_path else None
        self.progress = Progress(config, self.options.run_dir, interval, self.verbose)
        self.runner: Any = None
        self.recorder: Any = None
        self.slot: int | None = None
        self.compat: list[str] = []  # hypothesis names aliased for HypoFuzz (tdiff.drive.fuzz.hypofuzz_compat)
        if self.fuzz:
            from ..drive.fuzz import hypofuzz_compat

            self.compat = hypofuzz_compat()
        self.ran: list[Ran] = []
        self.durations: dict[str, float] = {}

    def pin(self) -> None:
        """A fuzz process that xdist does not number (HypoFuzz's) claims a slot of this machine and pins its
        GPU worker to GPU slot % count (tdiff.execute.pinning); once, before its first worker starts."""
        if not self.fuzz or self.xdist_worker is not None or self.slot is not None:
            return
        from ..execute.pinning import fuzz_process_gpu

        self.slot, gpu = fuzz_process_gpu()
        if gpu is not None:
            self.options = self.options.with_(gpu=gpu)

    def get_runner(self) -> Any:
        if self.runner is None:
            from ..drive.runner import Runner

            self.pin()
            self.runner = Runner(self.options, progress=self.progress)
        return self.runner

    def get_recorder(self) -> Any:
        """The campaign recorder of this process (--tdiff-campaign), or None."""
        if self.options.campaign_dir is None:
            return None
        if self.recorder is None:
            from ..record.campaign import Recorder

            self.pin()
            self.recorder = Recorder(self.options.campaign_dir, {"slot": self.slot, "gpu": self.options.gpu,
                                                                 "xdist_worker": self.xdist_worker})
        return self.recorder

    @property
    def is_controller(self) -> bool:
        """An xdist controller: it runs no tests, its workers do."""
        config = self.config
        return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")

    def warm(self) -> None:
        """Start the worker processes at once: their imports (torch, triton) and CUDA set-up then
        overlap with this process's own imports and collection."""
        if self.config.option.collectonly or self.options.isolation == "none":
            return
        from ..core.backend_spec import default_backends
        from ..execute import forkserver
        from ..execute.gpus import device_count

        backends = self.options.backends or default_backends(device_count() > 0)
        if not hasattr(self.config, "workerinput"):  # the process pytest started: the host's zygotes, for every
            # test process of the run (xdist's workers start after this and inherit where they listen)
            forkserver.host_start(["cpu", "gpu"] if any(b.lane.sees_gpu for b in backends) else ["cpu"])
        if self.is_controller:
            return  # (an xdist controller runs no tests: its workers warm their own lanes)
        from ..execute.workers import shared_pool

        self.pin()
        self.warm_lanes = lanes_to_warm(backends, self.options.compile_ahead, device_count() > 0)
        shared_pool(self.options.gpu).warm(self.warm_lanes)

    def collected(self, modules: list[str]) -> None:
        """Collection is over: the zygotes get the modules of the checks this process runs (`preload`), and the
        lanes that see the GPU fork now (once their zygote has imported what it can of those: it stops at its first
        fork): their CUDA set-up overlaps with the first check's work on the CPU lanes instead of delaying it."""
        self.preload(modules)
        if modules and self.warm_lanes and not self.config.option.collectonly:
            from ..execute.workers import shared_pool

            shared_pool(self.options.gpu).start_gpu_lanes(self.warm_lanes)

    def preload(self, modules: list[str]) -> None:
        """The modules that declare the checks this process runs: the workers' zygote imports them once, for every
        worker it forks (tdiff.execute.forkserver)."""
        if self.is_controller or self.options.isolation == "none":
            return
        from ..execute import forkserver

        forkserver.preload(sorted({m for m in modules if m and not m.startswith("__")}))

    def header(self) -> list[str]:
        from ..core.backend_spec import COMPILE_ONLY_ARCH, default_backends, labels
        from ..execute.gpus import device_count

        opts = self.options
        gpu = device_count() > 0
        skipped = "" if gpu else " (no CUDA GPU: the compiled backend is skipped" + (
            f"; compile-only: the specializations compiled for sm_{COMPILE_ONLY_ARCH}, not run" if opts.compile_only
            else "") + ")"
        what = ", ".join(labels(opts.backends)) if opts.backends else " and ".join(labels(default_backends(gpu))) + \
            skipped
        corpus = os.pathsep.join(_rel(p, self.config) for p in opts.corpora()) or "off"
        extra = f"; shard {opts.shard[0]}/{opts.shard[1]}" if opts.shard else ""
        if opts.database is not None:
            from ..drive.database import describe

            extra += f"; example database {describe(opts.database)}"
        if self.compat:
            extra += f"; for HypoFuzz, hypothesis's span_comments also named {' and '.join(self.compat)}"
        writes = f"new entries to {_rel(opts.corpus_dir, self.config)}" if opts.corpus_dir else ""
        repro = f"reproducers to {_rel(opts.repro_dir, self.config)}" if opts.repro_dir else "no reproducers"
        return [f"tdiff: {what} on every case, plus each check's reference; profile {opts.profile}; "
                f"corpus {corpus}" + (f" ({writes})" if writes else "") + f"; {repro}; isolation {opts.isolation}"
                f"{extra}"]

    def collect(self, report: pytest.TestReport) -> None:
        """Keep the record of a check's call report, labelled as pytest labels it."""
        from .terminal import label_of, xfail_reason

        blob = dict(report.user_properties).get(RESULTS_KEY) if report.when == "call" else None
        if blob is None:
            return
        record = CheckRecord.from_record(json.loads(cast(str, blob)))  # (items.properties stores it as a JSON string)
        self.ran.append(Ran(report.nodeid, record, label_of(report), xfail_reason(report)))
        self.durations[report.nodeid] = record.wall

    def close(self) -> None:
        self.progress.stop()
        if self.runner is not None or self.options.isolation != "none":
            from ..execute.workers import close_shared

            close_shared(wait=False)  # the workers exit on their own (CUDA teardown): no need to wait for them


def _rel(path: Any, config: pytest.Config) -> str:
    try:
        return os.path.relpath(str(path), str(config.invocation_params.dir))
    except ValueError:  # pragma: no cover (another drive)
        return str(path)


def lanes_to_warm(backends: Sequence[BackendSpec], compile_ahead: int | None, gpu: bool) -> list[Lane]:
    """The lanes a test process starts early: its opinions' and the reference's, and on a GPU the compile workers
    its checks will use (`drive.runner.ahead_workers`)."""
    from ..execute import ahead

    lanes = sorted({b.lane for b in backends} | {Lane("ref")})
    if gpu and compile_ahead != 0 and any(b.plain_compiled for b in backends):
        lanes += ahead.lanes(ahead.workers(compile_ahead))
    return lanes
