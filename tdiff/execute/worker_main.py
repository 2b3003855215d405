"""Entry point of a worker process, started by `tdiff.execute.workers` with READ_FD WRITE_FD arguments."""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import sys
from multiprocessing.connection import Connection
from typing import Any


def main() -> None:
    """A worker started as a fresh interpreter (`python -c ... READ_FD WRITE_FD`)."""
    faulthandler.enable()
    conn_in = Connection(int(sys.argv[1]), writable=False)
    conn_out = Connection(int(sys.argv[2]), readable=False)

    import torch  # noqa: F401  (import while the parent is still busy)

    serve(conn_in, conn_out)


def forked(read_fd: int, write_fd: int, threads: int) -> None:
    """A worker forked from the test process's preloaded zygote (`tdiff.execute.forkserver`), its output and
    environment already its lane's."""
    faulthandler.enable()
    import torch

    torch.set_num_threads(threads)
    serve(Connection(read_fd, writable=False), Connection(write_fd, readable=False))


def serve(conn_in: Connection, conn_out: Connection) -> None:
    """Answer jobs until the parent closes the pipe or sends None."""
    from . import wire
    from .backends.run_case import run_case
    from .workers import Ahead, spin_until_readable

    name_process(f"tdiff-{os.environ.get('TDIFF_WORKER') or 'worker'}")
    _warm_up()
    gc.freeze()  # (what the imports made lives for the process: out of the collector's scans; see `_freeze_imports`)
    spin = float(os.environ.get("TDIFF_SPIN_MS") or 0) / 1e3  # see tdiff.execute.workers.spin_seconds
    environment = ""
    if os.environ.get("TDIFF_OTHER_ENV"):  # another environment's worker: its outcomes name its versions
        from .environments import versions_here

        environment = versions_here()

    while True:
        if spin:
            spin_until_readable(conn_in.fileno(), spin)
        try:
            job = wire.loads(conn_in.recv_bytes())
        except EOFError:
            return
        if job is None:
            return
        if isinstance(job, str):  # STOP_AHEAD after the compile worker had finished its cases
            continue
        if isinstance(job, Ahead):
            if _ahead(job, conn_in, conn_out) is None:
                return
            continue
        modules = len(sys.modules)
        outcome, healthy = run_case(job.target, job.spec, job.case)
        _freeze_imports(modules)
        outcome.environment = environment
        sys.stdout.flush()
        sys.stderr.flush()
        conn_out.send_bytes(wire.dumps((outcome, healthy)))
        if not healthy:
            return


def name_process(name: str) -> None:
    """Name this process `name` where the system keeps one (Linux: `/proc/PID/comm`, what `top` and `ps -o comm`
    show, at most 15 bytes): a worker forked from a zygote has the zygote's command line and environment there,
    its lane only in its name (`bench/speed/cpu_by_process.py` reads it)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # PR_SET_NAME


def _freeze_imports(modules: int) -> None:
    """After a case that imported modules (a GPU worker imports its checks' modules itself: liger-kernel's chain is
    some 200,000 objects), move every object out of the collector's scans (`gc.freeze`), as the zygote does before
    it forks: each collection would otherwise scan them all again. What that case left for the collector is kept
    too, once per module imported."""
    if len(sys.modules) > modules:
        gc.freeze()


def _ahead(job: Any, conn_in: Connection, conn_out: Connection) -> Any:
    """Compile a check's planned cases ahead of use until the parent says stop; reply with what was done.
    Returns None where the parent asked this worker to exit meanwhile."""
    from . import wire
    from .backends.compile_ahead import compile_ahead
    from .backends.run_case import resolve

    told: list[Any] = []

    def stop() -> bool:
        if not told and conn_in.poll(0):
            try:
                told.append(wire.loads(conn_in.recv_bytes()))
            except EOFError:
                told.append(None)
        return bool(told)

    try:
        count = compile_ahead(resolve(job.target), job.cases, stop)
    except Exception as exc:  # (the check could not be found here): the search compiles everything itself
        from .backends.compile_ahead import AheadCount

        count = AheadCount(errors=[f"{type(exc).__name__}: {exc}"])
    sys.stdout.flush()
    sys.stderr.flush()
    conn_out.send_bytes(wire.dumps((count, True)))
    return None if told and told[0] is None else True


def _warm_up() -> None:
    """Pay the one-time costs (imports, CUDA context) before the first case arrives."""
    import tdiff.execute.interpreter.backend  # noqa: F401  (imports triton and its interpreter)

    from ..core.backend_spec import Lane

    if Lane(os.environ.get("TDIFF_WORKER", "")).sees_gpu:
        import torch

        if torch.cuda.is_available():
            from .backends.compiled import warm_up

            with contextlib.suppress(Exception):  # a broken GPU shows its message in the first case instead
                warm_up()


if __name__ == "__main__":
    main()
