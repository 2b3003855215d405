"""One interpreted run's state (`Session`: memory, options, what the instrumentation recorded), and
which programs of a grid run, in which order (`InterpreterOptions`, `all_programs`, `sample_programs`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import triton.language as tl

from ...core.outcome import Trace
from ..backends.base import user_line_now
from ..plan import LaunchPlan, LiveArgs
from . import batched, dataflow, undefined
from .memory import Memory, Region, violation

Program = tuple[int, int, int]


class KernelRunError(RuntimeError):
    """An exception raised while interpreting one program."""

    def __init__(self, message: str, program: Program) -> None:
        super().__init__(message)
        self.program = program


@dataclass
class InterpreterOptions:
    order: str = "forward"  # "forward", "reversed" or "shuffled"
    seed: int = 0
    programs: Callable[[Program], Sequence[Program]] | None = None  # sampling: grid -> programs to run
    check_pointers: bool = True
    record_stores: bool = True
    poison: bool = True  # fill masked-out lanes of a load without other= with a poison value (`undefined`)
    alternate: bool = False  # give lanes whose result Triton leaves unspecified another value (`unspecified`)
    batched: bool = True  # run a launch's programs together where they agree (`batched`), else one by one
    rounding: int = 0  # > 0: round every floating result up or down at random, seeded by it (`rounding`)
    gpu_arith: bool = False  # compute as compiled Triton does on NVIDIA GPUs (`gpu_arith`: tf32 dots, fma, ftz)
    nudge: int = 0  # > 0: move each computed value a store writes within its admissible rounding (`carry`)


def all_programs(grid: Program) -> list[Program]:
    """Every program of a grid in launch order (x fastest), as the GPU numbers them."""
    gx, gy, gz = grid
    return [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]


def linear(p: Program, grid: Program) -> int:
    return p[0] + grid[0] * (p[1] + grid[1] * p[2])


def sample_programs(grid: Program, size: int, seed: int = 0) -> list[Program]:
    """Programs worth interpreting in a large grid: the corners (first, last), programs on the last
    face of each axis (they own the masked tails), and `size` random ones."""
    gx, gy, gz = grid
    rng = random.Random(hash((grid, seed)) & 0xFFFFFFFF)
    chosen: set[Program] = set()
    for x in {0, gx - 1}:
        for y in {0, gy - 1}:
            for z in {0, gz - 1}:
                chosen.add((x, y, z))
    for axis, n in enumerate(grid):
        if n > 1:
            for _ in range(2):
                p = [rng.randrange(gx), rng.randrange(gy), rng.randrange(gz)]
                p[axis] = n - 1
                chosen.add((p[0], p[1], p[2]))
    total = gx * gy * gz
    for _ in range(min(size, total)):
        i = rng.randrange(total)
        chosen.add((i % gx, (i // gx) % gy, i // (gx * gy)))
    return sorted(chosen, key=lambda p: linear(p, grid))


def full_mask(mask: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """`mask` broadcast to `shape` (None stays None)."""
    if mask is None or mask.shape == shape:
        return mask
    return np.broadcast_to(mask, shape)


@dataclass
class Session:
    """State of one interpreted run: memory, options and what the instrumentation recorded."""

    options: InterpreterOptions
    plan: LaunchPlan | None = None
    trace: Trace = field(default_factory=Trace)
    memory: Memory = field(default_factory=Memory)
    launches: list = field(default_factory=list)
    live: LiveArgs = field(default_factory=LiveArgs)
    grid: Program = (1, 1, 1)
    program: Program = (0, 0, 0)
    # edge: the running program's largest input edge ratio (see dataflow.edge_ratio), or 1 once a value it computed
    # came to its dtype's limit (dataflow.near_limit); it and `loaded`, in a batch: arrays, one value per program
    edge: float | np.ndarray = 0.0
    loaded: float | np.ndarray = 0.0  # the running program's largest finite loaded magnitude
    # the running program took a branch (a Python `if` or `while` on a scalar tensor) on a fragile value: whatever it
    # stores after may differ on another backend (`fragile`); in a batch, an array over its programs
    swayed: bool | np.ndarray = False
    above: float | None = None  # a float64 run on upcast inputs: values beyond the case's dtypes overflow
    other: undefined.OtherGiven = field(default_factory=undefined.OtherGiven)  # the load being built got other=
    # while a batch of programs runs (`batched`): their linear ids in launch order; `edge` and `loaded` are then
    # arrays over them
    batch: np.ndarray | None = None
    coords: np.ndarray | None = None  # and their (x, y, z), one row each
    batch_atomics: bool = False  # a batch of this launch made atomic updates (its batches keep launch order)
    widest: int = 1  # the most lanes one program's access had in this run's batches (sizes later batches)

    def __post_init__(self) -> None:
        # allocations on a GPU are copied to the host per launch: only those host copies are valid memory
        if self.plan is not None and self.plan.device.type == "cpu":
            for name, alloc in self.plan.allocations.items():
                self.memory.regions.append(Region(name, alloc.base, alloc.nbytes, alloc.arg.dt.itemsize, True,
                                                  buffer=alloc.buffer.data_ptr(), view=alloc.arg.in_view()))
        self.memory.line = user_line_now

    def at_limit(self, lanes: np.ndarray | None = None) -> None:
        """The running program (in a batch: the programs owning `lanes`, or all where the value is the same
        for every program) computed a value at the limit of its dtype's range."""
        if self.batch is None:
            self.edge = max(self.edge, 1.0)
        else:
            self.edge = np.maximum(self.edge, np.where(self.owners(lanes), 1.0, 0.0))

    def sway(self, lanes: np.ndarray) -> None:
        """The running program (in a batch: the programs owning a true lane of `lanes`) branched on a value decided
        by a comparison within tolerance (`fragile`): what it stores from now on is fragile too."""
        if self.batch is None:
            self.swayed = True
        else:
            self.swayed = np.asarray(self.swayed, bool) | self.owners(lanes)

    def swayed_lanes(self, shape: tuple[int, ...]) -> np.ndarray | None:
        """The lanes of an access of `shape` that a fragile branch of their program decided (None: none)."""
        swayed = np.asarray(self.swayed, bool)
        if not swayed.any():
            return None
        if self.batch is None or swayed.ndim == 0:
            return np.ones(shape, bool)
        n = len(self.batch)
        if len(shape) >= 1 and shape[0] == n:
            return np.broadcast_to(swayed.reshape((n,) + (1,) * (len(shape) - 1)), shape).copy()
        return np.ones(shape, bool)

    def left_range(self, lanes: np.ndarray, how: str) -> None:
        """A value left its dtype's range in `lanes` (`how`: "overflow" or "underflow") at the user's line running
        now: record the line."""
        line = user_line_now()
        if line:
            seen = self.trace.overflowed if how == "overflow" else self.trace.underflowed
            seen[line] = seen.get(line, 0) + self.count(lanes)

    def count(self, lanes: np.ndarray) -> int:
        """How many lanes of `lanes` are true over the running programs: in a batch, a value the same for
        every program (no program axis of the batch's length) counts once per program."""
        n = int(np.count_nonzero(lanes))
        if self.batch is None or len(self.batch) == 1:
            return n
        a = np.asarray(lanes)
        return n if a.ndim >= 2 and a.shape[0] == len(self.batch) else n * len(self.batch)

    def batch_size(self) -> int:
        """How many programs the running batch holds (an error outside a batch)."""
        if self.batch is None:
            raise RuntimeError("no batch is running")
        return len(self.batch)

    def owners(self, lanes: np.ndarray | None) -> np.ndarray:
        """Which of the batch's programs hold a true lane of `lanes` (a value with a leading program axis;
        a value the same for every program, or None, is held by all)."""
        n = self.batch_size()
        a = None if lanes is None else np.asarray(lanes)
        if a is None or a.ndim == 0 or a.shape[0] != n or (a.ndim == 1 and n > 1 and a.size == 1):
            return np.full(n, True if a is None else bool(np.any(a)))
        held: np.ndarray = a.reshape(n, -1).any(axis=1)  # type: ignore[assignment]  # (an axis given: an array)
        return held

    def close_allowance(self, operand: Any) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None:
        """How far apart two compared values of `operand`'s type may be and still compare either way on
        another backend: the tolerance of the operations run so far, by the comparison's own formula
        (`tolerance.allowed`; `fragile.compare` allows each side its share, twice it); None where those
        operations are exact (every backend computes the same bits)."""
        from ...core.tolerance import allowed, from_ops

        t = dataflow.scalar_type(operand)
        name = "bfloat16" if t == tl.bfloat16 else {16: "float16", 64: "float64"}.get(
            getattr(t, "primitive_bitwidth", 32), "float32")
        tol = from_ops(self.trace.ops, name, reference=True)
        if tol.exact:
            return None
        return lambda a, b, m: allowed(a, b, tol.rtol, tol.atol, tol.scale, m)

    @property
    def regions(self) -> list[Region]:
        return self.memory.regions

    @property
    def pid(self) -> int | np.ndarray:
        """The running program's linear id; in a batch, its programs' ids."""
        return linear(self.program, self.grid) if self.batch is None else self.batch

    def add_launch_tensor(self, t: torch.Tensor, label: str) -> None:
        self.add_launch_storage(t.untyped_storage(), label, t.element_size())

    def add_launch_storage(self, storage: Any, label: str, itemsize: int = 1) -> None:
        base = storage.data_ptr()
        if any(r.guarded and r.buffer == base for r in self.regions):
            return  # a case input: only its storage, not its guard bands, is valid memory
        if self.memory.region_of(base) is None and storage.nbytes() > 0:
            self.regions.append(Region(label, base, storage.nbytes(), itemsize, False))

    def locate(self, address: int) -> str:
        if self.plan is not None:
            where = self.plan.locate(address)
            if self.plan.device.type != "cpu" and where != "outside every allocation":
                return f"{where} on {self.plan.device} (a device address the interpreter cannot read)"
            return where
        return "outside every allocation"

    def check(self, op: str, ptrs: np.ndarray, mask: np.ndarray | None, itemsize: int) -> np.ndarray | None:
        """Return a mask with bad addresses switched off (None if all are good) and record them."""
        addrs = ptrs.astype(np.uint64, copy=False)
        active = full_mask(mask, addrs.shape)
        bad = self.memory.bad_lanes(addrs, active, itemsize)
        if bad is None:
            return None
        if self.batch is not None:  # reported program by program, as the sequential run does
            batched.stop("an access outside every allocation")
        first = int(addrs[bad].reshape(-1)[0])
        self.trace.violations.append(violation(op, self.program, addrs, bad, self.locate(first), user_line_now()))
        return (np.ones(addrs.shape, bool) if active is None else active) & ~bad

    def transform_store(self, ptrs: np.ndarray, value: Any, mask: np.ndarray | None) -> Any:
        """The value a store writes; identity here, overridden to inject faults in tests."""
        return value

