"""A concrete case: every input with exact layout and values. Serialisable without pickle."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .dtypes import DType, dtype

FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class TensorArg:
    """A tensor input: a storage of `storage.size` elements and a strided view into it.

    `storage` holds carrier values (see `tdiff.core.dtypes`) for every element of the storage,
    including those outside the view (gaps, the other half of a split), which are poison.
    """

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    storage: np.ndarray
    layout: str = "contiguous"
    tags: tuple[str, ...] = ()  # what the draw aimed at (layout, alignment, special values); not compared

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "strides", tuple(int(s) for s in self.strides))
        if len(self.shape) != len(self.strides):
            raise ValueError(f"shape {self.shape} and strides {self.strides} differ in length")
        if any(s < 0 for s in self.strides) or self.offset < 0:
            raise ValueError("negative strides or offsets are not supported")
        if self.numel and self.offset + self.extent > self.storage.size:
            raise ValueError(
                f"view (shape {self.shape}, strides {self.strides}, offset {self.offset}) "
                f"reaches past a storage of {self.storage.size} elements"
            )

    @property
    def dt(self) -> DType:
        return dtype(self.dtype)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def extent(self) -> int:
        """Elements from the view's first to one past its last, in the storage."""
        if self.numel == 0:
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides))

    @property
    def nbytes(self) -> int:
        return self.storage.size * self.dt.itemsize

    def view_index(self) -> np.ndarray:
        """Storage index of each view element, shaped like the view (computed once; read-only)."""
        cached = self.__dict__.get("_view_index")
        if cached is None:
            cached = self._view_index()
            cached.flags.writeable = False
            self.__dict__["_view_index"] = cached
        return cached

    def _view_index(self) -> np.ndarray:
        return strided_index(self.shape, self.strides, self.offset)

    def in_view(self) -> np.ndarray:
        """Boolean mask over the storage: True where an element belongs to the view (read-only)."""
        cached = self.__dict__.get("_in_view")
        if cached is None:
            cached = np.zeros(self.storage.size, dtype=bool)
            cached[self.view_index().reshape(-1)] = True
            cached.flags.writeable = False
            self.__dict__["_in_view"] = cached
        return cached

    def values(self) -> np.ndarray:
        """The view's values (carrier dtype), shaped like the view."""
        values: np.ndarray = self.storage[self.view_index()]
        return values

    def with_values(self, values: np.ndarray) -> TensorArg:
        storage = self.storage.copy()
        storage[self.view_index()] = values
        return replace(self, storage=storage)

    def describe(self) -> str:
        extra = ""
        if self.layout != "contiguous":
            extra = f" strides={self.strides}"
            if self.offset:
                extra += f" offset={self.offset}"
        return f"{self.dtype}{list(self.shape)} {self.layout}{extra}"

    def __repr__(self) -> str:
        return f"<{self.describe()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis prints examples with this
        p.text(repr(self))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorArg):
            return NotImplemented
        return (
            (self.dtype, self.shape, self.strides, self.offset, self.layout)
            == (other.dtype, other.shape, other.strides, other.offset, other.layout)
            and self.storage.tobytes() == other.storage.tobytes()
        )

    __hash__ = None  # type: ignore[assignment]  # (unhashable: equal arrays compare by value; the idiom mypy rejects)


@dataclass(frozen=True)
class Case:
    """One concrete draw of a check: named inputs and the autotune config (index), if any."""

    inputs: Mapping[str, Any]
    config: int | None = None
    dims: Mapping[str, int] = field(default_factory=dict)

    def tensors(self) -> dict[str, TensorArg]:
        return {k: v for k, v in self.inputs.items() if isinstance(v, TensorArg)}

    def describe(self) -> str:
        parts = []
        for name, value in self.inputs.items():
            parts.append(f"{name}={value.describe() if isinstance(value, TensorArg) else repr(value)}")
        if self.config is not None:
            parts.append(f"config=#{self.config}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"Case({self.describe()})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def size(self) -> tuple[int, int]:
        """(number of tensor elements in all views, largest view)."""
        sizes = [t.numel for t in self.tensors().values()] or [0]
        return sum(sizes), max(sizes)

    def digest(self) -> str:
        """A stable content hash, used as the case id: the same on every machine and in every process
        (keys sorted, floats as exact hex, storages as little-endian bytes; nothing of the process, the
        time or the platform goes in), so corpora from several machines merge by id."""
        h = hashlib.sha256()
        meta, arrays = to_json(self)
        h.update(json.dumps(meta, sort_keys=True).encode())
        for name in sorted(arrays):
            a = np.ascontiguousarray(arrays[name])
            h.update(name.encode())
            h.update(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
        return h.hexdigest()[:16]


# ---------------------------------------------------------------- serialisation

_SCALAR_TYPES = (bool, int, float, str, type(None))


def _encode_value(name: str, value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, TensorArg):
        key = f"{name}"
        arrays[key] = value.storage
        return {
            "kind": "tensor",
            "dtype": value.dtype,
            "shape": list(value.shape),
            "strides": list(value.strides),
            "offset": value.offset,
            "storage_size": int(value.storage.size),
            "layout": value.layout,
            "array": key,
        }
    if isinstance(value, float):
        return {"kind": "float", "value": value.hex()}
    if isinstance(value, _SCALAR_TYPES):
        return {"kind": "scalar", "value": value}
    if isinstance(value, (tuple, list)):
        return {
            "kind": "tuple" if isinstance(value, tuple) else "list",
            "items": [_encode_value(f"{name}.{i}", v, arrays) for i, v in enumerate(value)],
        }
    if isinstance(value, np.generic):
        return _encode_value(name, value.item(), arrays)
    raise TypeError(f"input {name!r}: cannot store a value of type {type(value).__name__} in a case")


def _decode_value(name: str, meta: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    kind = meta["kind"]
    if kind == "tensor":
        dt = dtype(meta["dtype"])
        storage = np.asarray(arrays[meta["array"]])
        if storage.dtype != dt.carrier or storage.size != meta["storage_size"]:
            raise ValueError(
                f"input {name!r}: stored array has {storage.dtype}[{storage.size}], "
                f"expected {dt.carrier}[{meta['storage_size']}]"
            )
        return TensorArg(
            meta["dtype"], tuple(meta["shape"]), tuple(meta["strides"]), int(meta["offset"]),
            storage.reshape(-1).copy(), meta.get("layout", "contiguous"),
        )
    if kind == "float":
        return float.fromhex(meta["value"])
    if kind == "scalar":
        return meta["value"]
    if kind in ("tuple", "list"):
        items = [_decode_value(f"{name}.{i}", m, arrays) for i, m in enumerate(meta["items"])]
        return tuple(items) if kind == "tuple" else items
    raise ValueError(f"input {name!r}: unknown value kind {kind!r}")


def to_json(case: Case) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A JSON-able description of the case and the arrays it refers to."""
    arrays: dict[str, np.ndarray] = {}
    inputs = {name: _encode_value(name, v, arrays) for name, v in case.inputs.items()}
    meta = {"format": FORMAT_VERSION, "inputs": inputs, "config": case.config, "dims": dict(case.dims)}
    return meta, arrays


def from_json(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Case:
    """Rebuild a case from `to_json`'s output."""
    version = meta.get("format")
    if version != FORMAT_VERSION:
        raise ValueError(f"case format {version!r} is not supported (this tdiff reads {FORMAT_VERSION})")
    inputs = {name: _decode_value(name, m, arrays) for name, m in meta["inputs"].items()}
    return Case(inputs=inputs, config=meta.get("config"), dims=dict(meta.get("dims") or {}))


def strided_index(shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> np.ndarray:
    """Storage index of each element of a strided view, shaped like the view."""
    idx = np.full(shape, offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(shape, strides)):
        dims = [1] * len(shape)
        dims[axis] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(dims)
    return idx


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))
