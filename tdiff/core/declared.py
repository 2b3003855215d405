"""What the layers below the declaration read of a check (`tdiff.declaration.Check` is one): a Protocol, so that
generate and judge type the check they are given without importing the layer above them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .backend_spec import BackendSpec


class DeclaredCheck(Protocol):
    @property
    def id(self) -> str: ...  # `module::kernel[check]`
    @property
    def kernel(self) -> Any: ...  # the @triton.jit function or a wrapper of it (Triton's JITFunction is untyped)
    @property
    def launch(self) -> Callable[..., Any]: ...
    @property
    def reference(self) -> Callable[..., Any] | None: ...
    @property
    def strategies(self) -> Mapping[str, Any]: ...  # input name -> a hypothesis strategy or a tensor spec
    @property
    def inputs(self) -> Any: ...  # None or a hypothesis strategy drawing a dict of inputs
    @property
    def dims(self) -> Mapping[str, Any]: ...  # dimension name -> a strategy
    @property
    def configs(self) -> tuple[int, ...] | None: ...
    @property
    def backends(self) -> tuple[BackendSpec, ...] | None: ...
