"""The names of the interpreter's shims and what each does, in words (`DESCRIPTIONS`): what the summary and a
reproducer name. Plain data, without Triton: an xdist controller reads it to print the run's summary."""

FLOAT_ARGS = "float-args"
BF16_CONSTANTS = "bf16-constants"
BF16_ARITH = "bf16-arith"
BF16_ATOMICS = "bf16-atomics"
LIBDEVICE = "libdevice"
CONSTEXPR_ARGS = "constexpr-args"
BOOL_OPS = "tensor-and-or"
NAN_MINMAX = "nan-minmax"
FMA_ROUNDING = "fma-rounding"
BUILTIN_ALIASES = "builtin-aliases"
BOOL_SPLAT = "bool-splat"
INT_METHODS = "int-methods"
CONSTEXPR_IS = "constexpr-is"

#: what each shim does, as the summary and a reproducer's header name it
DESCRIPTIONS = {
    FLOAT_ARGS: "float kernel arguments typed as fp32 scalars, as the compiler types them (stock "
                "TRITON_INTERPRET=1 passes Python floats: `.to()` fails and fp16/bf16 products stay narrow)",
    BF16_CONSTANTS: "bf16 constants built with round-to-nearest-even (this Triton's interpreter has no get_bf16)",
    BF16_ARITH: "bf16 arithmetic and comparisons computed on the values (stock TRITON_INTERPRET=1 computes on "
                "their bits)",
    LIBDEVICE: "libdevice functions computed with numpy in float64 (stock TRITON_INTERPRET=1 calls "
               "triton.language.extra.libdevice's empty stubs, which return None)",
    BF16_ATOMICS: "bf16 atomics done on the values (stock TRITON_INTERPRET=1: 'Unsupported data type')",
    CONSTEXPR_ARGS: "constexpr arguments of device functions wrapped in tl.constexpr, as the compiler does "
                    "(stock TRITON_INTERPRET=1 passes a bare tl.dtype: `.value` fails)",
    BOOL_OPS: "`and` / `or` between tensors as elementwise logical operations, as the compiler does (stock "
              "TRITON_INTERPRET=1 applies Python's truth value to whole tensors)",
    NAN_MINMAX: "tl.maximum / tl.minimum (propagate_nan=NONE) return the non-NaN operand, and tl.max / tl.min "
                "reductions skip NaN, as compiled code does (stock TRITON_INTERPRET=1 returns NaN: elementwise before "
                "Triton 3.8, reductions in 3.4)",
    FMA_ROUNDING: "tl.fma rounded once, as the GPU's fma.rn does (stock TRITON_INTERPRET=1 before Triton 3.9 "
                  "computes `x * y + z` in the operands' type: the product is rounded before the sum)",
    BUILTIN_ALIASES: "module-level names bound to Triton builtins (`cast = tl.cast`, `from triton.language import "
                     "gather`, `getattr(tl, 'exp')`) called with the interpreter's semantic, as the compiler resolves "
                     "them (stock TRITON_INTERPRET=1 patches only the attributes of `triton.language`: '`_semantic` "
                     "argument must be provided outside of JIT functions')",
    BOOL_SPLAT: "a scalar comparison broadcast to a block stays boolean, as the compiler's i1 splat does (stock "
                "TRITON_INTERPRET=1 converts it to the compared values' type: a mask `(offs < n) & (pid < m)` "
                "of int32 values, 'mask has unsupported dtype'; `~` of it fails)",
    INT_METHODS: "`.to()` on a loop index (`for i in range(n): i.to(tl.int64)`) acts on an integer tensor, as the "
                 "compiler's loop index is one (stock TRITON_INTERPRET=1: \"'int' object has no attribute 'to'\")",
    CONSTEXPR_IS: "`is` / `is not` compare the values of constexprs, as the compiler does (`dtype is tl.float32` in a "
                  "device function given a dtype, which the compiler and the constexpr-args shim wrap in "
                  "tl.constexpr)",
}
