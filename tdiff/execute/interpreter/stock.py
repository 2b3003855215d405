"""tdiff's shims and masked-lane poison installed on stock `TRITON_INTERPRET=1`: a reproducer's interpreter side.

A reproducer embeds this module's source (with `compat`, `undefined`, `shims` and `libdevice`) and
calls `install` in its interpreter subprocess, so the interpreter side computes what tdiff's interpreter
computed, with the same functions, and reports what they worked around. tdiff itself never calls it
(it patches Triton for good); its own interpreter installs the same shims in `hooks` and `scope`.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from ...compat import interpreter_builder, patch_stock_index
from .libdevice import compute_libdevice, install_libdevice
from .shims import (
    BF16_ARITH,
    BOOL_OPS,
    CONSTEXPR_ARGS,
    ENABLED,
    FLOAT_ARGS,
    LIBDEVICE,
    BoolOps,
    bf16_reduce,
    bool_op,  # noqa: F401  (the rewritten kernels reach it as this module's attribute)
    constexpr_args,
    count_into,
    current,
    implicit_cvt,
    install_builder,
    install_reductions,
)
from .undefined import OtherGiven, poisoned_other, undefined_lanes


def install(names: Iterable[str], used: Counter, poison: bool = False) -> None:
    """Install the shims `names` (tdiff's names, `shims.ENABLED`'s keys) on stock TRITON_INTERPRET=1,
    counting their uses into `used`; with `poison`, fill the masked-out lanes of a load without
    `other=` with the poison value (`undefined`), saying so on stderr."""
    from triton.runtime import interpreter as interp

    wanted = set(names)
    for name in ENABLED:
        ENABLED[name] = name in wanted
    patch_stock_index(interp)  # (Triton 3.4 to 3.6 with numpy >= 2.4: see `compat`)
    builder = interpreter_builder()
    install_builder(builder, setattr, used, poison)
    install_reductions(interp, setattr, used)
    if FLOAT_ARGS in wanted:
        interp._implicit_cvt = implicit_cvt(interp._implicit_cvt, used)
    if BF16_ARITH in wanted:  # reductions and scans bypass the builder
        _install_bf16_reduce(interp, used)
    if CONSTEXPR_ARGS in wanted:
        _install_constexpr_args(interp)
    if BOOL_OPS in wanted:
        transform = interp.FunctionRewriter._transform_ast
        interp.FunctionRewriter._transform_ast = lambda self, src: ast.fix_missing_locations(
            BoolOps(__name__).visit(transform(self, src)))
    if LIBDEVICE in wanted:
        install_libdevice(setattr, lambda name, *args, **_: compute_libdevice(name, args, used))
    if poison:
        _install_poison(interp, builder)
    count_into(used)


def _install_bf16_reduce(interp: Any, used: Counter) -> None:
    cls = getattr(interp, "ReduceScanOpInterface", None)
    apply = getattr(cls, "apply", None)
    if apply is None:  # pragma: no cover (every supported Triton has it)
        return

    def apply_bf16(self: Any, input: Any) -> Any:
        if not isinstance(input, tuple):
            return apply_bf16(self, (input,))[0]
        out = bf16_reduce(lambda ins: apply(self, ins), input, used)
        return apply(self, input) if out is None else out

    cls.apply = apply_bf16


def _install_constexpr_args(interp: Any) -> None:
    call = interp.InterpretedFunction.__call__

    def device_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = constexpr_args(args, kwargs)
        return call(self, *args, **kwargs)

    interp.InterpretedFunction.__call__ = device_call


def _install_poison(interp: Any, builder: Any) -> None:
    other = OtherGiven()
    other.install(setattr)
    load = current(builder, "create_masked_load")

    def create_masked_load(ptrs: Any, mask: Any, given: Any, *rest: Any, **kw: Any) -> Any:
        shape = np.shape(ptrs.data)
        lanes = undefined_lanes(shape, None if mask is None else mask.data, given, other.now)
        if lanes is not None:
            given = poisoned_other(ptrs, interp._get_np_dtype, interp.TensorHandle)
            print(f"interpreter: {int(lanes.sum())} masked-out lane(s) of a load without other= filled with a "
                  "poison value", file=sys.stderr)
        return load(ptrs, mask, given, *rest, **kw)

    builder.create_masked_load = create_masked_load
