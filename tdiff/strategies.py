"""tdiff's hypothesis strategies, the public face of `tdiff.generate`: tensors, sizes, values, the case
strategy of a check, and torch tensors for plain `@given` tests (as `hypothesis.extra.numpy` is for arrays)."""

from .generate import (
    FLOATS,
    INTS,
    LAYOUTS,
    TensorStrategy,
    Values,
    case_strategy,
    ints,
    sides,
    sizes,
    specialization,
    tensor_arg,
    tensors,
    to_torch,
    torch_tensors,
    values,
)

__all__ = [
    "FLOATS", "INTS", "LAYOUTS", "TensorStrategy", "Values", "case_strategy", "ints", "sides", "sizes",
    "specialization", "tensor_arg", "tensors", "to_torch", "torch_tensors", "values",
]
