"""The `libdevice` shim: `triton.language.extra.libdevice` functions computed with numpy.

Under the interpreter, libdevice's functions are stubs (`triton.language.extra.libdevice`, whose bodies
are `...`, and the backend's `@core.extern` functions, which refuse to run outside the compiler): stock
TRITON_INTERPRET=1 gets None from them. tdiff computes each on the values, in float64, and rounds the
result to the arguments' float type. `install_libdevice` swaps the stubs' code (so every name a kernel's module
bound them to is covered) for a call to a dispatcher the caller provides.

Standalone (numpy, triton and `shims`): reproducers embed this module's source.
"""

from __future__ import annotations

import functools
import importlib
import math
import types
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from .shims import bf16_to_f32, f32_to_bf16, is_bf16


def _scalar_fn(f: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    vec = np.vectorize(lambda v: f(v) if not np.isnan(v) else np.nan, otypes=[np.float64])
    return lambda x: vec(x) if np.size(x) else np.asarray(x, np.float64)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x - y * np.rint(x / y)


#: name -> (numpy function on float64 arrays, dataflow rule, result is an int32 predicate)
TABLE: dict[str, tuple[Callable, str, bool]] = {}
for _names, _fn, _rule in (
    ("abs", np.abs, "max"), ("floor", np.floor, "max"), ("ceil", np.ceil, "max"), ("trunc", np.trunc, "max"),
    ("rint nearbyint", np.rint, "max"), ("round", _round_half_away, "max"),
    ("sqrt sqrt_rn sqrt_rz sqrt_rd sqrt_ru", np.sqrt, "sqrt"), ("rsqrt rsqrt_rn", lambda x: 1 / np.sqrt(x), "rsqrt"),
    ("exp fast_expf", np.exp, "exp"), ("exp2", np.exp2, "exp2"),
    ("exp10 fast_exp10f", lambda x: np.power(10.0, x), "exp"),
    ("expm1", np.expm1, "exp"), ("log fast_logf", np.log, "log"), ("log2 fast_log2f", np.log2, "log"),
    ("log10 fast_log10f", np.log10, "log"), ("log1p", np.log1p, "log"),
    ("sin fast_sinf", np.sin, "max"), ("cos fast_cosf", np.cos, "max"), ("tan fast_tanf", np.tan, "max"),
    ("sinpi", lambda x: np.sin(np.pi * x), "max"), ("cospi", lambda x: np.cos(np.pi * x), "max"),
    ("asin", np.arcsin, "max"), ("acos", np.arccos, "max"), ("atan", np.arctan, "max"),
    ("sinh", np.sinh, "exp"), ("cosh", np.cosh, "exp"), ("tanh fast_tanhf", np.tanh, "max"),
    ("asinh", np.arcsinh, "max"), ("acosh", np.arccosh, "max"), ("atanh", np.arctanh, "max"),
    ("erf", _scalar_fn(math.erf), "max"), ("erfc", _scalar_fn(math.erfc), "max"),
    ("lgamma", _scalar_fn(math.lgamma), "max"), ("tgamma", _scalar_fn(math.gamma), "max"),
    ("cbrt", np.cbrt, "max"), ("rcbrt", lambda x: 1 / np.cbrt(x), "max"),
    ("saturatef", lambda x: np.clip(x, 0.0, 1.0), "max"), ("rcp_rn rcp_rz rcp_rd rcp_ru", lambda x: 1 / x, "max"),
    ("pow fast_powf powf", np.power, "max"), ("atan2", np.arctan2, "max"), ("hypot", np.hypot, "max"),
    ("rhypot", lambda x, y: 1 / np.hypot(x, y), "max"), ("fmod", np.fmod, "max"), ("remainder", _remainder, "max"),
    ("copysign", np.copysign, "max"), ("fdim", lambda x, y: np.maximum(x - y, 0.0), "max"),
    ("nextafter", np.nextafter, "max"), ("fmin", np.fmin, "max"), ("fmax", np.fmax, "max"),
    ("div_rn div_rz div_rd div_ru fast_dividef", np.divide, "fdiv"), ("add_rn add_rz add_rd add_ru", np.add, "max"),
    ("sub_rn sub_rz sub_rd sub_ru", np.subtract, "max"), ("mul_rn mul_rz mul_rd mul_ru", np.multiply, "fmul"),
    ("fma fma_rn fma_rz fma_rd fma_ru", lambda x, y, z: x * y + z, "fma"),
):
    for _name in _names.split():
        TABLE[_name] = (_fn, _rule, False)
for _names, _fn in (("isnan", np.isnan), ("isinf", np.isinf), ("finitef isfinited", np.isfinite),
                    ("signbit", np.signbit)):
    for _name in _names.split():
        TABLE[_name] = (_fn, "max", True)


def names() -> list[str]:
    return sorted(TABLE)


def compute_libdevice(name: str, args: tuple, used: Counter,
            after: Callable[[TensorHandle, list, str], None] | None = None) -> Any:
    """`libdevice.<name>(*args)` for the interpreter: the function in float64 on the values, the result
    in the arguments' float type (or int32 for predicates). `after(handle, operands, rule)`, where given,
    sets the result's dataflow shadows."""
    if name not in TABLE:
        raise NotImplementedError(f"libdevice function {name} has no interpreter shim in tdiff")
    fn, rule, predicate = TABLE[name]
    used["libdevice"] += 1
    tensors = [a for a in args if isinstance(a, tl.core.tensor)]
    like = next((t for t in tensors if t.dtype.is_floating()), tensors[0] if tensors else None)
    handles = [a.handle if isinstance(a, tl.core.tensor) else TensorHandle(np.array([float(a)], np.float32),
                                                                             tl.float32) for a in args]
    vals = [bf16_to_f32(h.data).astype(np.float64) if is_bf16(h) else np.asarray(h.data, np.float64) for h in handles]
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*vals))
    dt = tl.int32 if predicate else (like.dtype if like is not None else tl.float32)
    if predicate:
        data = out.astype(np.int32)
    elif dt == tl.bfloat16:
        data = f32_to_bf16(out.astype(np.float32))
    else:
        data = out.astype({16: np.float16, 32: np.float32, 64: np.float64}[dt.primitive_bitwidth])
    h = TensorHandle(data, dt)
    if after is not None and not predicate:
        after(h, handles, rule)
    blocks = [tuple(t.type.shape) for t in tensors if t.type.is_block()]  # (the tl shape: a batch's data has
    ty = tl.block_type(dt, list(np.broadcast_shapes(*blocks))) if blocks else dt  # a program axis besides)
    return tl.core.tensor(h, ty)


# ------------------------------------------------------------------ swapping the stubs' code

_FORWARD: dict[tuple[str, int], Any] = {}


def _extern_wrapper(fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # (defined where a reproducer embeds this module: its interpreter side's libdevice bridge)
        return _tdiff_libdevice(fn.__name__, *args)  # type: ignore[name-defined]  # noqa: F821

    return wrapper


#: the code of a `@core.extern` wrapper that forwards to the dispatcher (free variable: fn)
_EXTERN_CODE = _extern_wrapper(None).__code__


def _forwarding_code(name: str, arity: int) -> Any:
    """The code of `def f(arg0, ...): return _tdiff_libdevice(name, arg0, ...)` (for a libdevice stub)."""
    key = (name, arity)
    if key not in _FORWARD:
        params = ", ".join(f"arg{i}" for i in range(arity))
        namespace: dict[str, Any] = {}
        exec(f"def {name}({params}):\n    return _tdiff_libdevice({name!r}, {params})\n", namespace)
        _FORWARD[key] = namespace[name].__code__
    return _FORWARD[key]


@functools.lru_cache(maxsize=1)
def _swaps() -> tuple[tuple[Any, Any], ...]:
    """Every (function, code) swap `install_libdevice` makes, found once per process (the modules' functions do not
    change; their code is swapped and put back around each launch): the libdevice stubs, each given the code that
    forwards to the dispatcher, and the backend's libdevice (`tl.extra.cuda.libdevice`): `@core.extern` builtins,
    whose wrapper refuses to run outside the compiler; swapping its code covers every name it is bound to."""
    stubs = importlib.import_module("triton.language.extra.libdevice")
    out = [(fn, _forwarding_code(name, fn.__code__.co_argcount)) for name, fn in list(vars(stubs).items())
           if isinstance(fn, types.FunctionType) and fn.__module__ == stubs.__name__ and not name.startswith("_")]
    try:
        cuda = importlib.import_module("triton.language.extra.cuda.libdevice")
    except ImportError:  # pragma: no cover
        return tuple(out)
    for fn in list(vars(cuda).values()):
        inner = getattr(fn, "__wrapped__", None)
        if isinstance(fn, types.FunctionType) and inner is not None and fn.__code__.co_freevars == ("fn",):
            out.append((fn, _EXTERN_CODE))
    return tuple(out)


def install_libdevice(put: Callable[[object, str, Any], None], dispatch: Callable[..., Any]) -> None:
    """Make every libdevice stub call `dispatch(name, *args)`, with `put(object, attribute, value)`."""
    put(importlib.import_module("triton.language.extra.libdevice"), "_tdiff_libdevice", dispatch)
    put(importlib.import_module("triton.language.core"), "_tdiff_libdevice", dispatch)
    for fn, code in _swaps():
        put(fn, "__code__", code)
