"""Known gaps: the only errors that may set a case aside instead of failing it.

- Interpreter limitations: matched by the exception's type, its message, and where it was raised
  (inside Triton's interpreter), and only for the interpreter backend: the same exception from the
  compiled backend or the reference is an error.
- Lane problems of a compiled stage lane (`compiled[from=ttgir]`, `compiled[ir=file]`): the lane could
  not give an opinion on this Triton (a round trip that is not exact, an IR file of another
  specialization); named by `LANE_PROBLEMS`, raised by `tdiff.execute.stages`.

Anything else fails the case.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Limitation:
    """One known interpreter gap: a name for summaries, what it is, and how to recognise it."""

    name: str
    description: str
    types: tuple[type[BaseException], ...]
    pattern: str  # regex searched in the exception's message
    in_interpreter: bool = True  # must be raised from triton/runtime/interpreter.py or triton/language
    explain: Callable[[BaseException], str] | None = None  # what this occurrence is, for the error's message

    def matches(self, exc: BaseException) -> bool:
        if not isinstance(exc, self.types) or not re.search(self.pattern, str(exc)):
            return False
        return not self.in_interpreter or _raised_in_triton(exc)


def _builtin_called(exc: BaseException) -> str:
    """The builtin a `_semantic` / `_builder` error came from: the function Triton's `@builtin` wrapper held."""
    e: BaseException | None = exc
    while e is not None:
        tb, name = e.__traceback__, ""
        while tb is not None:
            frame = tb.tb_frame
            fn = frame.f_locals.get("fn") if frame.f_code.co_name == "wrapper" else None
            if fn is not None and frame.f_code.co_filename.endswith(os.path.join("language", "core.py")):
                name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', fn)}"
            tb = tb.tb_next
        if name:
            return f"the builtin `{name}`, called without Triton's interpreter semantic"
        e = e.__cause__ or e.__context__
    return ""


KNOWN: tuple[Limitation, ...] = (
    Limitation("bf16-constant", "bf16 arithmetic with a Python float constant (no InterpreterBuilder.get_bf16)",
               (AttributeError,), r"InterpreterBuilder.*get_bf16"),
    Limitation("extern-elementwise", "extern / libdevice functions (extern_elementwise)",
               (NotImplementedError,), r"extern_elementwise not supported in interpreter"),
    Limitation("inline-asm", "inline PTX assembly (inline_asm_elementwise)",
               (NotImplementedError,), r"inline_asm not supported in interpreter"),
    # (not Triton 3.9's "Block pointers have been removed in favor of the tensor descriptor API": the compiler
    # rejects them too, an error wherever the kernel runs)
    Limitation("tensor-descriptor", "tensor descriptors / TMA the interpreter does not model",
               (NotImplementedError, AttributeError), r"(?i)^(?!.*have been removed).*descriptor"),
    Limitation("libdevice", "a libdevice function tdiff's interpreter has no numpy version of",
               (NotImplementedError,), r"libdevice function \S+ has no interpreter shim", in_interpreter=False),
    Limitation("bf16-atomic", "a bf16 atomic operation tdiff's interpreter does not emulate",
               (NotImplementedError,), r"bf16 atomic \S+ is not supported", in_interpreter=False),
    Limitation("gluon", "a Gluon kernel (`@triton.experimental.gluon.jit`), which Triton's interpreter does not run",
               (ValueError,), r"@triton\.gluon\.jit"),
    Limitation("unpatched-builtin", "a Triton builtin that Triton's interpreter leaves unpatched, such as those that "
               "read the compile options (`tl.extra.cuda.num_warps()`, `num_threads()`)",
               (ValueError,), r"`_(semantic|builder)` argument must be provided outside of JIT functions",
               explain=_builtin_called),
    Limitation("argmax-all-nan", "an argmax / argmin (`tl.argmax`, `tl.max(..., return_indices=True)`) over a slice "
               "that is all NaN: Triton's interpreter calls numpy's nanargmax, which raises",
               (ValueError,), r"All-NaN slice encountered", in_interpreter=False),
    Limitation("fp16-atomic-overflow", "an fp16 atomic whose result overflows (Triton's interpreter raises "
               "OverflowError where the GPU stores inf; FINDINGS.md triton 10)",
               (OverflowError,), r"overflow to signed inf"),
)


def _raised_in_triton(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    last = os.path.normpath(frames[-1].filename)
    return os.sep + "triton" + os.sep in last and (
        last.endswith(os.path.join("runtime", "interpreter.py")) or (os.sep + "language" + os.sep) in last)


def match(exc: BaseException) -> Limitation | None:
    """The known limitation an interpreter exception (or one it was raised from) shows, if any."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for lim in KNOWN:
            if lim.matches(e):
                return lim
        e = e.__cause__ or e.__context__
    return None


#: problems of a compiled stage lane (ErrorInfo kind "lane", the name in ErrorInfo.limitation): the pair is not judged
ROUNDTRIP = "stage-roundtrip"  # a stage's round trip changed the results
STAGE_COMPILE = "stage-compile"  # a stage's own text did not compile back
IR_COMPILE = "ir-compile"  # a user's IR file did not compile
IR_SPECIALIZATION = "ir-specialization"  # no launch of the case is the IR file's specialization
LANE_PROBLEMS = {
    ROUNDTRIP: "recompiling from the stage changed the results (the round trip is not exact on this Triton)",
    STAGE_COMPILE: "the kernel's own stage text did not compile back",
    IR_COMPILE: "the IR file did not compile",
    IR_SPECIALIZATION: "no launch of the case is the IR file's specialization",
}


def describe(name: str) -> str:
    """What a limitation or lane problem means, for summaries."""
    if name in LANE_PROBLEMS:
        return "stage lane: " + LANE_PROBLEMS[name]
    return "interpreter limitation: " + next((lim.description for lim in KNOWN if lim.name == name), name)
