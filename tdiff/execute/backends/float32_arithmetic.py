"""A reference's float64 arithmetic, run in float32: what computing the problem at float32 precision gives.

A reference often widens its inputs to float64 (`x.double()`) so that it is exact enough to judge by. The judge's
measure of what the problem allows at the case's precision (judge.sensitivity's native runs) needs the opposite: the
same problem computed at float32, the precision a correct Triton kernel accumulates in, by PyTorch's own (stable)
algorithms. Inside `float32_arithmetic()`, every torch call that would make a float64 tensor makes a float32 one:
`dtype=torch.float64` arguments and `.double()` ask for float32, and any float64 result is rounded to float32.
numpy arithmetic inside a reference is not seen (it stays as the reference writes it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_WIDE = {torch.float64: torch.float32, torch.complex128: torch.complex64}


def _narrow(value: Any) -> Any:
    if isinstance(value, torch.dtype):
        return _WIDE.get(value, value)
    if isinstance(value, torch.Tensor) and value.dtype in _WIDE:
        return value.to(_WIDE[value.dtype])
    if isinstance(value, (tuple, list)):
        return type(value)(_narrow(v) for v in value)
    return value


class _Float32Mode(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if "dtype" in kwargs:
            kwargs["dtype"] = _narrow(kwargs["dtype"])
        if func is torch.Tensor.double:
            func = torch.Tensor.float
        args = tuple(_WIDE.get(a, a) if isinstance(a, torch.dtype) else a for a in args)
        if func in (torch.Tensor.to, torch.Tensor.type) and any(
                isinstance(a, torch.Tensor) and a.dtype in _WIDE for a in args[1:]):
            args = args[:1] + tuple(_narrow(a) for a in args[1:])  # `.to(other)` with a float64 other
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor) and out.dtype in _WIDE and not _in_place(func):
            return out.to(_WIDE[out.dtype])
        if isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out):
            return _narrow(out)
        return out


def _in_place(func: Any) -> bool:
    name = getattr(func, "__name__", "")
    return name.endswith("_") and not name.endswith("__")


@contextlib.contextmanager
def float32_arithmetic() -> Iterator[None]:
    """Torch's float64 arithmetic runs in float32 inside this block (see the module's docstring)."""
    with _Float32Mode():
        yield
