"""Entry point of a worker process, started by `tdiff.workers` with READ_FD WRITE_FD arguments."""

from __future__ import annotations

import faulthandler
import sys
from multiprocessing.connection import Connection


def main() -> None:
    faulthandler.enable()
    conn_in = Connection(int(sys.argv[1]), writable=False)
    conn_out = Connection(int(sys.argv[2]), readable=False)

    import torch  # noqa: F401  (import while the parent is still busy)

    from tdiff.backends.run import run_case

    _warm_up()

    while True:
        try:
            job = conn_in.recv()
        except EOFError:
            return
        if job is None:
            return
        outcome, healthy = run_case(job.target, job.spec, job.case)
        sys.stdout.flush()
        sys.stderr.flush()
        conn_out.send((outcome, healthy))
        if not healthy:
            return


def _warm_up() -> None:
    """Pay the one-time costs (imports, CUDA context) before the first case arrives."""
    import os

    import tdiff.backends.interpreter  # noqa: F401  (imports triton and its interpreter)

    if os.environ.get("TDIFF_WORKER") == "gpu":
        import torch

        if torch.cuda.is_available():
            torch.empty(1, device="cuda")
            import tdiff.backends.compiled  # noqa: F401


if __name__ == "__main__":
    main()
