"""tdiff's tensors as a hypothesis extension: torch tensors for plain `@given` tests, as
`hypothesis.extra.numpy.arrays` draws numpy arrays.

    from hypothesis import given
    from tdiff import strategies as tst

    @given(x=tst.torch_tensors(ndim=2, dtype=["float32", "bfloat16"], device="cuda"))
    def test_my_op(x):
        ...

Each tensor is a view with the drawn layout (transposed, sliced, a `torch.split` half, padded rows,
a storage offset) into a storage whose other bytes are poison (NaN, or 0x5A bytes for integers), and
holds the drawn values (NaN, inf, -0.0, subnormals, the dtype's extremes placed on purpose).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from hypothesis import strategies as st

from ..core import dtypes
from ..core.case import TensorArg
from .tensors import tensors


def to_torch(arg: TensorArg, device: str | torch.device = "cpu") -> torch.Tensor:
    """A `TensorArg` as a torch tensor on `device`: its whole storage, viewed with its layout."""
    storage = dtypes.to_torch(arg.storage, arg.dt).to(device)
    return storage.as_strided(arg.shape, arg.strides, arg.offset)


def torch_tensors(shape: Sequence[Any] | None = None, *, device: str | torch.device = "cpu",
                  **kwargs: Any) -> st.SearchStrategy[torch.Tensor]:
    """Torch tensors drawn like `tensors(...)` (same arguments but `like=` and named sides, which
    need a check's other inputs), on `device`."""
    if kwargs.get("like") or any(isinstance(s, str) for s in (shape or ())):
        raise ValueError("torch_tensors draws one tensor on its own: like= and named sides need a @tdiff.check")
    strategy = tensors(shape, **kwargs)
    if not isinstance(strategy, st.SearchStrategy):  # an invalid declaration: say what is wrong
        strategy.validate()
        strategy = strategy.build({})
    return strategy.map(lambda arg: to_torch(arg, device))
