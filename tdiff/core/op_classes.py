"""What Triton defines about each kind of operation's result: exact, approximate or unspecified.

The instrumented interpreter tags the operations a kernel runs (`Trace.ops`); the comparison takes
its tolerance from the tags (`tdiff.core.tolerance.from_ops`):

- *exact*: the result is defined to the bit (NaN payloads aside), and two backends of one kernel must
  agree bit for bit: data movement, integer arithmetic and bit operations (LLVM `add`/`mul`/`and`...,
  two's complement wrap-around), comparisons, `tl.where`, min/max with `propagate_nan=ALL`
  (`minimumf`/`maximumf`), conversions (`fptrunc` rounds to nearest even, `fp_downcast_rounding="rtz"`
  toward zero; `triton/language/semantic.py: cast`), `tl.fma` (`math.fma` -> PTX `fma.rn`: rounded
  once), `tl.math.div_rn` and `tl.math.sqrt_rn` (PTX `div.rn` / `sqrt.rn`: IEEE, rounded to
  nearest), `tl.umulhi`. These tags carry no tolerance. Against a reference (torch or numpy, which
  compute a kernel's fused or correctly rounded steps their own way) the rounded ones (fma, div_rn,
  sqrt_rn) are judged as arithmetic; a check that wants them exact there says `tolerance="exact"`.
- *approximate*: Triton allows an error: `a * b + c` may be contracted into one fma
  (`enable_fp_fusion`, on by default), default `/` on float32 lowers to `div.full.f32` (2 ulp), the
  math functions (`exp`, `log`, `sin`, `cos`, `sqrt`, `rsqrt`, `erf`) to approximations (`ex2.approx`,
  `lg2.approx`, `sqrt.approx` with flush-to-zero: CUDA's ulp tables), reductions, scans and atomics
  reassociate, `tl.dot` in tf32 rounds its inputs to 10 bits. Each has its tolerance class.
- *unspecified*: Triton (and LLVM under it) gives no value: integer division or remainder by zero,
  INT_MIN / -1, shifts by the bit width or more, NaN in `tl.maximum`/`tl.minimum` under
  `propagate_nan=NONE`, a float-to-int conversion out of range. The interpreter records them
  (`tdiff.execute.interpreter.unspecified`, `Trace.ub`); a divergence that depends on them is named as such,
  and fails a check unless it says `unspecified="note"`.
"""

from __future__ import annotations

EXACT, APPROXIMATE, UNSPECIFIED = "exact", "approximate", "unspecified"

#: interpreter op tag -> (its class, the tolerance class it brings between two backends of the kernel,
#: the tolerance class against a reference); None: no tolerance (exact)
TAGS: dict[str, tuple[str, str | None, str | None]] = {
    "farith": (APPROXIMATE, "arith", "arith"),  # + - * (contracted into fma by fp fusion), %
    "fdiv": (APPROXIMATE, "arith", "arith"),  # default division: div.full.f32, 2 ulp
    "fma": (EXACT, None, "arith"),
    "div_rn": (EXACT, None, "arith"),
    "sqrt_rn": (EXACT, None, "arith"),
    "transcendental": (APPROXIMATE, "transcendental", "transcendental"),
    "reduce": (APPROXIMATE, "reduce", "reduce"),
    "scan": (APPROXIMATE, "reduce", "reduce"),
    "atomic": (APPROXIMATE, "reduce", "reduce"),
    "dot:tf32": (APPROXIMATE, "tf32", "tf32"),
    "dot:ieee": (APPROXIMATE, "dot", "dot"),
    "dot:lowp": (APPROXIMATE, "dot", "dot"),
    "dot": (APPROXIMATE, "dot", "dot"),
}


def tolerance_class(tag: str, reference: bool) -> str | None:
    """The tolerance class an op tag brings to a comparison (None: none; exact)."""
    entry = TAGS.get(tag)
    if entry is None:
        return None
    return entry[2] if reference else entry[1]


#: backends whose float32 `tl.dot` rounds as IEEE float32 whatever precision the kernel asks for:
#: Triton's interpreter (a numpy matmul in float32) and a reference (torch computes float32 matmuls in
#: IEEE float32 on the CPU, and on CUDA unless tf32 is switched on; a reference that rounds like tf32
#: declares `tolerance="tf32"`); only a compiled kernel runs tf32
IEEE_DOT_KINDS = ("interpreter", "reference")


def as_run_by(ops: set[str] | None, kinds: tuple[str, ...]) -> set[str] | None:
    """The op tags as backends of these kinds ran them: a tf32 `tl.dot` brings no tf32 allowance to a
    pair neither side of which compiled it (the interpreter multiplies in IEEE float32, so an error of
    tf32's size between it and a reference is the kernel's: an fp16 accumulator, say)."""
    if not ops or "dot:tf32" not in ops or not kinds or any(k not in IEEE_DOT_KINDS for k in kinds):
        return ops
    return (ops - {"dot:tf32"}) | {"dot:ieee"}

