"""tdiff: differential correctness testing for Triton kernels, compiled vs interpreted.

    import tdiff
    from tdiff import strategies as tst

    @tdiff.check(launch=..., reference=..., x=tst.tensors(ndim=1))
    @triton.jit
    def kernel(...): ...

    tdiff.verify(kernel)        # in any test; or run `pytest --tdiff`
"""

from . import strategies
from .check import Check, check, checks_of
from .errors import CorpusError, DeclarationError, DivergenceError, TdiffError
from .runner import CheckResult, Runner, verify
from .settings import RunOptions
from .tolerance import Tolerance

__version__ = "0.1.0"

__all__ = [
    "Check", "CheckResult", "CorpusError", "DeclarationError", "DivergenceError", "RunOptions", "Runner",
    "TdiffError", "Tolerance", "check", "checks_of", "strategies", "verify",
]
