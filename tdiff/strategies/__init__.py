"""tdiff's hypothesis strategies: tensors, sizes, values, the case strategy of a check, and torch tensors
for plain `@given` tests."""

from .cases import case_strategy, tensor_arg
from .layouts import LAYOUTS
from .sizes import ints, sides, sizes, specialization
from .tensors import FLOATS, INTS, TensorStrategy, tensors
from .torch import to_torch, torch_tensors
from .values import Values, values

__all__ = [
    "FLOATS", "INTS", "LAYOUTS", "TensorStrategy", "Values", "case_strategy", "ints", "sides", "sizes",
    "specialization", "tensor_arg", "tensors", "to_torch", "torch_tensors", "values",
]
