"""Triton's language semantics, one operation family per module, compared where Triton defines the result.

Each check runs one family of `tl` operations on the values where implementations part ways (NaN, ±inf,
±0, subnormals, the dtype's max and lowest, integer edges, halfway cases for rounding) and declares its
class (see `tdiff/core/op_classes.py` and the README's "Operation classes"):

- exact, compared bit for bit (`tolerance="exact"`; NaN payloads aside): conversions with their rounding
  mode, integer and bit ops, `fma`, `umulhi`, `div_rn`, `sqrt_rn`, one `+`, `-` or `*`,
  min/max/clamp/where, max/argmax reductions, integer sums and scans, sort, histogram, integer atomics,
  `randint`, `rand`;
- approximate, within their op class's tolerance: default `/`, `exp`/`log`/`sin`/`cos`/`rsqrt`/`erf`,
  float sums, scans, dots and atomics, `randn`;
- unspecified: integer division by zero, shifts by the width or more, NaN under `propagate_nan=NONE`,
  float to int out of range, fp8 out of range: kept out of the exact checks' values; the
  `*_unspecified` checks draw them and say `unspecified="note"`.

References compute the defined result with numpy or torch at the defined rounding (a float64 result
rounded once to float32 is the correctly rounded result for one `+ - * /` or `sqrt` of float32 operands).
"""
