"""Carrying the kernel's rounding through `launch`: a run whose stores move each floating value the kernel computed
by `LOADED_ROUNDINGS` float32 roundings of the largest input its program loaded (no more than of its own dataflow
magnitude; at least one unit in the last place of the dtype it is stored in), up or down at random
(`interpreter:nudge<k>`).

That is what the judge accepts of a value the kernel stores and compares: a difference within the dataflow scale
that an intermediate of the inputs' magnitude carries in any float32 computation (see `core.tolerance`); never the
dataflow magnitude alone, which follows the kernel's own operations and would forgive an unstable algorithm (a
`1 - tanh^2` that cancels from terms of 1 carries a magnitude far above what it computes). An output
`launch` computes with torch from what the kernel wrote (a matmul of the gradient a cross-entropy kernel wrote over
the logits) has no dataflow of its own; an ensemble of such runs moves it as far as the kernel's admissible rounding
does, which the judge measures on it (judge.carried). Values the kernel only moved (loads stored back unchanged,
`eps_of` 0) and non-finite ones are stored as they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from ...core.tolerance import LOADED_ROUNDINGS
from . import dataflow
from .shims import f32_to_bf16

_CARRIER = {16: np.float16, 32: np.float32, 64: np.float64}


class Nudger:
    """The random moves of one run (`k` > 0 seeds it: the same k moves the same way on every run)."""

    def __init__(self, k: int) -> None:
        self.rng = np.random.default_rng([k, 0xCA_22])

    def nudge(self, value: Any, loaded: float | np.ndarray) -> Any:
        """`value` (a handle a store writes) moved as the module says, or `value` itself; `loaded`: the storing
        program's largest finite loaded magnitude (in a batch, one per program: the value's leading axis)."""
        if not isinstance(value, TensorHandle) or not dataflow.is_float(value) or not dataflow.eps_of(value):
            return value
        t = dataflow.scalar_type(value)
        v = dataflow.values(value)
        if v.size == 0:
            return value
        wide = t.primitive_bitwidth == 64
        unit = 2.0**-52 if wide else 2.0**-23
        mag = dataflow.mag_of(value)
        mag = np.broadcast_to(mag if mag is not None else np.abs(v), v.shape)
        loaded = np.asarray(loaded, np.float64)
        if loaded.ndim and v.ndim and loaded.shape[0] == v.shape[0]:  # (a batch: one per program)
            loaded = loaded.reshape((-1,) + (1,) * (v.ndim - 1))
        elif loaded.ndim:
            loaded = loaded.max(initial=0.0)
        mag = np.minimum(np.where(np.isfinite(mag), mag, 0.0), loaded)
        with np.errstate(all="ignore"):
            if t == tl.bfloat16:  # (bfloat16 keeps float32's exponent and 16 fewer significand bits)
                own = np.spacing(np.abs(v).astype(np.float32)).astype(np.float64) * 2.0**16
            else:
                own = np.spacing(np.abs(v).astype(_CARRIER[t.primitive_bitwidth])).astype(np.float64)
        step = np.maximum(LOADED_ROUNDINGS * unit * mag, own)
        sign = self.rng.choice(np.array([-1.0, 1.0]), size=v.shape)
        with np.errstate(all="ignore"):
            moved = np.where(np.isfinite(v), v + sign * step, v)
        if t == tl.bfloat16:
            data = f32_to_bf16(moved.astype(np.float32))
        else:
            data = moved.astype(_CARRIER[t.primitive_bitwidth])
        out = TensorHandle(data.reshape(np.shape(value.data)), value.dtype)
        dataflow.set_shadows(out, dataflow.mag_of(value), dataflow.ovf_of(value), dataflow.eps_of(value))
        return out
