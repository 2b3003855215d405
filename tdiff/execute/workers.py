"""Isolated execution: one long-lived worker process per lane; a crash or hang fails one case only.

Workers are forked from zygotes that have imported torch, Triton, tdiff and the checks' modules once per host
(`forkserver`: one for the lanes that use no GPU, with CUDA hidden; one for the lanes that see the GPU, which never
initializes CUDA, so a fork can); workers in another environment, and every worker where forking is off or refused,
are started with `subprocess` (a fresh interpreter). Both talk over a pipe. A worker that crashes, times out or
reports its CUDA context poisoned is replaced on the next request; healthy workers are reused for every case.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import IO, TYPE_CHECKING, Any

from ..core.backend_spec import BackendSpec, Lane
from ..core.outcome import ErrorInfo, Outcome
from . import forkserver, wire
from .backends.run_case import run_case

if TYPE_CHECKING:
    from ..core.case import Case

OUTPUT_TAIL = 20_000
# the worker sees this process's sys.path before importing tdiff (which may not be installed)
_BOOT = ("import json, os, sys; sys.path[:0] = [p for p in json.loads(os.environ['TDIFF_SYS_PATH']) "
         "if p not in sys.path]; from tdiff.execute.worker_main import main; main()")


def spin_seconds() -> float:
    """How long a waiting process busy-polls its pipe before it blocks (0: it blocks at once).

    Waking a blocked process took 0.1 to 0.4 ms on our GPU machine (a VM whose idle cores sleep
    deeply), as much as all the rest of a small case's overhead. Spinning avoids that but holds a
    core, so it is on only with two cores or more per busy process (a test process and its two
    lanes, times the xdist workers). TDIFF_SPIN_MS sets it instead.
    """
    env = os.environ.get("TDIFF_SPIN_MS")
    if env:
        return max(0.0, float(env)) / 1e3
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    busy = 3 * max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))
    return 0.02 if cores >= 2 * busy else 0.0


def spin_until_readable(fd: int, seconds: float) -> bool:
    """Busy-poll `fd` for up to `seconds`; True once it is readable."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        if poller.poll(0):
            return True
    return False


@dataclass
class Job:
    target: Any  # a TargetRef (resolved in the worker) or, in-process, a check
    spec: BackendSpec
    case: Case


@dataclass
class Ahead:
    """Cases whose specializations a compile worker compiles ahead of use, in order, until told to stop
    (`Pool.ahead` / `Pool.stop_ahead`)."""

    target: Any
    cases: list
    lane: Lane


#: what a compile worker is sent when the search no longer needs its compiles
STOP_AHEAD = "stop-ahead"


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class Worker:
    """One child process serving jobs for one lane."""

    def __init__(self, lane: str, env: dict[str, str], spin: float = 0.0, python: str | None = None) -> None:
        self.lane = lane
        self.env = env
        self.python = python or sys.executable  # another environment's Python for its lanes
        self.spin = spin
        self.proc: subprocess.Popen | forkserver.Forked | None = None
        self.conn_out: Connection | None = None
        self.conn_in: Connection | None = None
        self.log: IO[bytes] | None = None
        self.log_pos = 0
        self.starts = 0
        self.stopping = False  # asked to exit, not yet reaped

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def forks(self) -> bool:
        """Whether this worker is forked from a zygote (`forkserver`): a lane of this environment."""
        own = _lane(self.lane)
        return not own.python and self.python == sys.executable and forkserver.enabled()

    @property
    def zygote_kind(self) -> forkserver.Kind:
        """The zygote it forks from: `gpu` for the lanes that see the GPU, `cpu` for the others."""
        return "gpu" if _lane(self.lane).sees_gpu else "cpu"

    def start(self) -> None:
        self.stop()
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        prefix = "tdiff-" + "".join(c if c.isalnum() else "_" for c in self.lane)[:40] + "-"
        self.log = tempfile.TemporaryFile(prefix=prefix)  # noqa: SIM115 (lives with the worker)
        self.log_pos = 0
        forked = forkserver.fork(r1, w2, self.log.fileno(), self.env, self.zygote_kind) if self.forks else None
        self.proc = forked if forked is not None else subprocess.Popen(
            [self.python, "-c", _BOOT, str(r1), str(w2)],
            pass_fds=(r1, w2), stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=self.env,
        )
        os.close(r1)
        os.close(w2)
        self.conn_out = Connection(w1, readable=False)
        self.conn_in = Connection(r2, writable=False)
        self.starts += 1

    def ask_to_stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None and not self.stopping:
            try:
                self.send(wire.dumps(None))
                self.stopping = True
            except OSError:
                pass

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.ask_to_stop()
                self.proc.wait(timeout=2)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        for c in (self.conn_out, self.conn_in):
            if c is not None:
                c.close()
        self.proc, self.conn_out, self.conn_in = None, None, None
        self.stopping = False
        if self.log is not None:
            self.log.close()
            self.log = None

    def output(self) -> str:
        if self.log is None:
            return ""
        end = os.fstat(self.log.fileno()).st_size
        start = max(self.log_pos, end - OUTPUT_TAIL)
        data = os.pread(self.log.fileno(), end - start, start) if end > start else b""
        self.log_pos = end
        return data.decode("utf-8", "replace")

    def send(self, data: bytes) -> None:
        """`data` down the pipe to the worker (started: `start` opens the pipe with the process)."""
        assert self.conn_out is not None, f"worker {self.lane}: sent to before it started"
        self.conn_out.send_bytes(data)

    def submit(self, job: Job | Ahead) -> None:
        if not self.alive:
            self.start()
        data = wire.dumps(job)
        try:
            self.send(data)
        except (BrokenPipeError, OSError):
            self.start()
            self.send(data)

    def collect(self, job: Job, deadline: float, timeout: float) -> Outcome:
        """Wait for the reply to `job` until `deadline`; a timeout or crash becomes a failed outcome."""
        conn = self.conn_in
        assert conn is not None and self.proc is not None
        remaining = max(0.0, deadline - time.monotonic())
        try:
            ready = (self.spin > 0 and spin_until_readable(conn.fileno(), min(self.spin, remaining))) \
                or conn.poll(max(0.0, deadline - time.monotonic()))
        except (EOFError, OSError):
            ready = True
        if not ready:
            self._terminate()
            out = Outcome.of(job.spec)
            out.error = ErrorInfo("timeout", f"no result within the per-case timeout of {timeout:g} s; "
                                  "the worker was killed", details=self.output())
            self.stop()
            return out
        try:
            outcome, healthy = wire.loads(conn.recv_bytes())
        except (EOFError, OSError, ConnectionResetError):
            code = self.proc.wait()
            why = f"the worker died with {_signal_name(code)}" if code < 0 else f"the worker exited with {code}"
            out = Outcome.of(job.spec)
            out.error = ErrorInfo("crash", why, details=self.output())
            self.stop()
            return out
        outcome.output = self.output()
        if not healthy:
            self.stop()  # the CUDA context is poisoned: start afresh next time
        return outcome

    def _terminate(self) -> None:
        """Kill the process but keep its log, so its last output can still be read."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _lane(lane: str) -> Lane:
    """`lane` as a `Lane` (`BackendSpec.lane`); a plain string names a lane of this Python (`cpu`, `ref`)."""
    return lane if isinstance(lane, Lane) else Lane(lane)


class Pool:
    """Workers by lane ("gpu", "cpu", "ref"); jobs on different lanes run at the same time."""

    def __init__(self, gpu: int | None = None, threads: int = 1, spin: float | None = None) -> None:
        self.gpu = gpu
        self.threads = threads
        self.spin = spin_seconds() if spin is None else spin
        self.workers: dict[str, Worker] = {}
        self.running_ahead: list[Lane] = []  # compile workers working ahead
        self.closed = False

    def _env(self, lane: str) -> dict[str, str]:
        env = dict(os.environ)
        own = _lane(lane)
        python, work = own.python, own.work
        env["TDIFF_SYS_PATH"] = json.dumps(sys.path)
        if python:  # another environment: this checkout and the user's code, its own packages
            from .environments import sys_path_for_other

            env["TDIFF_SYS_PATH"] = json.dumps(sys_path_for_other())
            env["TDIFF_OTHER_ENV"] = python
            env.pop("PYTHONHOME", None)
        env["TDIFF_WORKER"] = work
        env.setdefault("PYTHONFAULTHANDLER", "1")
        env.setdefault("OMP_NUM_THREADS", str(self.threads))
        env["TDIFF_SPIN_MS"] = repr(self.spin * 1e3)
        env.pop("TRITON_INTERPRET", None)
        if not own.sees_gpu:
            env["CUDA_VISIBLE_DEVICES"] = ""  # CPU lanes never touch a GPU
        elif self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        return env

    def worker(self, lane: str) -> Worker:
        w = self.workers.get(lane)
        if w is None:
            w = self.workers[lane] = Worker(lane, self._env(lane), self.spin, _lane(lane).python)
        return w

    def warm(self, lanes: Sequence[str]) -> None:
        """Start workers early so their imports overlap with other work; for lanes forked from a zygote, the
        zygote (a CPU lane forks on its first case, once its zygote has imported the run's checks' modules; a GPU
        lane once collection is over: `start_gpu_lanes`)."""
        for lane in lanes:
            w = self.worker(lane)
            if w.forks:
                forkserver.zygote(w.zygote_kind, w.env)
            elif not w.alive:
                w.start()

    def start_gpu_lanes(self, lanes: Sequence[str]) -> None:
        """Fork now the workers of `lanes` that fork from the GPU zygote (collection is over: it has been sent
        every module of this process's checks, and imports what it can of them before its first fork), so their
        CUDA set-up overlaps with the CPU zygote's imports and the first check's work on the CPU lanes."""
        for lane in lanes:
            w = self.worker(lane)
            if w.forks and w.zygote_kind == "gpu" and not w.alive:
                w.start()

    def run_many(self, jobs: Sequence[Job], timeout: float) -> list[Outcome]:
        """Run jobs, each on its spec's lane; jobs of one lane run one after another."""
        results: dict[int, Outcome] = {}
        queue = list(enumerate(jobs))
        while queue:
            batch: list[tuple[int, Job]] = []
            rest: list[tuple[int, Job]] = []
            used: set[Lane] = set()
            for i, job in queue:
                (rest if job.spec.lane in used else batch).append((i, job))
                used.add(job.spec.lane)
            for _, job in batch:
                self.worker(job.spec.lane).submit(job)
            deadline = time.monotonic() + timeout
            for i, job in batch:
                results[i] = self.worker(job.spec.lane).collect(job, deadline, timeout)
                deadline = max(deadline, time.monotonic())
            queue = rest
        return [results[i] for i in range(len(jobs))]

    def run(self, job: Job, timeout: float) -> Outcome:
        return self.run_many([job], timeout)[0]

    def ahead(self, jobs: Sequence[Ahead]) -> None:
        """Start compile workers on their cases; they work beside everything else until `stop_ahead`."""
        for job in jobs:
            self.worker(job.lane).submit(job)
            self.running_ahead.append(job.lane)

    def stop_ahead(self, timeout: float) -> Any:
        """Tell the compile workers to stop after the compile they are in; what they did, summed (an
        `AheadCount`). A worker that does not answer within `timeout` is killed and says so."""
        from .backends.compile_ahead import AheadCount

        total = AheadCount()
        lanes, self.running_ahead = self.running_ahead, []
        for lane in lanes:
            w = self.workers.get(lane)
            if w is not None and w.alive:
                with contextlib.suppress(OSError):
                    w.send(wire.dumps(STOP_AHEAD))
        deadline = time.monotonic() + timeout
        for lane in lanes:
            w = self.workers.get(lane)
            if w is None or w.conn_in is None:
                continue
            try:
                ready = w.conn_in.poll(max(0.0, deadline - time.monotonic()))
                count, _ = wire.loads(w.conn_in.recv_bytes()) if ready else (None, None)
            except (EOFError, OSError):
                count = None
            if count is None:
                why = "did not stop in time" if w.alive else "died"
                total.errors.append(f"compile worker {lane} {why}: {w.output()[-300:]}")
                w.stop()
                continue
            w.output()  # (its log so far is not a case's)
            total.add(count)
        return total

    def close(self, wait: bool = True) -> None:
        """Stop every worker; with `wait=False`, do not wait for them to exit (a GPU worker's CUDA
        teardown takes most of a second), so a finished test process can exit at once."""
        for w in self.workers.values():  # ask every worker to exit first, so they shut down together
            w.ask_to_stop()
        _detached[:] = [p for p in _detached if p.poll() is None]  # reap those that have exited
        for w in self.workers.values():
            if not wait and w.proc is not None:
                _detached.append(w.proc)  # keeps Popen from warning that it is still running
                w.proc = None
            w.stop()
        self.workers.clear()
        self.closed = True


class CaseTimeout(BaseException):
    """Raised in the main thread by `InProcess`'s watchdog (a BaseException, so no backend catches it)."""


class InProcess:
    """Runs jobs in this process: fastest, but a crash takes the process down. A hang is stopped by a
    watchdog (SIGALRM) on the main thread; a kernel hanging inside the GPU driver cannot be stopped
    from Python, so use worker processes for those."""

    def run_many(self, jobs: Sequence[Job], timeout: float) -> list[Outcome]:
        return [self._run(job, timeout) for job in jobs]

    def _run(self, job: Job, timeout: float) -> Outcome:
        import threading

        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            out = Outcome.of(job.spec)
            out.error = ErrorInfo("setup", "isolation='none' stops hangs with a SIGALRM watchdog, which needs the "
                                  "main thread of a POSIX process: use isolation='process' here")
            return out

        def alarm(signum: int, frame: Any) -> None:
            raise CaseTimeout()

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            return run_case(job.target, job.spec, job.case)[0]
        except CaseTimeout:
            out = Outcome.of(job.spec)
            out.error = ErrorInfo("timeout", f"no result within the per-case timeout of {timeout:g} s; stopped by "
                                  "the in-process watchdog")
            return out
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def run(self, job: Job, timeout: float) -> Outcome:
        return self.run_many([job], timeout)[0]

    def warm(self, lanes: Sequence[str]) -> None:
        pass

    def close(self) -> None:
        pass


_shared: dict[tuple, Pool] = {}
_detached: list[subprocess.Popen | forkserver.Forked] = []  # workers asked to exit and not waited for


def shared_pool(gpu: int | None = None) -> Pool:
    """A process-wide pool, closed at exit."""
    key = (gpu,)
    pool = _shared.get(key)
    if pool is None or pool.closed:
        pool = _shared[key] = Pool(gpu=gpu)
    return pool


def close_shared(wait: bool = True) -> None:
    """Close every process-wide pool."""
    for pool in _shared.values():
        pool.close(wait=wait)


atexit.register(close_shared)
