"""liger's torch-to-Triton dtype map (`liger_kernel.ops.utils.torch_to_triton_dtype`), and float64 for tdiff's
float64 rerun of a kernel (the interpreter on upcast inputs: the same operations, none out of range), which tells an
intermediate overflow in float16 (a finding) from a wrong formula; liger's own map has no float64."""

import torch
import triton.language as tl
from liger_kernel.ops.utils import torch_to_triton_dtype

TRITON_DTYPE = {**torch_to_triton_dtype, torch.float64: tl.float64}
