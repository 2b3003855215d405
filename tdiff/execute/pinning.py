"""Which GPU a process's tdiff workers use, when several processes on one machine run checks.

An xdist worker `gw<N>` takes GPU N, round-robin (`gpus.gpu_for_worker`). Processes that no runner
numbers, such as HypoFuzz's fuzz processes (`hypothesis fuzz -n 8` starts them with multiprocessing
and passes them no index; multiprocessing's own `Process-<N>` counter also counts HypoFuzz's
dashboard and manager processes, so it is no index either), claim the lowest free *slot* of the
machine: an exclusive advisory lock (`flock`) on `slot-<i>.lock` in a folder of the temporary
directory, held until the process exits. The operating system drops the lock when a process dies,
however it dies, so N processes hold slots 0..N-1 whatever order they start in, and a process that
replaces a dead one takes its slot. Slot i is pinned to GPU i % count (of CUDA_VISIBLE_DEVICES'
list, where set).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .gpus import gpu_for_worker

#: more slots than this on one machine means something is wrong (locks leaking)
MAX_SLOTS = 4096


@dataclass
class Slot:
    """A claimed slot: its index, and the open lock file that holds it (for this process, `pid`)."""

    index: int
    fd: int
    pid: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def slot_dir() -> Path:
    """The folder of this machine's slot locks (per user, in the temporary directory)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"tdiff-slots-{uid}"


def claim_slot(directory: Path | None = None) -> Slot:
    """Claim the lowest slot no live process holds. Raises OSError if the lock folder cannot be used."""
    import fcntl

    folder = Path(directory) if directory is not None else slot_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(MAX_SLOTS):
        fd = os.open(folder / f"slot-{index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        os.set_inheritable(fd, False)
        return Slot(index, fd, os.getpid())
    raise OSError(f"all {MAX_SLOTS} tdiff slots in {folder} are held")


_held: Slot | None = None


def process_slot() -> int:
    """This process's slot, claimed on the first call and held until it exits (a forked child, which
    shares its parent's lock, claims its own)."""
    global _held
    if _held is not None and _held.pid != os.getpid():
        _held.release()  # the parent's lock, inherited: closing this copy leaves the parent holding it
        _held = None
    if _held is None:
        _held = claim_slot()
    return _held.index


def fuzz_process_gpu() -> tuple[int, int | None]:
    """(this process's slot, the GPU it is pinned to: None without GPUs)."""
    slot = process_slot()
    return slot, gpu_for_worker(slot)
