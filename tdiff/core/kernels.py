"""Kernel objects: unwrap autotune/heuristics layers, list configs, rebuild a chain with a new leaf."""

from __future__ import annotations

import copy
import inspect
from functools import lru_cache
from typing import Any

from triton.runtime.autotuner import Autotuner, Config, Heuristics
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction, KernelInterface

#: innermost kernel objects: `@triton.jit` makes an InterpretedFunction when TRITON_INTERPRET=1 is set
LEAVES = (JITFunction, InterpretedFunction)


def layers(kernel: Any) -> tuple[list[Any], JITFunction]:
    """The wrapping layers (outermost first) and the innermost JITFunction (or InterpretedFunction,
    in a process started with TRITON_INTERPRET=1)."""
    out: list[Any] = []
    k = kernel
    while not isinstance(k, LEAVES):
        if isinstance(k, (Autotuner, Heuristics)) or (isinstance(k, KernelInterface) and hasattr(k, "fn")):
            out.append(k)
            k = k.fn
        else:
            raise TypeError(f"{kernel!r} is not a @triton.jit kernel (found {type(k).__name__})")
    return out, k


def is_kernel(obj: Any) -> bool:
    if not isinstance(obj, (KernelInterface, *LEAVES)):
        return False
    try:
        layers(obj)
    except (TypeError, AttributeError):
        return False
    return True


def interpreted_at_import(kernel: Any) -> bool:
    """Whether the kernel was made under TRITON_INTERPRET=1 (it cannot be compiled in this process)."""
    return isinstance(layers(kernel)[1], InterpretedFunction)


def jit_function(kernel: Any) -> JITFunction:
    return layers(kernel)[1]


def kernel_name(kernel: Any) -> str:
    name: str = jit_function(kernel).fn.__name__  # (a JITFunction is untyped)
    return name


def configs(kernel: Any) -> list[Config]:
    """The configs of the outermost autotuner, or [] if the kernel is not autotuned."""
    for layer in layers(kernel)[0]:
        if isinstance(layer, Autotuner):
            return list(layer.configs)
    return []


def constexpr_names(jit: JITFunction) -> list[str]:
    return [p.name for p in jit.params if p.is_constexpr]


@lru_cache(maxsize=256)
def signature(fn: Any) -> inspect.Signature:
    """`inspect.signature` of a kernel's Python function, computed once (launches bind every time)."""
    return inspect.signature(fn)


def arg_names(jit: JITFunction) -> list[str]:
    return list(signature(jit.fn).parameters)


class NoCache(dict[Any, Any]):
    """A cache that keeps nothing: wrappers that cache a launched kernel (FlagGems' LibEntry) and
    relaunch it directly would skip tdiff's launch (no record, no interpreter)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _uncached(layer: Any) -> None:
    for name, value in list(vars(layer).items()):
        if "cache" not in name or name == "cache" and isinstance(layer, Autotuner):
            continue
        if isinstance(value, dict):
            setattr(layer, name, NoCache())
        elif isinstance(value, (tuple, list)) and value and all(isinstance(v, dict) for v in value):
            setattr(layer, name, type(value)(NoCache() for _ in value))


def rebuild(kernel: Any, leaf: Any, config: int | None) -> Any:
    """A copy of the kernel's layers around `leaf`; an autotuner is pinned to config `config`; the
    layers' own kernel caches keep nothing (every launch goes through `JITFunction.run`)."""
    outer, _ = layers(kernel)
    tuners = [layer for layer in outer if isinstance(layer, Autotuner)]
    inner = leaf
    for layer in reversed(outer):
        c = copy.copy(layer)
        if not isinstance(layer, (Autotuner, Heuristics)):
            _uncached(c)
        c.fn = inner
        if isinstance(layer, Autotuner):
            index = config if (config is not None and layer is tuners[0]) else 0
            if not 0 <= index < len(layer.configs):
                raise ValueError(f"config #{index} does not exist: the autotuner has {len(layer.configs)}")
            c.configs = [layer.configs[index]]
            c.cache = {}
        inner = c
    return inner
