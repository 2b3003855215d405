"""One kernel specialization as a compile job, compiled by Triton's own compiler, with or without a GPU.

A `CompileJob` is what Triton's JIT hands `triton.compile` for one launch: the `ASTSource` of the
specialization (dtypes, constexprs, divisibility attributes), the target and the options. It is read off
a `CompiledKernel` (which keeps its source and options), so the job of a launch is found by compiling the
launch once: on the GPU through the JIT, or here through the JIT with a driver that only names a target
(`compile_only`: Triton compiles to a cubin without a GPU; only launching needs one).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ... import compat
from .support import option_names

#: options that do not change what a specialization computes, left out of its id
_NOT_IDENTITY = ("ir_override", "extern_libs")


def _hashable(value: Any) -> Any:
    """Metadata read back from JSON holds lists where Triton's options hold tuples (options are hashed)."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


def identity(src_hash: str, options: dict[str, Any]) -> str:
    """A specialization's id: its source hash (kernel, dtypes, constexprs, attributes) and its options."""
    opts = sorted((k, repr(_hashable(v))) for k, v in options.items() if k not in _NOT_IDENTITY)
    return hashlib.sha256(f"{src_hash}|{opts}".encode()).hexdigest()[:16]


def options_of(kernel: Any) -> dict[str, Any]:
    """The compile options a `CompiledKernel` was compiled with (its metadata holds every CUDAOptions field)."""
    meta = kernel.metadata._asdict()
    return {k: _hashable(meta[k]) for k in option_names() if k in meta and meta[k] is not None}


def spec_id(kernel: Any) -> str:
    """The id of the specialization a `CompiledKernel` was compiled for (ignoring any `ir_override`)."""
    return identity(kernel.src.hash(), options_of(kernel))


def describe(kernel: Any) -> str:
    """`add_kernel(x_ptr: *fp32 %16, ..., BLOCK=128) num_warps=4`: a specialization, for people."""
    src = kernel.src
    names = list(getattr(src.fn, "arg_names", []))
    consts = {names[k[0]] if isinstance(k, tuple) and len(k) == 1 and k[0] < len(names) else str(k): v
              for k, v in getattr(src, "constants", {}).items()}
    aligned = {names[k[0]] for k, v in getattr(src, "attrs", {}).items()
               if isinstance(k, tuple) and len(k) == 1 and k[0] < len(names) and "tt.divisibility" in str(v)}
    parts = []
    for name, ty in src.signature.items():
        if name in consts:
            parts.append(f"{name}={getattr(consts[name], 'value', consts[name])}")
        else:
            parts.append(f"{name}: {ty}" + (" %16" if name in aligned else ""))
    meta = kernel.metadata
    return f"{src.name}({', '.join(parts)}) num_warps={meta.num_warps} num_stages={meta.num_stages}"


@dataclass(frozen=True)
class CompileJob:
    """One specialization as `triton.compile` takes it."""

    src: Any  # triton.compiler.ASTSource
    target: Any  # triton.backends.compiler.GPUTarget
    options: tuple[tuple[str, Any], ...]
    name: str
    spec: str  # `identity` of the specialization
    label: str = ""  # `describe` of it
    reference: Any = field(default=None, compare=False)  # the CompiledKernel compiled from source

    def compile(self, ir_override: str | None = None, **changes: Any) -> Any:
        """`triton.compile` of the job; `ir_override` replaces a stage's output. Triton's on-disk cache is used
        unless tdiff has changed the pipeline in this process (`passes.changed`): then `fresh`."""
        import triton

        from .passes import changed

        if changed():
            return self.fresh(ir_override, **changes)
        return triton.compile(self.src, target=self.target, options=self._options(ir_override, changes))

    def fresh(self, ir_override: str | None = None, **changes: Any) -> Any:
        """`compile` in a scratch cache: for compiles whose passes or tools tdiff changed, which Triton's cache
        key does not show (so they must neither come from nor go into the real cache)."""
        import triton

        with scratch_cache():
            return triton.compile(self.src, target=self.target, options=self._options(ir_override, changes))

    def _options(self, ir_override: str | None, changes: dict[str, Any]) -> dict[str, Any]:
        options = dict(self.options, **changes)
        if ir_override is not None:
            options["ir_override"] = str(ir_override)
        return options


@contextlib.contextmanager
def scratch_cache(use: bool = True) -> Iterator[None]:
    """Within the block (if `use`) Triton's on-disk cache is an empty folder of its own, removed afterwards."""
    if not use:
        yield
        return
    from triton import knobs

    with tempfile.TemporaryDirectory(prefix="tdiff-compile-") as scratch, knobs.cache.scope():
        knobs.cache.dir = scratch
        yield


def job_of(kernel: Any) -> CompileJob:
    """The compile job a `CompiledKernel` came from."""
    options = options_of(kernel)
    options.pop("ir_override", None)
    return CompileJob(kernel.src, kernel.metadata.target, tuple(sorted(options.items())), kernel.metadata.name,
                      spec_id(kernel), describe(kernel), kernel)


# ------------------------------------------------------------------ compiling without a GPU

compile_only = compat.compile_only  # (the driver it swaps in is a version switch: tdiff.compat)


def gpu_arch(device: int = 0) -> int | None:
    """The compute capability of a visible CUDA GPU as Triton writes it (90 for an H100), asked of the driver
    (`cuDeviceGetAttribute`) without creating a context; None without one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return None
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    major, minor, dev = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
    if lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(dev), device) != 0:
        return None
    if lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) != 0 or \
            lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) != 0:  # COMPUTE_CAPABILITY_MAJOR / MINOR
        return None
    return major.value * 10 + minor.value
