"""The launch plan: a case turned into guarded allocations on one device, and back into an outcome."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import compat
from ..core import dtypes
from ..core.case import Case, TensorArg
from ..core.outcome import CANARY, GUARD_BYTES, LaunchRecord, Opaque, ReturnedTensor, StorageOutcome


@dataclass
class Allocation:
    """One input tensor rebuilt inside a buffer with guard bands before and after its storage."""

    name: str
    arg: TensorArg
    buffer: torch.Tensor  # uint8, guard + storage + guard
    view: torch.Tensor

    @property
    def base(self) -> int:
        """Address of the first storage byte."""
        return self.buffer.data_ptr() + GUARD_BYTES

    @property
    def nbytes(self) -> int:
        return self.arg.nbytes

    def locate(self, address: int) -> str | None:
        """Describe `address` relative to this allocation, or None if it is far away."""
        lo, hi = self.base, self.base + self.nbytes
        if lo <= address < hi:
            return f"element {(address - lo) // self.arg.dt.itemsize} of the storage of `{self.name}`"
        if lo - GUARD_BYTES <= address < lo:
            return f"{lo - address} bytes before the storage of `{self.name}`"
        if hi <= address < hi + GUARD_BYTES:
            return f"{address - hi} bytes after the storage of `{self.name}`"
        return None


def canary(nbytes: int) -> np.ndarray:
    reps = -(-nbytes // len(CANARY))
    return np.frombuffer(CANARY * reps, dtype=np.uint8)[:nbytes].copy()


def allocate(name: str, arg: TensorArg, device: str | torch.device, upcast: bool = False) -> Allocation:
    """Rebuild `arg` on `device` with its exact strides and offset, guarded by canaries.

    With `upcast`, floating inputs are widened to float64 (for the float64 oracle).
    """
    if upcast and arg.dt.is_float and arg.dt.name != "float64":
        f64 = dtypes.as_float64(arg.storage, arg.dt)
        arg = TensorArg("float64", arg.shape, arg.strides, arg.offset, f64, arg.layout)
    dt = arg.dt
    raw = np.ascontiguousarray(arg.storage).view(np.uint8).reshape(-1)
    host = np.concatenate([canary(GUARD_BYTES), raw, canary(GUARD_BYTES)])
    buffer = torch.from_numpy(host).to(device)
    typed = buffer[GUARD_BYTES : GUARD_BYTES + raw.size].view(dt.torch)
    view = typed.as_strided(arg.shape, arg.strides, typed.storage_offset() + arg.offset)
    return Allocation(name, arg, buffer, view)


class LaunchPlan:
    """All allocations of one case on one device, and the inputs to hand to `launch`."""

    def __init__(self, case: Case, device: str | torch.device = "cpu", upcast: bool = False) -> None:
        self.case = case
        self.device = torch.device(device)
        self.allocations: dict[str, Allocation] = {}
        self.inputs: dict[str, Any] = {}
        for name, value in case.inputs.items():
            self.inputs[name] = self._materialize(name, value, upcast)

    def _materialize(self, name: str, value: Any, upcast: bool) -> Any:
        if isinstance(value, TensorArg):
            alloc = allocate(name, value, self.device, upcast)
            self.allocations[name] = alloc
            return alloc.view
        if isinstance(value, tuple):
            return tuple(self._materialize(f"{name}.{i}", v, upcast) for i, v in enumerate(value))
        if isinstance(value, list):
            return [self._materialize(f"{name}.{i}", v, upcast) for i, v in enumerate(value)]
        return value

    def locate(self, address: int) -> str:
        for alloc in self.allocations.values():
            where = alloc.locate(address)
            if where is not None:
                return where
        return "outside every allocation"

    def snapshot(self) -> dict[str, StorageOutcome]:
        """Final bytes of every allocation, guard bands included."""
        out: dict[str, StorageOutcome] = {}
        allocs = list(self.allocations.items())
        if not allocs:
            return out
        if self.device.type == "cpu":
            host = [a.buffer.numpy() for _, a in allocs]
        else:  # one copy to the host for all allocations, not one each
            flat = torch.cat([a.buffer for _, a in allocs]).cpu().numpy() if len(allocs) > 1 \
                else allocs[0][1].buffer.cpu().numpy()
            ends = np.cumsum([a.buffer.numel() for _, a in allocs])
            host = np.split(flat, ends[:-1])
        for (name, alloc), data in zip(allocs, host):
            out[name] = StorageOutcome(name, alloc.arg.dtype, GUARD_BYTES, data.tobytes())
        return out

    def describe_arg(self, value: Any) -> dict:
        """How a launch argument relates to the case, for launch records and reproducers."""
        if isinstance(value, torch.Tensor):
            ptr = value.data_ptr()
            for name, alloc in self.allocations.items():
                if alloc.base <= ptr <= alloc.base + alloc.nbytes and alloc.view.dtype == value.dtype:
                    offset = (ptr - alloc.base) // value.element_size()
                    return {"kind": "input", "name": name, "shape": list(value.shape),
                            "strides": list(value.stride()), "offset": int(offset),
                            "dtype": dtypes.dtype(value.dtype).name}
            return {"kind": "tensor", **describe_new_tensor(value)}
        return describe_scalar(value)


def describe_new_tensor(t: torch.Tensor) -> dict:
    """A tensor the launch allocated itself: its layout and its content at launch time."""
    storage_elems = t.untyped_storage().nbytes() // t.element_size()
    base = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, (storage_elems,), (1,))
    return {
        "dtype": dtypes.dtype(t.dtype).name,
        "shape": list(t.shape),
        "strides": list(t.stride()),
        "offset": int(t.storage_offset()),
        "storage": dtypes.from_torch(base),
    }


def describe_scalar(value: Any) -> dict:
    if isinstance(value, (bool, int, str, type(None))):
        return {"kind": "scalar", "value": value}
    if isinstance(value, float):
        return {"kind": "float", "value": value.hex()}
    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": str(value)}
    if isinstance(value, (tuple, list)):
        return {"kind": "tuple", "items": [describe_scalar(v) for v in value]}
    return {"kind": "opaque", "value": repr(value)}


def capture_returned(value: Any) -> Any:
    """Returned values as plain data: tensors to host arrays; objects that are not data to None."""
    if isinstance(value, torch.Tensor):
        dt = dtypes.dtype(value.dtype)
        return ReturnedTensor(dt.name, tuple(value.shape), dtypes.from_torch(value))
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(capture_returned(v) for v in value)
    if isinstance(value, Mapping):
        return {k: capture_returned(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return ReturnedTensor(str(value.dtype), tuple(value.shape), value.copy())
    return Opaque(type(value).__name__)  # e.g. the CompiledKernel handle a launch returns: not data


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    # the C setter: the public one imports torch._inductor (seconds) to set a flag only
    # torch.compile reads
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is not None:
        setter(mode, warn_only=warn_only)
    else:  # pragma: no cover
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)


#: what torch.empty & co. leave in a float tensor `launch` allocates: a NaN with tdiff's payload, so an
#: element nobody wrote is told from a NaN a kernel computed or copied from an input
FILL_BITS = {torch.float32: (torch.int32, 0x7FC0DEAD), torch.float16: (torch.int16, 0x7E0D),
             torch.bfloat16: (torch.int16, 0x7FCD), torch.float64: (torch.int64, 0x7FF800000000DEAD)}


def _filled(factory: Any) -> Any:
    def make(*args: Any, **kwargs: Any) -> Any:
        t = factory(*args, **kwargs)
        bits = FILL_BITS.get(t.dtype) if isinstance(t, torch.Tensor) else None
        if bits is not None and t.numel():
            t.view(bits[0]).fill_(bits[1])
        return t

    return make


_FACTORIES = ((torch, "empty"), (torch, "empty_like"), (torch, "empty_strided"), (torch.Tensor, "new_empty"))


@contextlib.contextmanager
def deterministic_empty() -> Iterator[None]:
    """Make new memory hold a fill, so unwritten outputs compare equal and are recognisable:
    `torch.empty` & co. fill floats with tdiff's NaN (`FILL_BITS`); every other allocation is filled
    by torch's deterministic mode (NaN / the largest integer)."""
    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    # (a flag torch's stubs omit, here and below)
    fill = torch.utils.deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    saved = [(obj, name, getattr(obj, name)) for obj, name in _FACTORIES]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _set_deterministic(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]  # (as above)
        for obj, name, factory in saved:
            setattr(obj, name, _filled(factory))
        try:
            yield
        finally:
            for obj, name, factory in saved:
                setattr(obj, name, factory)
            _set_deterministic(det, warn_only=warn_only)
            torch.utils.deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]  # (as above)


def grid3(grid: Any) -> tuple[int, int, int]:
    g = tuple(int(x) for x in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    if not 1 <= len(g) <= 3:
        raise ValueError(f"grid must have 1 to 3 dimensions, got {grid!r}")
    x, y, z = (g + (1, 1, 1))[:3]
    return x, y, z


def launch_record(jit: Any, grid: tuple[int, int, int], args: tuple, kwargs: dict,
                  plan: LaunchPlan | None, config: dict | None = None) -> LaunchRecord:
    describe = plan.describe_arg if plan is not None else describe_scalar
    fn = jit.fn
    return LaunchRecord(fn.__name__, grid, [describe(a) for a in args],
                        {k: describe(v) for k, v in kwargs.items()}, config or None, fn.__module__)


class Relaunch:
    """What a routed launch returns in place of the compiled kernel. Wrappers that keep it and launch
    it again directly (FlagGems' LibEntry caches it per specialization) go through `JITFunction.run`
    once more, so every launch is seen; other attributes are the compiled kernel's. Where the wrapper
    relaunches with the non-constexpr arguments only (as a compiled kernel takes them: LibEntry from
    Triton 3.7), the constexprs of the launch that made it are added back (`tdiff.compat`)."""

    def __init__(self, jit: Any, compiled: Any, made: dict[str, Any] | None = None) -> None:
        self.jit = jit
        self.compiled = compiled
        self.made = made or {}

    def _complete(self, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        params = [(p.name, bool(p.is_constexpr)) for p in getattr(self.jit, "params", ())]
        return compat.relaunch_arguments(params, self.made, args, kwargs) if params else (args, kwargs)

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = self._complete(args, kwargs)
            return self.jit.run(*args, grid=grid, warmup=False, **kwargs)

        return launch

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        args, kwargs = self._complete(args, kwargs)
        return self.jit.run(*args, grid=grid, warmup=warmup, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if self.compiled is None:
            raise AttributeError(f"{name!r}: the interpreter made no compiled kernel")
        return getattr(self.compiled, name)


@contextlib.contextmanager
def route_launches(handler: Any) -> Iterator[None]:
    """Send every `JITFunction.run` (any @triton.jit kernel launched in the body) to `handler`."""
    from triton.runtime.jit import JITFunction

    original = JITFunction.__dict__["run"]

    def run(self: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        made = dict(zip(getattr(self, "arg_names", ()), args), **kwargs)
        return Relaunch(self, handler(self, original, args, grid, warmup, kwargs), made)

    JITFunction.run = run
    try:
        yield
    finally:
        JITFunction.run = original


class LiveArgs:
    """Tensors passed to launches, so returned tensors can be traced to a launch argument."""

    def __init__(self) -> None:
        self.items: list[tuple[int, str, Any]] = []

    def add(self, launch: int, args: tuple, kwargs: dict) -> None:
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                self.items.append((launch, str(i), a))
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                self.items.append((launch, k, v))

    def locate(self, returned: Any, plan: LaunchPlan | None = None, path: str = "returned") -> dict[str, dict]:
        """Where each returned tensor lives: a view of a case input (`input`: its name, offset in
        its storage), or of a tensor passed to a launch (`launch`, `arg`: the argument's key)."""
        out: dict[str, dict] = {}
        if isinstance(returned, torch.Tensor):
            ptr = returned.untyped_storage().data_ptr()
            where = {"shape": list(returned.shape), "strides": list(returned.stride())}
            for name, alloc in (plan.allocations.items() if plan is not None else ()):
                if alloc.buffer.untyped_storage().data_ptr() == ptr and alloc.view.dtype == returned.dtype:
                    offset = returned.storage_offset() - GUARD_BYTES // returned.element_size()
                    out[path] = {"input": name, "offset": int(offset), **where}
                    return out
            for launch, key, t in self.items:
                if t.untyped_storage().data_ptr() == ptr:
                    out[path] = {"launch": launch, "arg": key, "offset": int(returned.storage_offset()), **where}
                    break
        elif isinstance(returned, (tuple, list)):
            for i, v in enumerate(returned):
                out.update(self.locate(v, plan, f"{path}[{i}]"))
        elif isinstance(returned, Mapping):
            for k, v in returned.items():
                out.update(self.locate(v, plan, f"{path}[{k!r}]"))
        return out
