"""A reproducer's tracer of the interpreter side: accesses outside every allocation or a view, data races
between programs of a launch, and float-to-int casts out of range, found on the interpreter's builder.

A reproducer embeds this module's source before `runtime` (`library.runtime_source`); it reads nothing of the
case but what it is given.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from ...execute.interpreter.shims import current


class Tracer:
    """Under TRITON_INTERPRET=1: accesses outside every allocation, cross-program conflicts without
    atomics within a launch (data races), and float-to-int casts out of range. Its hooks sit on the
    interpreter's builder over the shims (`current`)."""

    def __init__(self, storages: dict[str, torch.Tensor], views: dict[str, dict[str, Any]]) -> None:
        import triton.runtime.interpreter as interp

        self.regions: list[tuple[str, int, int, int]] = []
        self.found: list[dict[str, Any]] = []
        self.launch = 0
        self.seen: dict[tuple[int, str, int], list[Any]] = {}
        self.atomic_sync = False
        self.inside: dict[str, np.ndarray] = {}
        for name, st in storages.items():
            self.add(name, st)
            v = views[name]
            mask = np.zeros(st.numel(), bool)
            if st.numel() and all(v["shape"]):
                idx = np.arange(st.numel()).reshape(-1)
                view = np.lib.stride_tricks.as_strided(idx[v["offset"]:], shape=tuple(v["shape"]),
                                                       strides=tuple(8 * x for x in v["strides"]))
                mask[view.reshape(-1)] = True
            self.inside[name] = mask
        self.builder = b = interp.interpreter_builder
        load, store = current(b, "create_masked_load"), current(b, "create_masked_store")
        rmw, cas = current(b, "create_atomic_rmw"), current(b, "create_atomic_cas")
        tracer = self

        def traced_load(ptrs: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            return load(ptrs, tracer.within(mask, tracer.access("load", ptrs, mask)), *rest, **kw)

        def traced_store(ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            return store(ptrs, value, tracer.within(mask, tracer.access("store", ptrs, mask)), *rest, **kw)

        def traced_rmw(op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            if "XCHG" in str(op) or np.asarray(val.data).dtype.kind != "f":
                tracer.atomic_sync = True
            return rmw(op, ptr, val, tracer.within(mask, tracer.access("atomic", ptr, mask)), *rest, **kw)

        def traced_cas(ptr: Any, cmp: Any, val: Any, *rest: Any, **kw: Any) -> Any:
            tracer.atomic_sync = True
            tracer.access("atomic", ptr, None)
            return cas(ptr, cmp, val, *rest, **kw)

        b.create_masked_load, b.create_masked_store = traced_load, traced_store
        b.create_atomic_rmw, b.create_atomic_cas = traced_rmw, traced_cas
        for name in ("create_fp_to_si", "create_fp_to_ui"):
            setattr(b, name, self._cast(current(b, name), name.endswith("ui")))

    def _cast(self, orig: Any, unsigned: bool) -> Any:
        def cast(src: Any, dst: Any) -> Any:
            data = np.asarray(src.data)
            if data.dtype.kind == "f":
                bits = dst.scalar.primitive_bitwidth
                lo, hi = (0, 2.0 ** bits) if unsigned else (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1))
                with np.errstate(invalid="ignore"):
                    bad = ~np.isfinite(data) | (np.trunc(data) < lo) | (np.trunc(data) >= hi)
                if bad.any():
                    self.found.append({"kind": "ub", "targets": [], "text": f"float-to-int{bits} cast of "
                                       f"{data[bad].reshape(-1)[0]!r} (out of range) in program "
                                       f"{self.builder.grid_idx}"})
            return orig(src, dst)

        return cast

    def add(self, name: str, st: torch.Tensor) -> None:  # the storage itself: its guard bands are outside
        self.regions.append((name, st.data_ptr(), st.numel() * st.element_size(), st.element_size()))

    @staticmethod
    def within(mask: Any, outside: np.ndarray | None) -> Any:
        """`mask` without the lanes outside every allocation: found once, they are not also performed (a
        store past a small allocation would corrupt this process's heap, a load would read it)."""
        if outside is None:
            return mask
        keep = np.broadcast_to(np.asarray(mask.data, bool), outside.shape) & ~outside
        return dataclasses.replace(mask, data=keep)

    def access(self, op: str, ptrs: Any, mask: Any) -> np.ndarray | None:
        """Record what this access finds; the lanes outside every allocation (shaped as `ptrs`), or None."""
        every = np.asarray(ptrs.data).astype(np.uint64).reshape(-1)
        live = np.ones(every.shape, bool)
        if mask is not None:
            live = np.broadcast_to(np.asarray(mask.data, bool), np.shape(ptrs.data)).reshape(-1)
        addrs = every[live]
        pid = tuple(int(v) for v in self.builder.grid_idx)
        inside = np.zeros(addrs.shape, bool)
        for name, base, nbytes, size in self.regions:
            hit = (addrs >= base) & (addrs < base + nbytes)
            inside |= hit
            if not hit.any():
                continue
            elems = np.unique((addrs[hit] - np.uint64(base)) // np.uint64(size)).astype(np.int64)
            if name in self.inside and (~self.inside[name][elems]).any():
                self.found.append({"kind": "gap" if op != "load" else "gap-read", "targets": [name],
                                   "text": f"program {pid} {'wrote' if op != 'load' else 'loaded'} "
                                   f"{int((~self.inside[name][elems]).sum())} element(s) of the storage of "
                                   f"`{name}` outside its view"})
            if op != "atomic":
                self._conflicts(op, name, elems, pid)
        if inside.all():
            return None
        self.found.append({"kind": "oob", "targets": [], "text": f"program {pid} tried to {op} "
                           f"{int((~inside).sum())} element(s) outside every allocation"})
        outside = np.zeros(every.shape, bool)
        outside[np.flatnonzero(live)[~inside]] = True
        shape: tuple[int, ...] = np.shape(ptrs.data)
        return outside.reshape(shape)

    def _conflicts(self, op: str, name: str, elems: np.ndarray, pid: tuple[int, ...]) -> None:
        for e in elems.tolist():
            key = (self.launch, name, e)
            readers, writer = self.seen.setdefault(key, [set(), None])
            if op == "load":
                if writer is not None and writer != pid:
                    self.race(name, e, writer, pid, "read of an element another program wrote")
                readers.add(pid)
            else:
                if writer is not None and writer != pid:
                    self.race(name, e, writer, pid, "two programs wrote the same element")
                other = readers - {pid}
                if other:
                    self.race(name, e, min(other), pid, "write of an element another program read")
                self.seen[key][1] = pid

    def race(self, name: str, e: int, first: tuple[int, ...], second: tuple[int, ...], what: str) -> None:
        self.found.append({"kind": "race", "targets": [name], "text": f"{what}: programs {first} and {second}, "
                           f"element {e} of the storage of `{name}` (launch {self.launch})"})

    def findings(self) -> list[dict[str, Any]]:
        out, seen = [], set()
        for f in self.found:
            if f["kind"] == "race" and self.atomic_sync:
                continue  # programs synchronize through atomics: not judged as races
            key = (f["kind"], tuple(f["targets"]))
            if key not in seen:
                seen.add(key)
                out.append(f)
        return out
