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
from .batched import stop

#: a batch's programs, one per lane of an access: an int (one program) or an array over the access's lanes
Programs = int | np.ndarray

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
    aw: np.ndarray | None = None  # in batches: the last program that updated the element atomically
    # in batches: the reads not yet folded into r1 / r2 (element indices, reading programs), folded at a write
    read_log: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

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
            r.w = r.r1 = r.r2 = r.aw = None
            r.read_log = []

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
    def load(self, program: int | np.ndarray, addrs: np.ndarray, active: np.ndarray | None,
             shape: tuple) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Record a load by `program` (or a batch's programs, one per leading index of the access); returns
        the stored magnitude, overflow and fragile shadows of the loaded elements (zeros / None where nothing
        was stored by this run)."""
        mag = np.zeros(int(np.prod(shape, dtype=np.int64)))
        flags: dict[str, np.ndarray] = {}
        per_lane = lane_programs(program, addrs.size)
        for a in self.split(addrs, active):
            r = a.region
            lanes = a.lanes if a.lanes is not None else slice(None)
            # (a program's number is an int, never the float lane_programs may give for other values)
            program = per_lane[lanes] if isinstance(per_lane, np.ndarray) else per_lane  # type: ignore[assignment]
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

    def _outside(self, r: Region, idx: np.ndarray, program: Programs) -> None:
        """Record loads of storage elements that belong to no view of the input (padding, gaps, the
        other half of a split): memory that is not the kernel's input."""
        out = ~r.view[idx]  # type: ignore[index]  # (called for case inputs only: they have a view)
        if not out.any():
            return
        if not isinstance(program, int):  # the first such read is reported as the sequential run finds it
            stop("a read outside an input's view")
        hit = idx[out]
        if r.outside is None:
            r.outside = np.zeros(r.size, bool)
            r.outside_first = (int(hit[0]), program, self.line())
        r.outside[hit] = True

    def _read(self, r: Region, idx: np.ndarray, program: Programs) -> None:
        if not isinstance(program, int):
            return self._read_batch(r, idx, program)
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

    def _read_batch(self, r: Region, idx: np.ndarray, programs: np.ndarray) -> None:
        """A batch's read: any element another program of the launch wrote stops the batch (the order of
        the programs decides what was read); the first and another reader of each element are kept."""
        if _another(r.w, idx, programs):
            stop("programs share an element one of them writes")
        if _another(r.aw, idx, programs):
            stop("a program reads an element another one updates atomically (the order of the programs decides "
                 "what it reads)")
        r.read_log.append((idx, programs))  # (folded into r1 / r2 only if the launch writes this region)
        return None

    def _fold_reads(self, r: Region) -> None:
        """A batch's logged reads of `r` into its first and another reader of each element."""
        if not r.read_log:
            return
        idx = np.concatenate([i for i, _ in r.read_log])
        programs = np.concatenate([p for _, p in r.read_log])
        r.read_log = []
        r1 = r.array("r1", NOBODY, np.int32)
        r2 = r.array("r2", NOBODY, np.int32)
        lo = np.full(r.size, np.iinfo(np.int32).max, np.int32)
        hi = np.full(r.size, NOBODY, np.int32)
        np.minimum.at(lo, idx, programs)
        np.maximum.at(hi, idx, programs)
        first = np.where(r1[idx] == NOBODY, lo[idx], r1[idx])
        other = np.where(hi[idx] != first, hi[idx], np.where(lo[idx] != first, lo[idx], NOBODY))
        r2[idx] = np.where(r2[idx] == NOBODY, other, r2[idx])
        r1[idx] = first

    # -- stores ------------------------------------------------------------
    def store(self, program: int | np.ndarray, addrs: np.ndarray, active: np.ndarray | None,
              mag: np.ndarray | None, ovf: np.ndarray | None, edge: float | np.ndarray, atomic: bool = False,
              eps: float = 0.0, loaded: float | np.ndarray = 0.0, fragile: np.ndarray | None = None) -> None:
        """Record a plain (or atomic) store of values with these shadows (shaped like the access) by
        `program`, whose inputs reached `edge` and `loaded`; or by a batch's programs (arrays of them, and
        of their `edge` and `loaded`, one per leading index of the access)."""
        mflat = None if mag is None else np.broadcast_to(mag, addrs.shape).reshape(-1)
        oflat = None if ovf is None else np.broadcast_to(ovf, addrs.shape).reshape(-1)
        fflat = None if fragile is None else np.broadcast_to(fragile, addrs.shape).reshape(-1)
        per_lane = lane_programs(program, addrs.size)
        edge_lanes, loaded_lanes = lane_programs(edge, addrs.size), lane_programs(loaded, addrs.size)
        for a in self.split(addrs, active):
            r = a.region
            r.eps = max(r.eps, eps)
            lanes = a.lanes if a.lanes is not None else slice(None)
            if not isinstance(per_lane, int):
                # (in a batch each is an array, one value per lane)
                program, edge, loaded = per_lane[lanes], edge_lanes[lanes], loaded_lanes[lanes]  # type: ignore[index]
            writers = r.array("writers", NOBODY, np.int32)
            if atomic and not isinstance(program, int):
                self._atomic_batch(r, a.idx, program)
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

    def _write(self, r: Region, idx: np.ndarray, program: Programs) -> None:
        if not isinstance(program, int):
            return self._write_batch(r, idx, program)
        w = r.array("w", NOBODY, np.int32)
        prev = w[idx]
        other = (prev != NOBODY) & (prev != program)
        if other.any():
            i = int(np.argmax(other))
            self._race(r, "two programs wrote the same element", int(idx[i]), int(prev[i]), program,
                       int(np.count_nonzero(other)))
        if r.r1 is not None:
            r1, r2 = r.r1[idx], r.r2[idx]  # type: ignore[index]  # (r2 is made with r1)
            reader = np.where((r1 != NOBODY) & (r1 != program), r1, np.where((r2 != NOBODY) & (r2 != program),
                                                                            r2, NOBODY))
            hit = reader != NOBODY
            if hit.any():
                i = int(np.argmax(hit))
                self._race(r, "write of an element another program read", int(idx[i]), int(reader[i]), program,
                           int(np.count_nonzero(hit)))
        w[idx] = program

    def _write_batch(self, r: Region, idx: np.ndarray, programs: np.ndarray) -> None:
        """A batch's plain write: an element another program of the launch wrote or read, or that two of
        the batch's programs write, stops the batch (a race: the sequential run reports it)."""
        if _another(r.w, idx, programs):
            stop("programs share an element one of them writes")
        if _another(r.aw, idx, programs):
            stop("programs share an element one of them updates atomically")
        if self._read_by_another(r, idx, programs):
            stop("programs share an element one of them writes")
        if idx.size > 1:
            order = np.argsort(idx, kind="stable")
            si, sp = idx[order], programs[order]
            if ((si[1:] == si[:-1]) & (sp[1:] != sp[:-1])).any():
                stop("programs share an element one of them writes")
        r.array("w", NOBODY, np.int32)[idx] = programs
        return None

    def _read_by_another(self, r: Region, idx: np.ndarray, programs: np.ndarray) -> bool:
        """Whether a program other than each lane's read one of these elements in this launch (a batch)."""
        self._fold_reads(r)
        return _another(r.r1, idx, programs) or _another(r.r2, idx, programs)

    def _atomic_batch(self, r: Region, idx: np.ndarray, programs: np.ndarray) -> None:
        """A batch's atomic update (its lanes in launch order, as one program after another would make them):
        it stops where the element's updates would come in another order than program by program (a later
        program updated it at an earlier operation), or another program read or wrote it plainly."""
        aw = r.array("aw", NOBODY, np.int32)
        if (aw[idx] > programs).any():
            stop("atomic updates of an element in another order than program by program")
        if _another(r.w, idx, programs):
            stop("programs share an element one of them updates atomically")
        if self._read_by_another(r, idx, programs):
            stop("a program reads an element another one updates atomically (the order of the programs "
                 "decides what it reads)")
        np.maximum.at(aw, idx, programs)

    def _race(self, r: Region, what: str, index: int, first: int, second: int, count: int) -> None:
        for race in self.races:
            if race.target == r.name and race.kind == what and race.launch == self.launch:
                race.count += count
                return
        self.races.append(Race(r.name, what, index, first, second, self.launch, count, self.line()))


def _another(marks: np.ndarray | None, idx: np.ndarray, programs: np.ndarray) -> bool:
    """Whether a per-element program map of a region (`w`, `aw`, `r1`, `r2`) names, for any lane, a program other
    than the lane's."""
    if marks is None:
        return False
    m = marks[idx]
    return bool(((m != NOBODY) & (m != programs)).any())


def lane_programs(values: int | float | np.ndarray, lanes: int) -> int | float | np.ndarray:
    """A per-program value (`values[i]` for the batch's i-th program) for each lane of an access of
    `lanes` lanes whose leading axis runs over the batch's programs; a single program's value as it is."""
    if not isinstance(values, np.ndarray):
        return values
    return np.repeat(values, lanes // max(len(values), 1))


def violation(op: str, program: tuple[int, int, int], addrs: np.ndarray, bad: np.ndarray, where: str,
              line: str) -> Violation:
    first = int(addrs[bad].reshape(-1)[0])
    return Violation(op, program, int(bad.sum()), first, where, line)
