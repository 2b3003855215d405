"""What crosses the pipe to and from worker processes: pickle, with numpy arrays sent as raw bytes.

numpy's own pickling costs about 10 us per small array (it pickles a dtype object, rebuilt with a
reduce and a setstate), five times more than sending the array's bytes, dtype string and shape;
outcomes carry many small arrays.
"""

from __future__ import annotations

import copyreg
import io
import pickle
from typing import Any

import numpy as np


def _rebuild(buf: Any, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(buf, dtype=np.dtype(dtype)).reshape(shape)


def _reduce_array(a: np.ndarray) -> Any:
    if a.dtype.hasobject or a.dtype.fields is not None:
        return a.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    c = a if a.flags.c_contiguous else a.copy(order="C")
    # a writable buffer arrives as a bytearray (a writable array), a read-only one as bytes
    # (an ndarray has the buffer protocol; numpy's stubs declare it from Python 3.12)
    data = pickle.PickleBuffer(c) if c.size else b""  # type: ignore[arg-type]
    return _rebuild, (data, c.dtype.str, a.shape)


class _Pickler(pickle.Pickler):
    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[np.ndarray] = _reduce_array


def dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(obj)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    return pickle.loads(data)
