"""Workers forked from preloaded zygotes: the imports every worker needs, paid once per host.

A worker started as a fresh interpreter imports torch, Triton and tdiff and, on its first case, the module that
declares the check (liger-kernel's import chain alone takes seconds): every worker, and every restart after a crash
or a hang, pays it again. Here workers fork from a zygote instead: a fresh interpreter that imports `PRELOAD` once,
then the modules of the checks the run collects (`preload`, each sent as soon as it is collected, so the zygote
imports it while collection goes on), and forks a worker for each request (`fork`). There are two kinds:

- `cpu`, for the lanes that use no GPU (`cpu`, `ref`): started with CUDA hidden (`CUDA_VISIBLE_DEVICES=""`, as those
  lanes always have it).
- `gpu`, for the lanes that see the GPU (`gpu`, `compile0`, ...): it sees the GPU but never initializes CUDA (a fork
  of a process that has is unusable): torch asks NVML, not CUDA, whether a GPU is there
  (`PYTORCH_NVML_BASED_CUDA_CHECK=1`). It imports the checks' modules too, until its first fork, each behind a
  checkpoint (`_import_behind_checkpoint`): a library may ask the driver at import (FlagGems does), and where an
  import initialized CUDA, the checkpoint forked just before it serves on without that module (and without the
  modules whose imports name what that import brought in), while the process that imported it stands by as a
  placeholder. A module it did not import, each GPU worker imports itself, on its first case of it. If CUDA is
  initialized anyway, it refuses to fork and the GPU lanes start fresh interpreters, saying so.

`pytest --tdiff` starts them once per host (`host_start`, in the process pytest started: the xdist controller or the
only process) and every test process of the run connects to them through a Unix socket (`TDIFF_ZYGOTE_CPU`,
`TDIFF_ZYGOTE_GPU`: the starter's pid and the socket's path; only the starter's children connect, so a run
started from a test gets its own); elsewhere (`tdiff.verify`, tdiff's own tests) each process starts its own on
first use. A forked worker takes the requesting process's environment, `sys.path` and working directory.
`TDIFF_FORKSERVER=0` turns forking off; where a zygote cannot start, workers start as before (`workers.Worker`).

A zygote reaps its children and tells the process that asked for each one how it ended (`Forked.poll`,
`Forked.wait`), so a forked worker reports a crash as a started one does ("the worker died with SIGSEGV"). A test
process that goes away takes its forked workers with it; the process that started a zygote takes the zygote.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import ctypes
import gc
import importlib.machinery
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tokenize
import traceback
import types
from collections import Counter
from collections.abc import Sequence
from typing import IO, Literal

#: a worker zygote's kind: which lanes it forks workers for
Kind = Literal["cpu", "gpu"]
#: any zygote's: a worker zygote's, or `script` (`run_script`)
AnyKind = Literal["cpu", "gpu", "script"]
#: what a zygote imports before it forks its first worker
PRELOAD = ("torch", "triton", "numpy", "hypothesis", "tdiff.execute.worker_main", "tdiff.execute.backends.run_case",
           "tdiff.execute.interpreter.backend", "tdiff.execute.backends.reference",
           "tdiff.execute.backends.float32_arithmetic")
#: what a script zygote imports (`run_script`): what a reproducer imports first, and nothing of tdiff's
SCRIPT_PRELOAD = ("torch", "triton", "triton.language", "numpy")
#: the variables of an environment that a fresh interpreter, or the modules a zygote imports, read as they start (a
#: script zygote is one of them: `run_script`)
STARTUP_ENV = ("PYTHON", "TRITON_", "TORCH", "PYTORCH_", "OMP_", "MKL_", "NUMPY_", "LD_")
#: a zygote's program (it ends without finalizing: the extension modules it imported would report their objects as
#: leaked, and a checkpoint that served on is a fork in the middle of `serve`)
_BOOT = ("import json, os, sys; fresh = sys.path[1:]; "
         "sys.path[:0] = [p for p in json.loads(os.environ['TDIFF_SYS_PATH']) if p not in sys.path]; "
         "from tdiff.execute.forkserver import serve; serve(fresh); sys.stderr.flush(); os._exit(0)")
#: the most fds a fork request carries (the job pipe's read end, the answer pipe's write end, the log)
FDS = 3
#: where a host's zygotes listen, for the test processes of one run (`host_start`)
ADDRESS_ENV: dict[Kind, str] = {"cpu": "TDIFF_ZYGOTE_CPU", "gpu": "TDIFF_ZYGOTE_GPU"}
#: CUDA_ERROR_NOT_INITIALIZED: the driver's answer before cuInit
_NOT_INITIALIZED = 3


def enabled() -> bool:
    return (os.environ.get("TDIFF_FORKSERVER", "1") != "0" and hasattr(os, "fork") and hasattr(socket, "send_fds")
            and not os.environ.get("TDIFF_WORKER"))


def cuda_initialized() -> bool:
    """Whether this process's CUDA driver is initialized (cuInit was called), asked without initializing it."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:  # (no driver: nothing to initialize)
        return False
    count = ctypes.c_int()
    return int(lib.cuDeviceGetCount(ctypes.byref(count))) != _NOT_INITIALIZED


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

def serve(fresh: list[str] | None = None) -> None:
    """The zygote: import, then fork a worker (or a script: `run_script`) per request and report each one's end to
    the process that asked. `fresh`: the `sys.path` a fresh interpreter of this environment starts with (after its
    script's folder)."""
    started_with = _startup_env(os.environ)
    kind = os.environ.pop("TDIFF_ZYGOTE_KIND", "cpu")
    owner = socket.socket(fileno=int(os.environ.pop("TDIFF_ZYGOTE_FD")))
    listen_fd = os.environ.pop("TDIFF_ZYGOTE_LISTEN_FD", "")
    listener = socket.socket(fileno=int(listen_fd)) if listen_fd else None
    if kind == "script":  # (its imports as a fresh interpreter's find them)
        sys.path[:] = fresh or sys.path
    for name in SCRIPT_PRELOAD if kind == "script" else PRELOAD:
        _import(name)
    refused = _refusal(kind)
    clients = [owner]
    asked_by: dict[int, socket.socket] = {}  # forked worker -> the connection that asked for it
    unsafe: set[str] = set()  # (a GPU zygote) modules an import that initialized CUDA brought in
    forked_any = False
    while True:
        ready, _, _ = select.select(clients + ([listener] if listener else []), [], [], 0.2)
        _reap(asked_by)
        for sock in ready:
            if sock is listener:
                with contextlib.suppress(OSError):
                    clients.append(listener.accept()[0])
                continue
            try:
                message, fds = _receive(sock, with_fds=True)
            except OSError:
                message, fds = None, []
            if message is None:  # a test process is gone: its workers go with it (all of them with the owner)
                for pid, asker in list(asked_by.items()):
                    if asker is sock or sock is owner:
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                        asked_by.pop(pid)
                if sock is owner:
                    return
                clients.remove(sock)
                sock.close()
                continue
            if "preload" in message:
                if kind == "cpu":
                    for name in message["preload"]:
                        _import(name)
                elif kind == "gpu" and not forked_any and not refused:  # (after a fork a taint could not be undone)
                    for name in message["preload"]:
                        if not _import_behind_checkpoint(name, unsafe):
                            _stand_by(owner, clients + ([listener] if listener else []))
                continue
            script = "argv" in message
            unlike = _unlike(started_with, message.get("env") or {}) if script else ""
            if refused or unlike:
                for fd in fds:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    _send(sock, {"refused": refused} if refused else {"unlike": unlike})
                continue
            # (the zygote's objects, imports included, out of every collection: a child's collector never scans or
            # writes to them, so it runs faster and their pages stay shared; Python's `gc.freeze` docs' pattern)
            gc.freeze()
            forked_any = True
            pid = os.fork()
            if pid == 0:
                for other in clients + ([listener] if listener else []):
                    other.close()
                if script:
                    _script(fds, message, fresh or [])
                _child(fds, message)
            for fd in fds:
                os.close(fd)
            asked_by[pid] = sock
            with contextlib.suppress(OSError):
                _send(sock, {"forked": pid})


def _import(name: str, quiet: bool = False) -> None:
    try:
        __import__(name)
    except BaseException as exc:  # (a module that cannot be imported here: its workers import it themselves)
        if not quiet:
            print(f"tdiff zygote: not preloaded: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)


def _import_behind_checkpoint(name: str, unsafe: set[str]) -> bool:
    """(a GPU zygote, before its first fork) Import `name` unless its source imports a module of `unsafe` (or is one),
    behind a checkpoint: a fork of this process made just before, waiting. Where the import leaves CUDA uninitialized,
    the checkpoint exits and this returns True. Where it initialized CUDA, this returns False (the caller stands by:
    `_stand_by`) and the checkpoint returns True instead, to serve on as the zygote: without `name`, and with every
    module that import brought in added to its `unsafe`."""
    if name in sys.modules or name in unsafe:
        return True
    if _imports_any(name, unsafe):
        unsafe.add(name)
        return True
    before = set(sys.modules)
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # (no checkpoint, no import: its workers import it themselves)
        os.close(read_end)
        os.close(write_end)
        return True
    if pid == 0:  # the checkpoint: this zygote as it was before the import
        os.close(write_end)
        with os.fdopen(read_end, "rb") as told:
            said = told.read()
        if not said:  # (the import was clean: nothing for this process to do)
            os._exit(0)
        unsafe.update(json.loads(said))
        return True
    os.close(read_end)
    _import(name, quiet=True)  # (the CPU zygote says what could not be imported)
    if not _tainted():
        os.close(write_end)
        os.waitpid(pid, 0)
        return True
    with os.fdopen(write_end, "wb") as tell:
        tell.write(json.dumps(sorted((set(sys.modules) - before) | {name})).encode())
    return False


def _tainted() -> bool:
    """Whether this process's CUDA is initialized. (For tdiff's tests, whose machines may have no GPU: a module named
    in `TDIFF_ZYGOTE_TAINTING`, once imported, counts as having initialized it.)"""
    marker = os.environ.get("TDIFF_ZYGOTE_TAINTING")
    return cuda_initialized() or bool(marker and marker in sys.modules)


def _imports_any(name: str, modules: set[str]) -> bool:
    """Whether module `name` (found on `sys.path` without importing it or its packages) is in a package of `modules`
    or imports one of `modules` as it is imported (its statements outside functions, read, not run)."""
    parts = name.split(".")
    if _within(parts[:-1], modules):
        return True
    if not modules:
        return False
    path = _source_of(parts)
    if path is None:
        return False
    try:
        with tokenize.open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return False
    package = parts[:-1] if not path.endswith("__init__.py") else parts
    for node in _import_time_nodes(list(tree.body)):
        if isinstance(node, ast.Import):
            named = [a.name for a in node.names]
        else:
            base = package[:len(package) - node.level + 1] if node.level else []
            stem = ".".join([*base, *([node.module] if node.module else [])])
            named = [stem, *(f"{stem}.{a.name}" for a in node.names)]
        if any(_within(n.split("."), modules) for n in named):
            return True
    return False


def _within(parts: list[str], modules: set[str]) -> bool:
    """Whether the module named by `parts`, or a package it is in, is one of `modules`."""
    return any(".".join(parts[:i]) in modules for i in range(1, len(parts) + 1))


def _source_of(parts: list[str]) -> str | None:
    """The source file of the module named by `parts` (a package's `__init__.py`), found as the import system finds
    it on `sys.path` (`importlib.machinery.PathFinder`), without importing it or its packages; None if none."""
    spec, path = None, None
    for i in range(1, len(parts) + 1):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i]), path)
        if spec is None:
            return None
        path = spec.submodule_search_locations
    origin = spec.origin if spec is not None else None
    return origin if origin and origin.endswith(".py") else None


def _import_time_nodes(body: list[ast.AST]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements a module runs as it is imported: at its top level and in the blocks there (`if`,
    `try` and its handlers, `with`, class bodies), not in functions."""
    out: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    out += _import_time_nodes(inner)
    return out


def _stand_by(owner: socket.socket, others: list[socket.socket]) -> None:
    """(a GPU zygote whose import initialized CUDA) Leave the serving to the checkpoint and stay as the process its
    owner started, holding nothing, until the owner goes: a fresh interpreter of the same pid (`exec`) that waits for
    the owner's socket to close; never returns."""
    for sock in others:
        if sock is not owner:
            sock.close()
    fd = owner.fileno()
    os.set_inheritable(fd, True)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-c", _STAND_BY, str(fd)])


#: what a zygote that stood by runs: wait until the owner's end of its socket closes
_STAND_BY = ("import select, sys; p = select.poll(); "
             "p.register(int(sys.argv[1]), getattr(select, 'POLLRDHUP', 0) | select.POLLHUP | select.POLLERR); "
             "p.poll()")


def _refusal(kind: str) -> str:
    """Why this zygote cannot fork ('' if it can): a GPU or script zygote whose CUDA is initialized."""
    if kind in ("gpu", "script") and cuda_initialized():
        return f"CUDA is initialized in the {kind} zygote, so its forks could not use the GPU"
    return ""


def _reap(asked_by: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        asker = asked_by.pop(pid, None)
        if asker is not None:
            with contextlib.suppress(OSError):
                _send(asker, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _child(fds: list[int], message: dict) -> None:
    """A forked worker: its output to the log, the asking process's environment, `sys.path` and working directory
    (its lane's), then the worker's loop; never returns."""
    code = 0
    try:
        read_fd, write_fd, log_fd = fds
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.environ.clear()
        os.environ.update(message["env"])
        sys.path[:0] = [p for p in json.loads(os.environ.get("TDIFF_SYS_PATH") or "[]") if p not in sys.path]
        with contextlib.suppress(OSError):
            os.chdir(message.get("cwd") or ".")
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


def _startup_env(env: os._Environ | dict[str, str]) -> dict[str, str]:
    """What of an environment a fresh interpreter and its first imports read as they start (`STARTUP_ENV`: its path
    and flags, `TRITON_INTERPRET`, which makes Triton's own `@jit` functions interpreted ones, ...)."""
    return {k: v for k, v in env.items() if k.startswith(STARTUP_ENV)}


def _unlike(started_with: dict[str, str], env: dict[str, str]) -> str:
    """Why a script run in `env` would start differently from this zygote ('' if it would not)."""
    theirs = _startup_env(env)
    differ = sorted(k for k in set(started_with) | set(theirs) if started_with.get(k) != theirs.get(k))
    return f"{', '.join(differ)} differ from the zygote's" if differ else ""


def _script(fds: list[int], message: dict, fresh: list[str]) -> None:
    """A forked script run (`run_script`): what `python argv...` does in a fresh interpreter of this environment,
    from the imports on (stdin empty, stdout and stderr to the asker's files, the asker's environment and working
    directory, `sys.argv`, the script's folder first on a fresh `sys.path`, run as `__main__`, exit functions run,
    the exit code as Python's); never returns."""
    code = 1
    try:
        out_fd, err_fd = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(out_fd)
        os.close(err_fd)
        os.environ.clear()
        os.environ.update(message["env"])
        os.chdir(message["cwd"])
        argv = [str(a) for a in message["argv"]]
        path = os.path.abspath(argv[0])
        sys.argv = argv
        sys.path[:] = [os.path.dirname(path), *fresh]
        main = types.ModuleType("__main__")
        main.__file__ = path
        main.__dict__["__cached__"] = None
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
        sys.modules["__main__"] = main
        with tokenize.open(path) as f:
            source = f.read()
        try:
            exec(compile(source, path, "exec"), main.__dict__)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except BaseException as exc:  # (shown as Python shows it: from the script's frame)
            tb = exc.__traceback__.tb_next if exc.__traceback__ else None
            sys.excepthook(type(exc), exc.with_traceback(tb), tb)
            code = 1
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _exit_code(value: object) -> int:
    """The exit status Python gives `sys.exit(value)`."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


# ---------------------------------------------------------------- the test process's side

class Zygote:
    """A connection to a running zygote (this process's own, or the host's), and what it told about the workers
    it forked for this process."""

    def __init__(self, sock: socket.socket, proc: subprocess.Popen | None = None,
                 address: str | None = None) -> None:
        self.sock = sock
        self.proc = proc  # (None: another process's, connected to)
        self.address = address  # (where this process's own listens, for others)
        self.ended: dict[int, int] = {}  # pid -> exit code (negative: the signal)
        self.broken = False
        self.refused = ""  # why it will not fork ('' while it does)

    @classmethod
    def start(cls, env: dict[str, str], kind: AnyKind = "cpu", listen: bool = False) -> Zygote:
        """A new zygote of `kind`, this process's; with `listen`, also for other processes (at `.address`). (A
        script zygote starts in `env` as it is: see `run_script`.)"""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(env, TDIFF_WORKER="zygote", TDIFF_ZYGOTE_KIND=kind, TDIFF_ZYGOTE_FD=str(theirs.fileno()),
                   TDIFF_SYS_PATH=json.dumps(sys.path))
        if kind != "script":
            env.pop("TRITON_INTERPRET", None)  # (as in every worker's: a kernel it imports must be a JITFunction)
        if kind == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif kind == "gpu":
            env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        passed, listener, address = [theirs.fileno()], None, None
        try:
            if listen:
                address = os.path.join(tempfile.mkdtemp(prefix="tdiff-zygote-"), kind)
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(address)
                listener.listen(256)
                env["TDIFF_ZYGOTE_LISTEN_FD"] = str(listener.fileno())
                passed.append(listener.fileno())
            proc = subprocess.Popen([sys.executable, "-c", _BOOT], pass_fds=passed, env=env,
                                    stdin=subprocess.DEVNULL)
        except OSError:
            ours.close()
            if address:
                shutil.rmtree(os.path.dirname(address), ignore_errors=True)
            raise
        finally:
            theirs.close()
            if listener is not None:
                listener.close()
        return cls(ours, proc, address)

    @classmethod
    def connect(cls, address: str) -> Zygote:
        """The host's zygote listening at `address` (`host_start`)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        return cls(sock)

    @property
    def alive(self) -> bool:
        return not self.broken and (self.proc is None or self.proc.poll() is None)

    def preload(self, modules: list[str]) -> None:
        with contextlib.suppress(OSError):
            _send(self.sock, {"preload": list(modules)})

    def fork(self, read_fd: int, write_fd: int, log_fd: int, env: dict[str, str], threads: int) -> Forked:
        return self._ask({"env": env, "threads": threads, "cwd": os.getcwd()}, [read_fd, write_fd, log_fd])

    def start_script(self, argv: Sequence[str], cwd: str, env: dict[str, str], out_fd: int, err_fd: int) -> Forked:
        """Fork `python argv...` (see `run_script`); OSError where this zygote will not (its start-up environment
        differs from `env`'s, or it refuses to fork at all)."""
        return self._ask({"argv": list(argv), "env": env, "cwd": cwd}, [out_fd, err_fd])

    def _ask(self, request: dict, fds: list[int]) -> Forked:
        """Send a fork request with its descriptors; the child it forked, or OSError with why it did not."""
        if self.refused:
            raise OSError(self.refused)
        _send(self.sock, request, fds)
        while True:
            message = self._next(None)
            if message is None:
                raise OSError("the zygote closed its socket")
            if "refused" in message:
                self.refused = str(message["refused"])
                raise OSError(self.refused)
            if "unlike" in message:
                raise OSError(str(message["unlike"]))
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
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=2)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.address:
                shutil.rmtree(os.path.dirname(self.address), ignore_errors=True)


class Forked:
    """A worker forked by a zygote, with the `subprocess.Popen` calls `workers.Worker` makes of its process."""

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


_zygotes: dict[Kind, Zygote] = {}
_modules: list[str] = []
_no_zygote: dict[Kind, str] = {}  # why a zygote of that kind could not start
#: workers started as fresh interpreters because forking failed, by why (not counted: forking turned off)
_fresh: Counter[str] = Counter()


def take_fresh() -> Counter[str]:
    """The workers started as fresh interpreters, not forked, since the last call (by why): the same results,
    slower; a check's result carries them (`CheckResult.fresh_workers`)."""
    taken = Counter(_fresh)
    _fresh.clear()
    return taken


def zygote(kind: Kind = "cpu", env: dict[str, str] | None = None) -> Zygote | None:
    """This process's zygote of `kind`: the host's where `host_start` started one, else its own, started on first
    use (None where forking is off or no zygote can start)."""
    if not enabled():
        return None
    z = _zygotes.get(kind)
    if z is not None and z.alive:
        return z
    if z is not None:  # it died: connect or start again (its children are gone with their pipes)
        _zygotes.pop(kind).close()
    address = _host_address(kind)
    try:
        try:
            z = Zygote.connect(address) if address else None
        except OSError:  # (the host's is gone: this process's own)
            z = None
        z = z or Zygote.start(dict(os.environ if env is None else env), kind)
    except OSError as exc:
        _no_zygote[kind] = f"no {kind} zygote ({exc})"
        print(f"tdiff: {_no_zygote[kind]}: workers start as fresh interpreters", file=sys.stderr)
        return None
    if _modules:
        z.preload(list(_modules))
    _zygotes[kind] = z
    return z


def _host_address(kind: Kind) -> str | None:
    """Where the host's zygote of `kind` listens, if the process that started this one started it (an xdist worker
    of the run; not a process those start, which may import other modules under the same names)."""
    owner, _, address = os.environ.get(ADDRESS_ENV[kind], "").partition(":")
    return address if address and owner == str(os.getppid()) else None


def host_start(kinds: Sequence[Kind]) -> list[Kind]:
    """(the process pytest started) Start the host's zygotes of `kinds` for every test process of the run (a run
    inside another gets its own): they find them through `ADDRESS_ENV`, which the processes started from here
    inherit. Returns the kinds started."""
    started: list[Kind] = []
    if not enabled():
        return started
    for kind in kinds:
        z = _zygotes.get(kind)
        if z is None or not (z.address and z.alive):
            try:
                z = Zygote.start(dict(os.environ), kind, listen=True)
            except OSError as exc:
                print(f"tdiff: no {kind} zygote for this host ({exc}): each test process starts its own",
                      file=sys.stderr)
                continue
            if kind in _zygotes:  # (this process's own, from an earlier run in it: its workers start again)
                _zygotes.pop(kind).close()
            _zygotes[kind] = z
            started.append(kind)
        os.environ[ADDRESS_ENV[kind]] = f"{os.getpid()}:{z.address}"
    return started


def preload(modules: list[str]) -> None:
    """Modules the zygotes import too (the modules that declare the run's checks): sent now to those running."""
    new = [m for m in modules if m not in _modules and m not in PRELOAD]
    _modules.extend(new)
    for z in _zygotes.values():
        if new and z.alive:
            z.preload(new)


def fork(read_fd: int, write_fd: int, log_fd: int, env: dict[str, str], kind: Kind = "cpu") -> Forked | None:
    """A worker forked from a zygote of `kind`, reading jobs from `read_fd`, answering on `write_fd`, its output in
    `log_fd`, its lane's environment `env`; None where forking is off or failed (the caller starts a fresh
    interpreter on the same descriptors). The caller closes its copies of the two pipe ends afterwards either way."""
    z = zygote(kind)
    if z is None or z.refused:
        if z is not None or enabled():
            _fresh[z.refused if z is not None else _no_zygote.get(kind, f"no {kind} zygote")] += 1
        return None
    try:
        return z.fork(read_fd, write_fd, log_fd, env, int(env.get("OMP_NUM_THREADS") or 1))
    except OSError as exc:
        print(f"tdiff: could not fork a {kind} worker ({exc}): starting one instead", file=sys.stderr)
        _fresh[f"could not fork a {kind} worker: {exc}"] += 1
        return None


def run_script(argv: Sequence[str], cwd: str | os.PathLike[str], env: dict[str, str] | None = None,
               timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """`python argv...` in `cwd` (a reproducer run by the process that wrote it), as `subprocess.run` with
    `capture_output=True, text=True` would run it: forked from a script zygote, a fresh interpreter that imported
    `SCRIPT_PRELOAD` in the same start-up environment (`STARTUP_ENV`; one zygote per such environment, this
    process's), so the run is what a fresh interpreter's would be, without paying those imports. A fresh interpreter
    where forking is off or refused."""
    env = dict(os.environ if env is None else env)
    cwd = os.fspath(cwd)
    argv = [os.fspath(a) for a in argv]
    z = _script_zygote(env)
    if z is not None:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                child = z.start_script(argv, cwd, env, out.fileno(), err.fileno())
            except OSError:
                child = None
            if child is not None:
                try:
                    code = child.wait(timeout)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait(10)
                    raise subprocess.TimeoutExpired([sys.executable, *argv], timeout or 0.0, _read(out),
                                                    _read(err)) from None
                return subprocess.CompletedProcess([sys.executable, *argv], code, _read(out), _read(err))
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


_script_zygotes: dict[tuple[tuple[str, str], ...], Zygote] = {}


def _script_zygote(env: dict[str, str]) -> Zygote | None:
    """This process's script zygote for `env`'s start-up environment, started on first use (None where forking is
    off or it cannot start)."""
    if not enabled():
        return None
    key = tuple(sorted(_startup_env(env).items()))
    z = _script_zygotes.get(key)
    if z is not None and z.alive:
        return z
    if z is not None:
        _script_zygotes.pop(key).close()
    try:
        z = _script_zygotes[key] = Zygote.start(env, "script")
    except OSError:
        return None
    return z


def _read(f: IO[bytes]) -> str:
    f.seek(0)
    return f.read().decode(errors="replace")


def close() -> None:
    while _script_zygotes:
        _script_zygotes.popitem()[1].close()
    for kind in list(_zygotes):
        _zygotes.pop(kind).close()
        if os.environ.get(ADDRESS_ENV[kind], "").startswith(f"{os.getpid()}:"):
            os.environ.pop(ADDRESS_ENV[kind], None)


atexit.register(close)
