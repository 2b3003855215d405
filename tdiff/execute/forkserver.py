"""Workers forked from a preloaded zygote: the imports every worker needs, paid once per test process.

A worker started as a fresh interpreter imports torch, Triton and tdiff and, on its first case, the module that
declares the check (liger-kernel's import chain alone takes seconds): every worker, and every restart after a crash
or a hang, pays it again. Here the workers of the lanes that use no GPU (`cpu`, `ref`) are forked from one zygote
per test process: a fresh interpreter that imports `PRELOAD` once, then the modules of the checks the run collected
(`preload`, sent after collection), and forks a worker for each request (`fork`). The zygote starts with CUDA hidden
(`CUDA_VISIBLE_DEVICES=""`, as the CPU lanes' workers always have it), so it never holds a CUDA context a fork would
copy; the lanes that see the GPU, and lanes in another environment, keep their own fresh interpreters
(`workers.Worker`). `TDIFF_FORKSERVER=0` turns it off; where it cannot start, workers start as before.

The zygote reaps its children and tells the test process how each one ended (`Forked.poll`, `Forked.wait`), so a
forked worker reports a crash as a started one does ("the worker died with SIGSEGV").
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import traceback

#: what the zygote imports before it forks its first worker
PRELOAD = ("torch", "triton", "numpy", "hypothesis", "tdiff.execute.worker_main", "tdiff.execute.backends.run_case",
           "tdiff.execute.interpreter.backend", "tdiff.execute.backends.reference",
           "tdiff.execute.backends.float32_arithmetic")
_BOOT = ("import json, os, sys; sys.path[:0] = [p for p in json.loads(os.environ['TDIFF_SYS_PATH']) "
         "if p not in sys.path]; from tdiff.execute.forkserver import serve; serve()")
#: the most fds a fork request carries (the job pipe's read end, the answer pipe's write end, the log)
FDS = 3


def enabled() -> bool:
    return (os.environ.get("TDIFF_FORKSERVER", "1") != "0" and hasattr(os, "fork") and hasattr(socket, "send_fds")
            and not os.environ.get("TDIFF_WORKER"))


# ---------------------------------------------------------------- messages: a 4-byte length, then JSON

def _send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    frame = len(data).to_bytes(4, "big") + data
    if fds:
        socket.send_fds(sock, [frame], fds)
    else:
        sock.sendall(frame)


def _exact(sock: socket.socket, n: int, fds: list[int] | None) -> bytes | None:
    buf = b""
    while len(buf) < n:
        if fds is not None and not buf:
            chunk, got, _, _ = socket.recv_fds(sock, n - len(buf), FDS)
            fds.extend(got)
        else:
            chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _receive(sock: socket.socket, with_fds: bool = False) -> tuple[dict | None, list[int]]:
    fds: list[int] = []
    head = _exact(sock, 4, fds if with_fds else None)
    if head is None:
        return None, fds
    body = _exact(sock, int.from_bytes(head, "big"), None)
    return (json.loads(body) if body is not None else None), fds


# ---------------------------------------------------------------- the zygote's side

def serve() -> None:
    """The zygote: import, then fork a worker per request and report each one's end."""
    sock = socket.socket(fileno=int(os.environ.pop("TDIFF_ZYGOTE_FD")))
    for name in PRELOAD:
        _import(name)
    children: set[int] = set()
    while True:
        ready, _, _ = select.select([sock], [], [], 0.2)
        _reap(sock, children)
        if not ready:
            continue
        try:
            message, fds = _receive(sock, with_fds=True)
        except OSError:
            message, fds = None, []
        if message is None:  # the test process is gone
            for pid in children:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            return
        if "preload" in message:
            for name in message["preload"]:
                _import(name)
            continue
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(fds, message)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        _send(sock, {"forked": pid})


def _import(name: str) -> None:
    try:
        __import__(name)
    except BaseException as exc:  # (a module that cannot be imported here: its workers import it themselves)
        print(f"tdiff zygote: not preloaded: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        with contextlib.suppress(OSError):
            _send(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _child(fds: list[int], message: dict) -> None:
    """A forked worker: its output to the log, its lane's environment, then the worker's loop; never returns."""
    code = 0
    try:
        read_fd, write_fd, log_fd = fds
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.environ.clear()
        os.environ.update(message["env"])
        from .worker_main import forked

        forked(read_fd, write_fd, int(message.get("threads") or 1))
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


# ---------------------------------------------------------------- the test process's side

class Zygote:
    """A running zygote and what it told about its children."""

    def __init__(self, env: dict[str, str], modules: list[str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(env, CUDA_VISIBLE_DEVICES="", TDIFF_WORKER="zygote", TDIFF_ZYGOTE_FD=str(theirs.fileno()),
                   TDIFF_SYS_PATH=json.dumps(sys.path))
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT], pass_fds=(theirs.fileno(),), env=env,
                                     stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock = ours
        self.ended: dict[int, int] = {}  # pid -> exit code (negative: the signal)
        self.broken = False
        if modules:
            self.preload(modules)

    @property
    def alive(self) -> bool:
        return not self.broken and self.proc.poll() is None

    def preload(self, modules: list[str]) -> None:
        with contextlib.suppress(OSError):
            _send(self.sock, {"preload": list(modules)})

    def fork(self, read_fd: int, write_fd: int, log_fd: int, env: dict[str, str], threads: int) -> Forked:
        _send(self.sock, {"env": env, "threads": threads}, [read_fd, write_fd, log_fd])
        while True:
            message = self._next(None)
            if message is None:
                raise OSError("the zygote closed its socket")
            if "forked" in message:
                return Forked(self, int(message["forked"]))

    def _next(self, timeout: float | None) -> dict | None:
        """The zygote's next message (recording a child's end), or None if none came within `timeout`."""
        if timeout is not None and not select.select([self.sock], [], [], timeout)[0]:
            return None
        try:
            message, _ = _receive(self.sock)
        except OSError:
            message = None
        if message is None:
            self.broken = True
            return None
        if "exited" in message:
            self.ended[int(message["exited"])] = int(message["code"])
        return message

    def ended_code(self, pid: int, timeout: float | None) -> int | None:
        """How child `pid` ended, waiting up to `timeout` seconds (None: for as long as it takes)."""
        end = None if timeout is None else time.monotonic() + timeout
        while pid not in self.ended:
            if self.broken:  # (no more news: is it still there?)
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return self.ended.setdefault(pid, 1)
                if end is not None and time.monotonic() >= end:
                    return None
                time.sleep(0.05)
                continue
            left = 0.2 if end is None else max(0.0, min(0.2, end - time.monotonic()))
            self._next(left)
            if end is not None and time.monotonic() >= end and pid not in self.ended:
                return None
        return self.ended[pid]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=2)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Forked:
    """A worker forked by the zygote, with the `subprocess.Popen` calls `workers.Worker` makes of its process."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        return self.zygote.ended_code(self.pid, 0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self.zygote.ended_code(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


_zygote: list[Zygote] = []
_modules: list[str] = []


def zygote(env: dict[str, str] | None = None) -> Zygote | None:
    """This process's zygote, started on first use (None where forking is off or it cannot start)."""
    if not enabled():
        return None
    if _zygote and _zygote[0].alive:
        return _zygote[0]
    if _zygote:  # it died: start another (its children are gone with their pipes)
        _zygote.pop().close()
    try:
        _zygote.append(Zygote(dict(os.environ if env is None else env), list(_modules)))
    except OSError as exc:
        print(f"tdiff: no zygote ({exc}): workers start as fresh interpreters", file=sys.stderr)
        return None
    return _zygote[0]


def preload(modules: list[str]) -> None:
    """Modules the zygote imports too (the modules that declare the run's checks): sent now if it runs."""
    new = [m for m in modules if m not in _modules and m not in PRELOAD]
    _modules.extend(new)
    if new and _zygote and _zygote[0].alive:
        _zygote[0].preload(new)


def fork(read_fd: int, write_fd: int, log_fd: int, env: dict[str, str]) -> Forked | None:
    """A worker forked from this process's zygote, reading jobs from `read_fd`, answering on `write_fd`, its output
    in `log_fd`, its lane's environment `env`; None where forking is off or failed (the caller starts a fresh
    interpreter on the same descriptors). The caller closes its copies of the two pipe ends afterwards either way."""
    z = zygote()
    if z is None:
        return None
    try:
        return z.fork(read_fd, write_fd, log_fd, env, int(env.get("OMP_NUM_THREADS") or 1))
    except OSError as exc:
        print(f"tdiff: could not fork a worker ({exc}): starting one instead", file=sys.stderr)
        return None


def close() -> None:
    while _zygote:
        _zygote.pop().close()


atexit.register(close)
