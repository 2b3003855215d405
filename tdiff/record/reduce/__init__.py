"""Kernel reduction: a divergence's kernel made as small as still fails the same way on its shrunk case.

Delta debugging over the kernel's AST (`candidates`: statements deleted, branches and loops replaced by a
branch or one iteration, constexprs specialised to the case's values, keyword arguments dropped,
expressions replaced by an operand), applied to its text (`source`: the kernel and the device functions it
calls), run by `ddmin` against an oracle the caller builds (`tdiff.drive.reduce_kernel`: the case judged
again), within a time budget. `build` makes a kernel of reduced source (also in worker processes).
"""

from __future__ import annotations

from .ddmin import Oracle, Reduction, reduce
from .source import Function, code_lines, collect, unified_diff

__all__ = ["Function", "Oracle", "Reduction", "code_lines", "collect", "reduce", "unified_diff"]
