"""One compile per specialization across the processes of a machine: a process about to compile a
specialization claims it (a file created exclusively under Triton's cache directory); another process that
needs it meanwhile waits for the claim to go and then loads the binary from Triton's on-disk cache, and a
compile worker working ahead skips it. A claim whose process died is taken over; a wait is bounded.

A specialization is named by the kernel's source key (`JITFunction.cache_key`, which covers its callees), its
launch key (`tdiff.execute.launch_keys`: every argument's class, the constexprs, the launch options) and the
GPUs the process sees.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import Any

#: the longest a process waits for another's compile before compiling itself
WAIT_LIMIT = 120.0
_POLL = 0.005


def claims_dir() -> Path | None:
    """Where claims live: beside Triton's cache (None where it cannot be found or made)."""
    try:
        from triton import knobs

        base = Path(knobs.cache.dir)
    except (ImportError, AttributeError):
        base = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
    path = base / "tdiff-claims"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path


def name_of(jit: Any, key: tuple) -> str:
    """A specialization's claim name."""
    text = repr((getattr(jit, "cache_key", jit.fn.__qualname__), key, os.environ.get("CUDA_VISIBLE_DEVICES", "")))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _alive(path: Path) -> bool:
    try:
        pid = int(path.read_text() or "0")
    except (OSError, ValueError):
        return True  # being written: its owner is there
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Claims:
    """One process's claims. `done` names the specializations this process compiled or loaded: it does
    not claim them again."""

    def __init__(self, directory: Path | None = None) -> None:
        self._dir = directory
        self._found = directory is not None
        self.done: set[str] = set()

    @property
    def dir(self) -> Path | None:
        if not self._found:  # (found on first use: Triton's cache directory is set by then)
            self._dir, self._found = claims_dir(), True
        return self._dir

    def take(self, name: str) -> Path | None:
        """Claim `name` (None: another live process holds it)."""
        if self.dir is None:
            return None
        path = self.dir / name
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if _alive(path):
                    return None
                with contextlib.suppress(OSError):  # its owner died: take it over
                    path.unlink()
                continue
            except OSError:
                return None
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            return path
        return None

    def release(self, path: Path | None, name: str) -> None:
        self.done.add(name)
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()

    def wait(self, name: str, limit: float = WAIT_LIMIT) -> float:
        """Wait while another live process holds `name` (at most `limit` seconds); the seconds waited."""
        if self.dir is None:
            return 0.0
        path = self.dir / name
        t0 = time.perf_counter()
        while path.exists() and time.perf_counter() - t0 < limit:
            if not _alive(path):
                break
            time.sleep(_POLL)
        return time.perf_counter() - t0
