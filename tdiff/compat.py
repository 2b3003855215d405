"""What differs between the Triton (and numpy) versions tdiff supports, Triton 3.4 to 3.9, in one place.

Both tdiff's instrumented interpreter and the reproducers' interpreter side take their version-dependent
code from here: a reproducer embeds this module's source (so it imports only numpy, triton and the
standard library). Each switch is a function of the versions, read from Triton's sources
(`runtime/interpreter.py`, `language/semantic.py`, `runtime/jit.py` of each release), evaluated for the
installed ones by default; `tests/test_compat.py` checks each against what the installed Triton does.

- `index_needs_patch` (3.4 to 3.6, with numpy >= 2.4): `tensor.__index__` is `int(handle.data)`, which
  numpy >= 2.4 refuses for a 1-element array (`range(0, tl.cdiv(K, BK))` over a runtime `K` fails).
- `has_get_bf16` (3.9): the interpreter's builder builds bf16 constants.
- `minmax_propagates_nan` (3.4 to 3.7): `create_maxnumf` / `create_minnumf` are `np.maximum` /
  `np.minimum`, so NaN wins where compiled code (maxnum) returns the other operand.
- `reduce_minmax_propagates_nan` (3.4): the interpreter's `tl.max` / `tl.min` reductions are `np.max` /
  `np.min` (NaN wins; 3.5 and later, and compiled code, skip NaN: `np.nanmax`).
- `fma_rounds_once` (3.9): `create_fma` rounds once for float32 and float64 (before: `x * y + z`).
- `load_frontend_name` (`_load_legacy` 3.4 to 3.7, `load` 3.8 and 3.9): the frontend method that hands
  a masked load's `other` to the builder.
- `volatile_position` (third 3.4 to 3.8, second 3.9): where `is_volatile` is among the arguments of
  `create_masked_load` after `other` ((cache, eviction, volatile), then (cache policy, volatile)).
- `relaunch_takes_constexprs` (3.4 to 3.6): FlagGems' LibEntry launches a kernel it keeps with every
  argument; from 3.7 with the non-constexpr ones only, and tdiff adds the others back.
- `driver_slot` (`active` 3.4, `_active` 3.5 to 3.9): the attribute of `triton.runtime.driver.driver` that
  holds the active driver, which `compile_only` replaces to compile for a GPU without one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import triton

#: the Triton minors tdiff supports (pyproject's `triton>=3.4,<3.10`)
SUPPORTED = ((3, 4), (3, 9))


def version_tuple(text: str) -> tuple[int, int, int]:
    """`"3.6.0"`, `"3.9.0+git1234"`, `"2.4.0rc1"` -> (major, minor, patch)."""
    parts = []
    for piece in text.split("+")[0].split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits or 0))
    major, minor, patch = (parts + [0, 0, 0])[:3]
    return major, minor, patch


TRITON = version_tuple(triton.__version__)
NUMPY = version_tuple(np.__version__)


def supported(triton_version: Sequence[int] = TRITON) -> bool:
    """Whether tdiff supports this Triton (3.4 to 3.9)."""
    return SUPPORTED[0] <= tuple(triton_version[:2]) <= SUPPORTED[1]


# ------------------------------------------------------------------ the switches

def index_needs_patch(triton_version: Sequence[int] = TRITON, numpy_version: Sequence[int] = NUMPY) -> bool:
    """Triton 3.4 to 3.6 convert a scalar tensor to an index with `int(handle.data)`, which numpy >= 2.4
    refuses for a 1-element array; 3.7 and later use `int(handle.data.squeeze())`."""
    return tuple(triton_version[:2]) < (3, 7) and tuple(numpy_version[:2]) >= (2, 4)


def has_get_bf16(triton_version: Sequence[int] = TRITON) -> bool:
    """The interpreter's builder has `get_bf16` (bf16 constants) from Triton 3.9."""
    return tuple(triton_version[:2]) >= (3, 9)


def minmax_propagates_nan(triton_version: Sequence[int] = TRITON) -> bool:
    """Stock `tl.maximum` / `tl.minimum` (propagate_nan=NONE) return a NaN operand before Triton 3.8
    (`np.maximum`; 3.8 uses `np.fmax`, as compiled code's maxnum does)."""
    return tuple(triton_version[:2]) < (3, 8)


def reduce_minmax_propagates_nan(triton_version: Sequence[int] = TRITON) -> bool:
    """Stock `tl.max` / `tl.min` reductions return NaN where a lane holds one in Triton 3.4 (`np.max`);
    from 3.5 they skip it (`np.nanmax`), as compiled code's maxnum reduction does."""
    return tuple(triton_version[:2]) < (3, 5)


def fma_rounds_once(triton_version: Sequence[int] = TRITON) -> bool:
    """Stock `tl.fma` rounds once for float32 and float64 from Triton 3.9 (`fma_fp32`); before, it
    computes `x * y + z` in the operands' type, rounding the product first."""
    return tuple(triton_version[:2]) >= (3, 9)


def load_frontend_name(triton_version: Sequence[int] = TRITON) -> str:
    """The `TritonSemantic` method that receives `other=` as a tensor (or None) and hands the builder
    `other.handle if other else None`: `_load_legacy` up to 3.7, `load` from 3.8."""
    return "_load_legacy" if tuple(triton_version[:2]) < (3, 8) else "load"


def volatile_position(triton_version: Sequence[int] = TRITON) -> int:
    """The index of `is_volatile` among `create_masked_load`'s arguments after `ptrs, mask, other`:
    (cache_modifier, eviction_policy, is_volatile) up to 3.8, (cache_policy, is_volatile) in 3.9."""
    return 2 if tuple(triton_version[:2]) < (3, 9) else 1


def relaunch_takes_constexprs(triton_version: Sequence[int] = TRITON) -> bool:
    """FlagGems' LibEntry keeps what a kernel's first launch returned and launches it again with every
    argument on Triton 3.3 to 3.6, with the non-constexpr arguments only from 3.7 (its own version switch,
    matching the compiled kernel's launcher)."""
    return tuple(triton_version[:2]) < (3, 7)


def driver_slot(triton_version: Sequence[int] = TRITON) -> str:
    """The attribute of Triton's `DriverConfig` holding the active driver: `active` in 3.4 (set in its
    constructor), `_active` from 3.5 (read through the `active` property)."""
    return "active" if tuple(triton_version[:2]) < (3, 5) else "_active"


# ------------------------------------------------------------------ code that uses them

def tensor_index(self: Any) -> int:
    """A scalar tensor as an index, as Triton 3.7 and later convert it (any numpy)."""
    return int(np.asarray(self.handle.data).reshape(-1)[0])


def patch_stock_index(interp: Any) -> bool:
    """Make stock TRITON_INTERPRET=1 convert scalar tensors to indices as Triton 3.7+ does, where this
    Triton and numpy need it (`interp`: `triton.runtime.interpreter`). Returns whether it patched."""
    if not index_needs_patch():
        return False
    patch = interp._patch_lang_tensor

    def _patch_lang_tensor(tensor: Any, *rest: Any) -> Any:  # (3.6 takes a patch scope after the tensor)
        out = patch(tensor, *rest)
        tensor.__index__ = tensor_index
        return out

    interp._patch_lang_tensor = _patch_lang_tensor
    return True


def load_frontend() -> tuple[type, str]:
    """The class and name of the frontend method that receives a masked load's `other=`."""
    from triton.language.semantic import TritonSemantic

    name = load_frontend_name()
    if not callable(getattr(TritonSemantic, name, None)):  # a version between those read
        name = "_load_legacy" if hasattr(TritonSemantic, "_load_legacy") else "load"
    return TritonSemantic, name


def is_volatile(rest: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a `create_masked_load(ptrs, mask, other, *rest, **kwargs)` call is a volatile load."""
    if "is_volatile" in kwargs:
        return bool(kwargs["is_volatile"])
    i = volatile_position()
    return len(rest) > i and bool(rest[i])


def interpreter_builder() -> Any:
    """The interpreter's one builder instance, which every interpreted launch uses."""
    from triton.runtime import interpreter

    return interpreter.interpreter_builder


def relaunch_arguments(params: Sequence[tuple[str, bool]], made: dict[str, Any], args: tuple,
                       kwargs: dict[str, Any], triton_version: Sequence[int] = TRITON) -> tuple[tuple, dict[str, Any]]:
    """The arguments of a launch of a kept kernel, made complete. `params`: the kernel's (name,
    is_constexpr) in order; `made`: every argument of the launch that made it, by name. Where the
    launch passes exactly the non-constexpr arguments (FlagGems' LibEntry from Triton 3.7), the
    constexprs of the launch that made the kernel are added back; otherwise the call is unchanged."""
    plain = [name for name, constexpr in params if not constexpr]
    if relaunch_takes_constexprs(triton_version) or len(args) != len(plain) or len(plain) == len(params) \
            or any(k not in plain for k in kwargs):
        return args, kwargs
    given = dict(zip(plain, args))
    full = {name: given[name] if name in given else made[name] for name, _ in params if name in given or name in made}
    return tuple(full.values()), dict(kwargs)



class TargetOnlyDriver:
    """A Triton driver that names a target and launches nothing: the JIT's `warmup=True` compiles with it."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> str:  # the JIT keys its caches by device: keep these apart
        return f"tdiff-compile-only:{self.target.backend}:{self.target.arch}"

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def is_active(self) -> bool:
        return True


@contextlib.contextmanager
def compile_only(arch: int) -> Iterator[Any]:
    """Within the block Triton's JIT compiles for `sm_<arch>` without a GPU (`warmup=True` only: a real launch
    would fail): Triton compiles to a cubin on any machine; only launching needs a GPU. Yields the target."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    target = GPUTarget("cuda", arch, 32)
    slot = driver_slot()
    if slot not in vars(driver):  # a version between those read: the attribute this one has
        slot = "_active" if "_active" in vars(driver) else "active"
    saved = vars(driver)[slot]
    setattr(driver, slot, TargetOnlyDriver(target))
    try:
        yield target
    finally:
        setattr(driver, slot, saved)
