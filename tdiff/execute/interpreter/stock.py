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
    BUILTIN_ALIASES,
    CONSTEXPR_ARGS,
    CONSTEXPR_IS,
    ENABLED,
    FLOAT_ARGS,
    INT_METHODS,
    LIBDEVICE,
    BoolOps,
    IntMethods,
    IsOps,
    bf16_reduce,
    bind_aliases,
    bool_op,  # noqa: F401  (the rewritten kernels reach it as this module's attribute)
    constexpr_args,
    count_into,
    current,
    implicit_cvt,
    install_builder,
    install_reductions,
    int_method,  # noqa: F401  (as bool_op)
    is_op,  # noqa: F401  (as bool_op)
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
    visitors = [v for name, v in ((BOOL_OPS, BoolOps), (CONSTEXPR_IS, IsOps), (INT_METHODS, IntMethods))
                if name in wanted]
    if visitors:
        _install_rewrites(interp, visitors)
    if BUILTIN_ALIASES in wanted:
        _install_aliases(interp)
    if LIBDEVICE in wanted:
        install_libdevice(setattr, lambda name, *args, **_: compute_libdevice(name, args, used))
    if poison:
        _install_poison(interp, builder)
    count_into(used)


def _install_rewrites(interp: Any, visitors: list[Any]) -> None:
    transform = interp.FunctionRewriter._transform_ast

    def rewrite(self: Any, src: str) -> Any:
        tree = transform(self, src)
        for visitor in visitors:
            tree = ast.fix_missing_locations(visitor(__name__).visit(tree))
        return tree

    interp.FunctionRewriter._transform_ast = rewrite


def _install_aliases(interp: Any) -> None:
    """After Triton patches the language for a kernel or device function, the module-level names of its module
    bound to a builtin call the patched builtin (`builtin-aliases`)."""
    import triton.language as tl

    targets: dict[int, tuple[Any, object, str]] = {}
    for owner in (tl, tl.core, tl.math):
        for name, value in list(vars(owner).items()):
            if callable(value) and tl.core.is_builtin(value):
                targets.setdefault(id(value), (value, owner, name))
    patch = interp._patch_lang

    def patch_lang(fn: Any) -> Any:
        out = patch(fn)
        bind_aliases(fn.__globals__, targets, lambda g, k, v: g.__setitem__(k, v))
        return out

    interp._patch_lang = patch_lang


def _install_bf16_reduce(interp: Any, used: Counter) -> None:
    cls = getattr(interp, "ReduceScanOpInterface", None)
    apply = getattr(cls, "apply", None)
    if cls is None or apply is None:  # pragma: no cover (every supported Triton has it)
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
