"""The hooks on `tl.reduce` and `tl.associative_scan` (`reduce_hook`): the dataflow through a reduction or a scan
(error scales, overflow at the limits, fragile results, near-ties among the extremes), bf16 reduced by its shim."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import triton.language as tl

from . import batched, dataflow, fragile, reductions, shims
from .session import Session


def reduce_hook(inner: Callable, tag: str, session: Session) -> Callable:
    scan = tag == "scan"

    def hook(input, axis=None, combine_fn=None, *rest, **kw):
        session.trace.ops.add(tag)
        keep_dims = bool(kw.get("keep_dims", rest[0] if (rest and not scan) else False))
        ins = input if isinstance(input, tuple) else (input,)
        made: list[Any] = []

        def reduce(given: tuple) -> tuple:
            for g, i in zip(given, ins):  # (bf16 inputs widened to fp32 by the shim: their shadows go along)
                if g is not i:
                    _keep_shadows(g, i)
            out = inner(given if isinstance(input, tuple) else given[0], axis, combine_fn, *rest, **kw)
            made.append(out)
            outs = out if isinstance(out, tuple) else (out,)
            if session.batch is None:
                _follow_reduction(session, given, outs, axis, keep_dims, combine_fn, scan)
            elif axis is None:  # a batch: each program's values reduced, past the program axis
                flat = tuple(batched.flat_per_program(g) for g in given)
                _follow_reduction(session, flat, outs, -1, keep_dims, combine_fn, scan)
            else:
                ndim = len(batched.shape_of(given[0]))
                _follow_reduction(session, given, outs, axis - ndim if axis >= 0 else axis, keep_dims, combine_fn,
                                  scan)
            return outs

        # bf16 carried as bits: reduced on the values in fp32 and rounded back (shim)
        narrowed = shims.bf16_reduce(reduce, ins, session.trace.shims)
        if narrowed is None:
            reduce(ins)
            return made[0]
        computed = made[0] if isinstance(made[0], tuple) else (made[0],)
        for new, old in zip(narrowed, computed):
            if new is not old:
                _keep_shadows(new, old)
        return narrowed if isinstance(made[0], tuple) else narrowed[0]

    return hook


def _follow_reduction(session: Session, ins: tuple, outs: tuple, axis: Any, keep_dims: bool, combine_fn: Any,
                      scan: bool) -> None:
    """Dataflow through a reduction or scan: error scales, fragile results, near-ties among extremes."""
    grow = combine_fn is not tl.standard._elementwise_max and combine_fn is not tl.standard._elementwise_min \
        and "arg" not in getattr(getattr(combine_fn, "fn", combine_fn), "__name__", "")
    for i, o in zip(ins, outs):
        near = reductions.reduction(i, o, axis, keep_dims, grow, scan=scan, above=session.above,
                                    left=session.left_range)
        if near is not None:
            session.at_limit(near)
    for o in outs:  # (an argmax's index depends on every input: each output on each input)
        for i in ins:
            fragile.reduce_fragile(i, o, axis, keep_dims, scan=scan)
    extreme = _extreme(combine_fn)
    if extreme is not None and not scan:  # near-ties among the extremes: which lane holds it may change
        for o in outs:
            fragile.extreme_fragile(ins[0], o, axis, keep_dims, extreme == "max",
                                    session.close_allowance(ins[0].handle))


def _keep_shadows(new: Any, old: Any) -> None:
    """A retyped tensor keeps the dataflow shadows (magnitudes, overflow) of the one it was made from."""
    h = old.handle
    dataflow.set_shadows(new.handle, getattr(h, dataflow.MAG, None), getattr(h, dataflow.OVF, None))


def _extreme(combine_fn: Any) -> str | None:
    """"max" or "min" for the combine functions of tl.max / tl.min / tl.argmax / tl.argmin, else None."""
    if combine_fn is tl.standard._elementwise_max:
        return "max"
    if combine_fn is tl.standard._elementwise_min:
        return "min"
    name = getattr(getattr(combine_fn, "fn", combine_fn), "__name__", "")
    if "arg" in name:
        return "max" if "max" in name else "min" if "min" in name else None
    return None
