"""tdiff: differential correctness testing for Triton kernels, compiled vs interpreted.

    import tdiff
    from tdiff import strategies as tst

    @tdiff.check(launch=..., reference=..., x=tst.tensors(ndim=1))
    @triton.jit
    def kernel(...): ...

    tdiff.verify(kernel)        # in any test; or run `pytest --tdiff`
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Names load on first use, so that pytest loading the plugin (`tdiff.plugin`) imports neither torch
# nor triton in runs that do not use tdiff, nor in an xdist controller.
_LAZY = {
    "strategies": ".strategies",
    "Check": ".declaration", "check": ".declaration", "checks_of": ".declaration",
    "CorpusError": ".errors", "DeclarationError": ".errors", "DivergenceError": ".errors", "TdiffError": ".errors",
    "CheckResult": ".drive.runner", "Runner": ".drive.runner", "verify": ".drive.runner",
    "RunOptions": ".core.settings",
    "Tolerance": ".core.tolerance",
}

__all__ = [
    "Check", "CheckResult", "CorpusError", "DeclarationError", "DivergenceError", "RunOptions", "Runner",
    "TdiffError", "Tolerance", "check", "checks_of", "strategies", "verify",
]

if TYPE_CHECKING:
    from . import strategies
    from .core.settings import RunOptions
    from .core.tolerance import Tolerance
    from .declaration import Check, check, checks_of
    from .drive.runner import CheckResult, Runner, verify
    from .errors import CorpusError, DeclarationError, DivergenceError, TdiffError


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tdiff' has no attribute {name!r}")
    mod = importlib.import_module(module, __name__)
    value = mod if name == "strategies" else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
