"""A reference's float64 arithmetic, run in float32: what computing the problem at float32 precision gives.

A reference often widens its inputs to float64 (`x.double()`) so that it is exact enough to judge by. The judge's
measure of what the problem allows at the case's precision (judge.sensitivity's native runs) needs the opposite: the
same problem computed at float32, the precision a correct Triton kernel accumulates in, by PyTorch's own (stable)
algorithms. Inside `float32_arithmetic()`, every torch call that would make a float64 tensor makes a float32 one:
`dtype=torch.float64` arguments and `.double()` ask for float32, and any float64 result is rounded to float32.
numpy arithmetic inside a reference is not seen (it stays as the reference writes it).

`float32_arithmetic(faithful=k)` also moves the result of every rounding operation (arithmetic, transcendental
functions, reductions) one ulp up or down for two thirds of its elements: a faithful float32 computation, as a
GPU's `tanh`, `ex2.approx` or fused multiply-add may round, where PyTorch's rounds to nearest. An index decided among
float32 values within such a rounding of each other (a near-tie) may then come out either way. Which way is a hash
of the result and the operands at that element, as a faithful function is still a function: equal operands give equal
results, so an exact tie (two equal logits) stays a tie. Runs come in pairs (seeds 2j-1 and 2j share a hash and move
opposite ways): two values one ulp apart that a pair moves differently meet or swap in one of its two runs, which
happens with probability 2/3 per pair.

`float32_arithmetic(flush=True)` (and every faithful run) flushes the subnormal operands and results of the math
functions (`FLUSHED`) to zero, keeping their sign, as Triton's compiled libdevice calls do (its CUDA backend
compiles them with `enable_reflect_ftz`, on by default): `tanh(1e-39) * 1e9` is 0 there.
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


#: the torch functions whose float results round (`faithful` moves those, never a copy, view or selection)
ROUNDING = frozenset({"add", "sub", "mul", "div", "true_divide", "__add__", "__radd__", "__iadd__", "__sub__",
    "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__", "__truediv__", "__rtruediv__", "__itruediv__",
    "__pow__", "__rpow__", "pow", "tanh", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sigmoid", "sqrt",
    "rsqrt", "reciprocal", "sin", "cos", "tan", "atan", "atan2", "asin", "acos", "sinh", "cosh", "erf", "erfc",
    "softmax", "log_softmax", "logsumexp", "sum", "mean", "nansum", "var", "std", "norm", "cumsum", "prod", "matmul",
    "__matmul__", "mm", "bmm", "addmm", "einsum", "linear", "lerp", "addcmul", "addcdiv", "silu", "gelu", "softplus",
    "hypot", "layer_norm", "rms_norm", "group_norm"})


#: the math functions a faithful run flushes subnormal operands and results of (Triton's libdevice calls, compiled
#: with flush-to-zero)
FLUSHED = frozenset({"tanh", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sigmoid", "sqrt", "rsqrt",
    "sin", "cos", "tan", "atan", "atan2", "asin", "acos", "sinh", "cosh", "erf", "erfc", "pow", "__pow__", "__rpow__",
    "softplus", "silu", "gelu", "softmax", "log_softmax"})
_TINY32 = float(torch.finfo(torch.float32).tiny)


def _flush(value: Any) -> Any:
    """A float tensor with its float32-subnormal elements replaced by zeros of their sign (differentiably: a
    reference may take gradients through it); anything else as is."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return value
    small = (value.detach() != 0) & (value.detach().abs() < _TINY32)
    if not bool(small.any()):
        return value
    return torch.where(small, value * 0.0, value)


class _Float32Mode(TorchFunctionMode):
    def __init__(self, faithful: int = 0, flush: bool = False) -> None:
        super().__init__()
        self.seed = faithful
        self.flush = flush or bool(faithful)

    def _faithful(self, func: Any, out: Any, operands: tuple = ()) -> Any:
        """`out` (a rounding function's float32 result) with two thirds of its elements moved one ulp either way."""
        if (not self.seed or not isinstance(out, torch.Tensor) or out.dtype != torch.float32
                or getattr(func, "__name__", "") not in ROUNDING or out.numel() == 0):
            return out
        with torch.no_grad():
            out_bits = _bits(out)
            assert out_bits is not None  # (out is a float32 tensor)
            key = _mix(out_bits ^ ((self.seed + 1) // 2))
            for operand in operands:
                bits = _bits(operand)
                if bits is not None and (shaped := _broadcast(bits, out.shape)) is not None:
                    key = _mix(key ^ shaped)
            step = key % 3 - 1  # -1: down, 1: up, 0: kept; the next (even) seed moves the other way
            step = -step if self.seed % 2 == 0 else step
            toward = torch.where(step < 0, -torch.inf, torch.inf)
            moved = torch.where(step != 0, torch.nextafter(out.detach(), toward), out.detach())
            moved = torch.where(torch.isfinite(moved) | ~torch.isfinite(out), moved, out.detach())
        if out.requires_grad:  # (moved in place, unseen by autograd: a backward that reuses the result, as tanh's
            out.data.copy_(moved)  # `1 - y * y` does, computes from the faithful result, as a kernel's gradient does)
            return out
        return moved

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
        flushed = self.flush and getattr(func, "__name__", "") in FLUSHED
        if flushed:
            args = tuple(_flush(a) for a in args)
        out = func(*args, **kwargs)
        if flushed and isinstance(out, torch.Tensor) and out.dtype in (torch.float32, torch.float64):
            out = _flush(out.to(torch.float32))
        if isinstance(out, torch.Tensor) and out.dtype in _WIDE and not _in_place(func):
            return self._faithful(func, out.to(_WIDE[out.dtype]), args)
        if isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out):
            return _narrow(out)
        return out if _in_place(func) else self._faithful(func, out, args)


def _bits(value: Any) -> torch.Tensor | None:
    """A float or integer tensor's bits at float32 (int64, 32 bits used), else None."""
    if not isinstance(value, torch.Tensor):
        return None
    value = value.detach()
    if value.is_floating_point():
        return value.to(torch.float32).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    if value.dtype.is_complex:
        return None
    return value.to(torch.int64) & 0xFFFFFFFF


def _broadcast(bits: torch.Tensor, shape: torch.Size) -> torch.Tensor | None:
    try:
        return torch.broadcast_to(bits, shape)
    except RuntimeError:
        return None  # (a reduction's operand: the result's own bits decide)


def _mix(h: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (the `lowbias32` finalizer) of every element."""
    h = h & 0xFFFFFFFF
    h = ((h ^ (h >> 16)) * 0x7FEB352D) & 0xFFFFFFFF
    h = ((h ^ (h >> 15)) * 0x846CA68B) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _in_place(func: Any) -> bool:
    name = getattr(func, "__name__", "")
    return name.endswith("_") and not name.endswith("__")


@contextlib.contextmanager
def float32_arithmetic(faithful: int = 0, flush: bool = False) -> Iterator[None]:
    """Torch's float64 arithmetic runs in float32 inside this block; with `faithful` (a seed), rounded faithfully
    at random; with `flush` (or `faithful`), the math functions' subnormals flushed (see the module's docstring)."""
    with _Float32Mode(faithful, flush):
        yield
