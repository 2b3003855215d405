"""Generation: hypothesis strategies for tensors (shapes, layouts, values), sizes and integers aimed at
masks and specialization classes, the thresholds a kernel branches on, and the case strategy of a
check. `tdiff.strategies` is its public face."""

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
