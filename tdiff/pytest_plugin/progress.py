"""Progress of a check while it runs: cases drawn, judged, and time so far.

The runner reports each phase and case to `Progress.update`. In a process that runs the check itself,
a line is written every `interval` seconds from a thread (pytest's capture set aside, as its live
logging does). An xdist worker cannot write to the controller's terminal: it keeps its state in a
small JSON file of its own under the run directory (`<run dir>/progress/<run>/<worker>.json`), and the
controller reads those files every few seconds from its own main loop (an event it puts on xdist's
queue, so its writes never interleave with pytest's), reporting the checks that have run long.
Lines start on a line of their own: a partial line of progress characters is first ended with pytest's
percentage, as pytest ends its lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: the key of xdist's workerinput naming the folder the workers write their progress files to
WORKER_INPUT = "tdiff_progress"
#: how often (seconds) a worker rewrites its file while cases run, at most
WRITE_EVERY = 1.0


def describe(state: dict, now: float | None = None) -> str:
    """One progress line: `tdiff: running 42s: path::check[tdiff] [gw1]: searching, 12 of 20 cases (12 judged)`."""
    now = time.time() if now is None else now
    worker = f" [{state['worker']}]" if state.get("worker") else ""
    limit = f" of {state['max_examples']}" if state.get("max_examples") else ""
    shrinks = f", {state['shrinks']} shrink runs" if state.get("shrinks") else ""
    return (f"tdiff: running {now - state['started']:.0f}s: {state['nodeid']}{worker}: {state['phase']}, "
            f"{state['cases']}{limit} cases ({state['judged']} judged){shrinks}")


class Progress:
    """The running check's progress in this process (the runner's `Progress`), and its display."""

    def __init__(self, config: pytest.Config, run_dir: Path | None, interval: float, verbose: bool) -> None:
        self.config = config
        self.interval = interval
        self.verbose = verbose
        # an xdist worker is told so by its workerinput (not by the environment, which a pytest started
        # inside a worker inherits)
        inputs = getattr(config, "workerinput", None) or {}
        self.worker: str | None = inputs.get("workerid")
        self.state: dict | None = None
        self.run_dir = run_dir
        folder = inputs.get(WORKER_INPUT)
        self.file = Path(folder) / f"{self.worker}.json" if folder and self.worker and interval > 0 else None
        self._written = 0.0
        self._lock = threading.Lock()
        self._thread: _Ticker | None = None
        self.folder: Path | None = None  # the controller's: where its workers write
        self._shown: dict[str, float] = {}  # nodeid -> when the controller last showed it

    # -- the runner's side ---------------------------------------------------------------
    @contextlib.contextmanager
    def running(self, nodeid: str, check_id: str) -> Iterator[None]:
        """While a check's item runs: its state, published (a worker's file) or shown (this terminal)."""
        self.state = {"nodeid": nodeid, "check": check_id, "worker": self.worker, "started": time.time(),
                      "phase": "starting", "cases": 0, "judged": 0, "max_examples": None}
        self._publish(force=True)
        ticker = None
        if self.interval > 0 and self.worker is None:
            ticker = _Ticker(self.interval, self._show_here)
            ticker.start()
        try:
            yield
        finally:
            if ticker is not None:
                ticker.stop()
            self.state = None
            self._publish(force=True)

    def update(self, tally: Any, phase: str) -> None:
        state = self.state
        if state is None:
            return
        changed = (phase, tally.max_examples) != (state["phase"], state["max_examples"])
        state.update(phase=phase, cases=tally.cases, judged=tally.judged, max_examples=tally.max_examples,
                     shrinks=tally.search_shrinks)
        self._publish(force=changed)

    def _publish(self, force: bool) -> None:
        if self.file is None or (not force and time.monotonic() - self._written < WRITE_EVERY):
            return
        self._written = time.monotonic()
        try:
            tmp = self.file.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(self.state or {}))
            os.replace(tmp, self.file)
        except OSError:
            pass  # (progress is shown on a best-effort basis: the controller may have removed the folder)

    # -- this process's terminal ---------------------------------------------------------
    def _show_here(self) -> None:
        state = self.state
        if state is None:
            return
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        if tr is None:
            return
        with self._lock, (capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()):
            tw = tr._tw
            if tw.width_of_current_line:
                if not self.verbose and tr.currentfspath not in (None, -2):
                    _end_with_percentage(tr)
                tw.line()
            tw.write(describe(state))
            tw.flush()
            tr.currentfspath = None  # pytest's next line starts anew (a verbose item's name, a file's path)

    # -- the xdist controller ---------------------------------------------------------------
    def configure_node(self, node: Any) -> None:
        """On the controller: give a worker the folder of this run's progress files; watch them."""
        if self.interval <= 0 or self.run_dir is None:
            return
        if self.folder is None:
            from ..core.settings import prepare_run_dir

            prepare_run_dir(self.run_dir)
            self.folder = Path(self.run_dir) / "progress" / uuid.uuid4().hex[:12]
            self.folder.mkdir(parents=True, exist_ok=True)
            self._watch()
        node.workerinput[WORKER_INPUT] = str(self.folder)

    def _watch(self) -> None:
        dsession = self.config.pluginmanager.getplugin("dsession")
        queue = getattr(dsession, "queue", None)
        if queue is None:
            return  # (not xdist's controller as we know it: no progress shown)
        dsession.worker_tdiff_progress = self._show_workers  # called by xdist's main loop, like its own events
        tick = max(0.5, min(2.0, self.interval / 2))
        self._thread = _Ticker(tick, lambda: queue.put(("tdiff_progress", {})))
        self._thread.start()

    def _show_workers(self) -> None:
        now = time.time()
        lines = []
        for f in sorted(self.folder.glob("*.json")) if self.folder else ():
            try:
                state = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            nodeid = state.get("nodeid")
            if not nodeid or now - state["started"] < self.interval:
                continue
            if now - self._shown.get(nodeid, 0.0) < self.interval:
                continue
            self._shown[nodeid] = now
            lines.append(describe(state, now))
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if not lines or tr is None:
            return
        tw = tr._tw
        if tw.width_of_current_line:
            if not self.verbose:
                _end_with_percentage(tr)
            tw.line()
        for line in lines[:-1]:
            tw.line(line)
        if self.verbose:  # pytest's next line (an item starting or its result) ends this one
            tw.write(lines[-1])
            tr.currentfspath = -2
        else:  # progress characters follow on a line of their own
            tw.line(lines[-1])
            tr.currentfspath = None
        tw.flush()

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.folder.parent.rmdir()  # (only when no other run's progress is there)
            self.folder = None


def _end_with_percentage(tr: Any) -> None:
    """End pytest's partial line of progress characters with its percentage, as pytest does at its ends."""
    with contextlib.suppress(Exception):  # (a pytest without it: the line is just ended)
        if tr._show_progress_info:
            tr._write_progress_information_filling_space()


class _Ticker(threading.Thread):
    """Calls `fn` every `seconds` until stopped (a daemon: it never holds the process)."""

    def __init__(self, seconds: float, fn: Any) -> None:
        super().__init__(name="tdiff-progress", daemon=True)
        self.seconds, self.fn = seconds, fn
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.seconds):
            with contextlib.suppress(Exception):  # progress must never break a run
                self.fn()

    def stop(self) -> None:
        self._halt.set()
        if self is not threading.current_thread():
            self.join(timeout=5)
