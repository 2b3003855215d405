"""Entry point of a worker process, started by `tdiff.execute.workers` with READ_FD WRITE_FD arguments."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
from multiprocessing.connection import Connection


def main() -> None:
    faulthandler.enable()
    conn_in = Connection(int(sys.argv[1]), writable=False)
    conn_out = Connection(int(sys.argv[2]), readable=False)

    import torch  # noqa: F401  (import while the parent is still busy)

    from . import wire
    from .backends.run_case import run_case
    from .workers import spin_until_readable

    _warm_up()
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
        outcome, healthy = run_case(job.target, job.spec, job.case)
        outcome.environment = environment
        sys.stdout.flush()
        sys.stderr.flush()
        conn_out.send_bytes(wire.dumps((outcome, healthy)))
        if not healthy:
            return


def _warm_up() -> None:
    """Pay the one-time costs (imports, CUDA context) before the first case arrives."""
    import tdiff.execute.interpreter.backend  # noqa: F401  (imports triton and its interpreter)

    if os.environ.get("TDIFF_WORKER") == "gpu":
        import torch

        if torch.cuda.is_available():
            from .backends.compiled import warm_up

            with contextlib.suppress(Exception):  # a broken GPU shows its message in the first case instead
                warm_up()


if __name__ == "__main__":
    main()
