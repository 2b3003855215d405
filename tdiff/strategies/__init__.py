"""tdiff's hypothesis strategies: tensors, sizes, values, and the case strategy of a check."""

from .cases import case_strategy, tensor_arg
from .layouts import LAYOUTS
from .sizes import ints, sides, sizes, specialization
from .tensors import FLOATS, INTS, TensorStrategy, tensors
from .values import Values, values

__all__ = [
    "FLOATS", "INTS", "LAYOUTS", "TensorStrategy", "Values", "case_strategy", "ints", "sides", "sizes",
    "specialization", "tensor_arg", "tensors", "values",
]
