"""What the instrumented interpreter knows about memory: the allocations a case may touch, and per
element which program wrote it, the dataflow magnitude of the value it holds, and, within a launch,
which programs read and wrote it (for data races).

Addresses are host addresses (the interpreter runs on CPU copies). Every access is checked against
the allocations first (an access outside all of them is stopped and reported, see `Memory.check`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ...core.outcome import Race, Violation

NOBODY = -1
SEVERAL = -2  # more than one other program read the element


@dataclass
class Region:
    """One allocation the kernel may touch: a case input (guarded) or a tensor `launch` made."""

    name: str  # input name, or "<argument x_ptr of launch 0>" for tensors launch allocated
    base: int
    nbytes: int
    itemsize: int
    guarded: bool  # a case allocation with guard bands around it
    buffer: int = 0  # for guarded regions: address of the whole buffer (guard bands included)
    writers: np.ndarray | None = None  # last program that stored each element, over all launches
    conflicts: int = 0  # elements stored by more than one program (plain stores)
    mag: np.ndarray | None = None  # dataflow magnitude of each element's value (0: never stored)
    ovf: np.ndarray | None = None  # an overflow upstream of the stored value
    fragile: np.ndarray | None = None  # the stored value was decided by a comparison within tolerance
    edge: np.ndarray | None = None  # the storing program's input edge ratio (see dataflow.edge_ratio)
    loaded: np.ndarray | None = None  # the storing program's largest finite loaded magnitude
    adds: np.ndarray | None = None  # atomic updates per element
    eps: float = 0.0  # the coarsest unit roundoff of the arithmetic behind any stored value
    reads: int = 0  # elements loaded by the kernel
    read_back: bool = False  # the kernel loaded an element it had stored (a scratch buffer it uses)
    view: np.ndarray | None = None  # for case inputs: True where a storage element belongs to the input's view
    outside: np.ndarray | None = None  # elements outside the view the kernel loaded (None: none)
    outside_first: tuple[int, int, str] | None = None  # (storage index, program, source line) of the first
    # within the current launch (data races): last plain writer, first reader, another reader
    w: np.ndarray | None = None
    r1: np.ndarray | None = None
    r2: np.ndarray | None = None

    @property
    def size(self) -> int:
        return self.nbytes // self.itemsize

    def array(self, attr: str, fill: float | int | bool, dtype: type) -> np.ndarray:
        a = getattr(self, attr)
        if a is None:
            a = np.full(self.size, fill, dtype=dtype)
            setattr(self, attr, a)
        return a


@dataclass
class Access:
    """The part of one access that falls into one region: element indices and the lanes they
    came from (positions in the access's flattened shape)."""

    region: Region
    idx: np.ndarray
    lanes: np.ndarray | None  # None: every lane of the (flattened, active) access


@dataclass
class Memory:
    regions: list[Region] = field(default_factory=list)
    races: list[Race] = field(default_factory=list)
    launch: int = 0
    line: Callable[[], str] = lambda: ""  # the kernel source line being run (for reports)

    def region_of(self, storage_ptr: int) -> Region | None:
        for r in self.regions:
            if r.base <= storage_ptr < r.base + max(r.nbytes, 1):
                return r
        return None

    def begin_launch(self, launch: int) -> None:
        """A new launch: programs of earlier launches are ordered before it (no races across launches)."""
        self.launch = launch
        for r in self.regions:
            r.w = r.r1 = r.r2 = None

    # -- checks ------------------------------------------------------------
    def bad_lanes(self, addrs: np.ndarray, active: np.ndarray | None, itemsize: int) -> np.ndarray | None:
        """Lanes of an access (among the active ones) outside every region; None if there are none."""
        live = addrs if active is None else addrs[active]
        if live.size == 0:
            return None
        lo, hi = int(live.min()), int(live.max())
        for r in self.regions:  # fast path: every active address inside one region
            if r.base <= lo and hi + itemsize <= r.base + r.nbytes:
                return None
        ok = np.zeros(addrs.shape, bool)
        for r in self.regions:
            ok |= (addrs >= r.base) & (addrs + itemsize <= r.base + r.nbytes)
        bad = ~ok if active is None else active & ~ok
        return bad if bad.any() else None

    def split(self, addrs: np.ndarray, active: np.ndarray | None) -> Iterator[Access]:
        """The active lanes of an access, by region (flattened)."""
        flat = addrs.reshape(-1)
        lanes_all = None
        if active is not None:
            lanes_all = np.flatnonzero(active.reshape(-1))
            flat = flat[lanes_all]
        if flat.size == 0:
            return
        lo, hi = int(flat.min()), int(flat.max())
        for r in self.regions:
            end = r.base + r.nbytes
            if hi < r.base or lo >= end:
                continue
            if r.base <= lo and hi < end:
                sel, lanes = flat, lanes_all
            else:
                keep = (flat >= r.base) & (flat < end)
                sel = flat[keep]
                lanes = np.flatnonzero(keep) if lanes_all is None else lanes_all[keep]
            idx = ((sel - np.uint64(r.base)) // np.uint64(r.itemsize)).astype(np.int64)
            yield Access(r, idx, lanes)

    # -- loads -------------------------------------------------------------
    def load(self, program: int, addrs: np.ndarray, active: np.ndarray | None,
             shape: tuple) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Record a load; returns the stored magnitude, overflow and fragile shadows of the loaded
        elements (zeros / None where nothing was stored by this run)."""
        mag = np.zeros(int(np.prod(shape, dtype=np.int64)))
        flags: dict[str, np.ndarray] = {}
        for a in self.split(addrs, active):
            r = a.region
            lanes = a.lanes if a.lanes is not None else slice(None)
            if r.mag is not None:
                mag[lanes] = r.mag[a.idx]
            for attr in ("ovf", "fragile"):
                stored = getattr(r, attr)
                if stored is not None and stored[a.idx].any():
                    flags.setdefault(attr, np.zeros(mag.shape, bool))[lanes] = stored[a.idx]
            r.reads += int(a.idx.size)
            if r.view is not None:
                self._outside(r, a.idx, program)
            if not r.read_back and r.writers is not None and (r.writers[a.idx] >= 0).any():
                r.read_back = True
            self._read(r, a.idx, program)
        ovf, fragile = (flags[k].reshape(shape) if k in flags else None for k in ("ovf", "fragile"))
        return mag.reshape(shape), ovf, fragile

    def _outside(self, r: Region, idx: np.ndarray, program: int) -> None:
        """Record loads of storage elements that belong to no view of the input (padding, gaps, the
        other half of a split): memory that is not the kernel's input."""
        out = ~r.view[idx]  # type: ignore[index]
        if not out.any():
            return
        hit = idx[out]
        if r.outside is None:
            r.outside = np.zeros(r.size, bool)
            r.outside_first = (int(hit[0]), program, self.line())
        r.outside[hit] = True

    def _read(self, r: Region, idx: np.ndarray, program: int) -> None:
        if r.w is not None:
            w = r.w[idx]
            other = (w != NOBODY) & (w != program)
            if other.any():
                i = int(np.argmax(other))
                self._race(r, "read of an element another program wrote", int(idx[i]), int(w[i]), program,
                           int(np.count_nonzero(other)))
        r1 = r.array("r1", NOBODY, np.int32)
        r2 = r.array("r2", NOBODY, np.int32)
        first = r1[idx]
        r1[idx] = np.where(first == NOBODY, program, first)
        r2[idx] = np.where((first != NOBODY) & (first != program), program, r2[idx])

    # -- stores ------------------------------------------------------------
    def store(self, program: int, addrs: np.ndarray, active: np.ndarray | None, mag: np.ndarray | None,
              ovf: np.ndarray | None, edge: float, atomic: bool = False, eps: float = 0.0,
              loaded: float = 0.0, fragile: np.ndarray | None = None) -> None:
        """Record a plain (or atomic) store of values with these shadows (shaped like the access)."""
        mflat = None if mag is None else np.broadcast_to(mag, addrs.shape).reshape(-1)
        oflat = None if ovf is None else np.broadcast_to(ovf, addrs.shape).reshape(-1)
        fflat = None if fragile is None else np.broadcast_to(fragile, addrs.shape).reshape(-1)
        for a in self.split(addrs, active):
            r = a.region
            r.eps = max(r.eps, eps)
            lanes = a.lanes if a.lanes is not None else slice(None)
            writers = r.array("writers", NOBODY, np.int32)
            if not atomic:
                prev = writers[a.idx]
                r.conflicts += int(np.count_nonzero((prev != program) & (prev != NOBODY)))
                self._write(r, a.idx, program)
            writers[a.idx] = program
            m = mflat[lanes] if mflat is not None else np.zeros(a.idx.size)
            mags = r.array("mag", 0.0, np.float64)
            edges = r.array("edge", 0.0, np.float64)
            loads = r.array("loaded", 0.0, np.float64)
            if atomic:
                np.maximum.at(mags, a.idx, m)
                np.maximum.at(edges, a.idx, edge)
                np.maximum.at(loads, a.idx, loaded)
                np.add.at(r.array("adds", 0, np.int32), a.idx, 1)
            else:
                mags[a.idx] = m
                edges[a.idx] = edge
                loads[a.idx] = loaded
            for attr, flat in (("ovf", oflat), ("fragile", fflat)):  # per-element flags: or-ed by atomics
                if flat is None and getattr(r, attr) is None:
                    continue
                got = flat[lanes] if flat is not None else np.zeros(a.idx.size, bool)
                flags = r.array(attr, False, np.bool_)
                if atomic:
                    np.logical_or.at(flags, a.idx, got)
                else:
                    flags[a.idx] = got

    def _write(self, r: Region, idx: np.ndarray, program: int) -> None:
        w = r.array("w", NOBODY, np.int32)
        prev = w[idx]
        other = (prev != NOBODY) & (prev != program)
        if other.any():
            i = int(np.argmax(other))
            self._race(r, "two programs wrote the same element", int(idx[i]), int(prev[i]), program,
                       int(np.count_nonzero(other)))
        if r.r1 is not None:
            r1, r2 = r.r1[idx], r.r2[idx]  # type: ignore[index]
            reader = np.where((r1 != NOBODY) & (r1 != program), r1, np.where((r2 != NOBODY) & (r2 != program),
                                                                            r2, NOBODY))
            hit = reader != NOBODY
            if hit.any():
                i = int(np.argmax(hit))
                self._race(r, "write of an element another program read", int(idx[i]), int(reader[i]), program,
                           int(np.count_nonzero(hit)))
        w[idx] = program

    def _race(self, r: Region, what: str, index: int, first: int, second: int, count: int) -> None:
        for race in self.races:
            if race.target == r.name and race.kind == what and race.launch == self.launch:
                race.count += count
                return
        self.races.append(Race(r.name, what, index, first, second, self.launch, count, self.line()))


def violation(op: str, program: tuple[int, int, int], addrs: np.ndarray, bad: np.ndarray, where: str,
              line: str) -> Violation:
    first = int(addrs[bad].reshape(-1)[0])
    return Violation(op, program, int(bad.sum()), first, where, line)
