"""Random rounding: the kernel's own float program run with every floating result rounded up or down at random,
at its own precision (Monte Carlo arithmetic as Verificarlo, Verrou and CADNA's CESTAC do it).

An ensemble of such runs (`interpreter:rr1`, `rr2`, ...) shows how much the kernel's algorithm, in the arithmetic
types it chose, moves its results under rounding: what the kernel's float program produces
(`tdiff.judge.sensitivity.ensemble`). Each floating result of an elementwise operation, a cast to a float type, a
transcendental (where the GPU's approximations live: `ex2.approx`, `rsqrt.approx`) and each partial sum of a
reduction, scan or `tl.dot` moves by one unit in the last place, up or down, with probability one half each
(`perturb`). Sums are computed as the trees (reductions, dots) and chains (scans) they are on the GPU, each partial
sum rounded at random, so an accumulation in a narrow type shows the error it really accumulates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..backends.base import user_line_now

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}

#: builder methods whose floating results are rounded at random
ROUNDED = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_fma",
           "create_precise_divf", "create_precise_sqrt", "create_exp", "create_exp2", "create_log", "create_log2",
           "create_sin", "create_cos", "create_sqrt", "create_rsqrt", "create_erf", "create_fp_trunc",
           "create_fp_to_fp")
#: the most elements a `tl.dot` is summed as a tree for (products held at once); larger dots round their result
DOT_TREE_LIMIT = 1 << 22
#: what a run keeps of the values each source line computed (to find where the ensemble's spread grows): the
#: first occurrences of the line, the first elements of each
SAMPLE_OCCURRENCES = 4
SAMPLE_ELEMENTS = 64


def pairwise_sum(data: np.ndarray, axis: int, keepdims: bool, rounded: Callable[[np.ndarray], np.ndarray],
                 halves: bool = False) -> np.ndarray:
    """The sum along `axis` in `data`'s dtype as a balanced tree of pairwise additions, each partial sum passed
    through `rounded`: neighbours paired (`x[0::2] + x[1::2]`, a level of odd length padded with one zero), or with
    `halves` the first half plus the second (padded with zeros to a power of two first), as warp shuffles add."""
    x = np.moveaxis(np.asarray(data), axis, -1)
    n = x.shape[-1]
    if n == 0:
        out = np.zeros(x.shape[:-1], x.dtype)
    else:
        width = 1 << (n - 1).bit_length()
        if halves and width != n:
            x = np.concatenate([x, np.zeros(x.shape[:-1] + (width - n,), x.dtype)], axis=-1)
        while x.shape[-1] > 1:
            if x.shape[-1] % 2:
                x = np.concatenate([x, np.zeros(x.shape[:-1] + (1,), x.dtype)], axis=-1)
            half = x.shape[-1] // 2
            a, b = (x[..., :half], x[..., half:]) if halves else (x[..., 0::2], x[..., 1::2])
            with np.errstate(all="ignore"):
                x = rounded((a + b).astype(data.dtype))
        out = x[..., 0]
    return np.expand_dims(out, axis) if keepdims else out


class Rounder:
    """Random rounding of one run: `k` (> 0) seeds it; the same k rounds the same way on every run. `samples`, when
    given, receives per source line (`file:line: code`) the values it computed, as (values, their ulps) in float64
    (`keep`)."""

    def __init__(self, k: int, samples: dict[str, list[tuple[np.ndarray, np.ndarray]]] | None = None) -> None:
        self.rng = np.random.default_rng([k, 0x52_52])
        self.samples = samples

    def keep(self, data: np.ndarray, bf16: bool = False) -> np.ndarray:
        """Record a sample of `data` under the user's line computing it now (bfloat16 carried as uint16 bits when
        `bf16`); returns `data`."""
        if self.samples is None:
            return data
        line = user_line_now()
        seen = self.samples.setdefault(line, []) if line else None
        if seen is None or len(seen) >= SAMPLE_OCCURRENCES:
            return data
        flat = np.asarray(data).reshape(-1)[:SAMPLE_ELEMENTS]
        if bf16:
            wide = (flat.astype(np.uint32) << 16).view(np.float32)
            values, ulps = wide.astype(np.float64), np.spacing(np.abs(wide)).astype(np.float64) * 65536.0
        else:
            values, ulps = flat.astype(np.float64), np.spacing(np.abs(flat)).astype(np.float64)
        seen.append((values, ulps))
        return data

    def perturb(self, data: np.ndarray) -> np.ndarray:
        """`data` (a float array, or bfloat16 carried as uint16 bits) with each finite nonzero element moved one
        unit in the last place up or down with probability one half (never to an infinity or across zero)."""
        data = np.asarray(data)
        if data.size == 0 or not (data.dtype.kind == "f" or data.dtype == np.uint16):
            return data
        width = data.dtype.itemsize
        bits = np.ascontiguousarray(data).view(_UINT[width]).astype(np.int64)
        sign_bit = 1 << (8 * width - 1)
        sign, mag = bits & sign_bit, bits & (sign_bit - 1)
        top = 0x7F7F if data.dtype == np.uint16 else \
            int(np.array(np.finfo(data.dtype).max, data.dtype).view(_UINT[width]))
        step = np.where(self.rng.random(data.shape) < 0.5, 0, self.rng.choice(np.array([-1, 1]), size=data.shape))
        new = mag + step
        ok = (mag > 0) & (mag <= top) & (new > 0) & (new <= top)  # finite, nonzero, and stays so
        out = (np.where(ok, new, mag) | sign).astype(_UINT[width]).view(data.dtype)
        return out.reshape(data.shape)

    def tree_sum(self, data: np.ndarray, axis: int, keepdims: bool) -> np.ndarray:
        """The sum along `axis` as a balanced tree of pairwise additions in `data`'s dtype, each partial sum
        rounded at random (how a reduction adds on the GPU, within a block)."""
        return pairwise_sum(data, axis, keepdims, self.perturb)

    def chain_sum(self, data: np.ndarray, axis: int) -> np.ndarray:
        """The inclusive prefix sums along `axis`, each rounded at random (a scan)."""
        x = np.moveaxis(np.asarray(data), axis, 0)
        out = np.empty_like(x)
        acc = None
        with np.errstate(all="ignore"):
            for i in range(x.shape[0]):
                acc = x[i] if acc is None else self.perturb(np.asarray(acc + x[i], dtype=data.dtype))
                out[i] = acc
        return np.moveaxis(out, 0, axis)

    def dot(self, a: np.ndarray, b: np.ndarray, acc: np.ndarray) -> np.ndarray:
        """a @ b + acc in acc's dtype: products rounded at random, summed as a tree with each partial sum rounded
        at random (a large dot: its result rounded once, at random)."""
        out_dt = acc.dtype
        m, k = a.shape[-2], a.shape[-1]
        n = b.shape[-1]
        lead = int(np.prod(a.shape[:-2])) if a.ndim > 2 else 1
        with np.errstate(all="ignore"):
            if lead * m * k * n > DOT_TREE_LIMIT:
                return self.perturb((np.matmul(a.astype(out_dt), b.astype(out_dt)) + acc).astype(out_dt))
            prods = self.perturb(a.astype(out_dt)[..., :, :, None] * b.astype(out_dt)[..., None, :, :])
            return self.perturb((self.tree_sum(prods, -2, False) + acc).astype(out_dt))


def install(rounder: Rounder, put: Callable[[object, str, Any], None], builder: Any) -> None:
    """Wrap the builder's floating operations and the interpreter's sums (reduce, cumsum, dot) with random rounding,
    through `put` (the hooks' undo log)."""
    from triton.runtime import interpreter as _interp

    for name in ROUNDED:
        fn = getattr(builder, name, None)
        if fn is not None:
            put(builder, name, _rounded(fn, rounder))

    def ssum(self: Any, input: Any) -> Any:
        data = np.asarray(input.handle.data)
        if data.dtype.kind != "f":
            return original_sum(self, input)
        axis = self.axis if self.axis is not None else None
        if axis is None:
            out = rounder.tree_sum(data.reshape(-1), 0, False)
            if self.keep_dims:
                out = out.reshape((1,) * data.ndim)
        else:
            out = rounder.tree_sum(data, axis, self.keep_dims)
        return self.to_tensor(rounder.keep(out), input.dtype)

    def scumsum(self: Any, input: Any) -> Any:
        data = np.asarray(input.handle.data)
        if data.dtype.kind != "f":
            return original_cumsum(self, input)  # type: ignore[misc]  # (installed only where Triton has a cumsum)
        return [self.to_tensor(rounder.keep(rounder.chain_sum(data, self.axis)), input.dtype)]

    original_sum = _interp.ReduceOps.sum
    original_cumsum = getattr(_interp.ScanOps, "cumsum", None)
    put(_interp.ReduceOps, "sum", ssum)
    if original_cumsum is not None:
        put(_interp.ScanOps, "cumsum", scumsum)
    rmw = getattr(builder, "create_atomic_rmw", None)
    if rmw is not None:
        def create_atomic_rmw(op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            data = np.asarray(val.data)
            if str(op).rsplit(".", 1)[-1].upper() != "FADD" or data.dtype not in (np.float32, np.float64, np.float16):
                return rmw(op, ptr, val, mask, *rest, **kw)
            return rounded_fadd(rounder, ptr, val, None if mask is None else np.asarray(mask.data, bool))

        put(builder, "create_atomic_rmw", create_atomic_rmw)
    dot = getattr(builder, "create_dot", None)
    if dot is not None:
        def create_dot(a: Any, b: Any, d: Any, *rest: Any, **kw: Any) -> Any:
            out = dot(a, b, d, *rest, **kw)
            av, bv, dv = (np.asarray(h.data) for h in (a, b, d))
            if np.asarray(out.data).dtype.kind != "f" or av.dtype.kind != "f" or bv.dtype.kind != "f":
                return out
            return _interp.TensorHandle(rounder.keep(rounder.dot(av, bv, np.asarray(dv))), out.dtype)

        put(builder, "create_dot", create_dot)


def rounded_fadd(rounder: Rounder, ptr: Any, val: Any, mask: np.ndarray | None) -> Any:
    """A float `tl.atomic_add` done lane by lane in order, each sum rounded at random (an accumulation through
    atomics rounds once per add, as a sum does); returns the old values, as the atomic does."""
    from triton.runtime import interpreter as _interp

    from .shims import rmw_in_order

    dt = np.asarray(val.data).dtype
    old = rmw_in_order(ptr, val, mask, dt, lambda cur, v: rounder.perturb((cur + v).astype(dt)))
    return _interp.TensorHandle(old, val.dtype.scalar)


def _rounded(fn: Callable, rounder: Rounder) -> Callable:
    from triton.runtime import interpreter as _interp

    def hook(*args: Any, **kw: Any) -> Any:
        out = fn(*args, **kw)
        if isinstance(out, _interp.TensorHandle):
            data = np.asarray(out.data)
            bf16 = data.dtype == np.uint16 and _is_bf16(out)
            if data.dtype.kind == "f" or bf16:
                out = _interp.TensorHandle(rounder.keep(rounder.perturb(data), bf16), out.dtype)
        return out

    return hook


def _is_bf16(handle: Any) -> bool:
    dt = getattr(handle.dtype, "scalar", handle.dtype)
    return bool(getattr(dt, "is_bf16", lambda: False)())
