"""Deliberately faulty backends: the interpreter with its stores perturbed, under chosen labels.

They are importable in tdiff's workers as `tests.faulty:<Name>` backend specs, and let the CPU
tests exercise what only a GPU would otherwise show (a wrong compiled result, nondeterminism).
"""

from __future__ import annotations

import numpy as np
from triton.runtime.interpreter import TensorHandle

from tdiff.core.backend_spec import BackendSpec
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.execute.interpreter.session import Session


class Perturb(InterpreterBackend):
    """The interpreter, with every floating store shifted by `delta` (in the program `program`)."""

    label = "faulty"
    delta = 1.0
    relative = False
    program: int | None = None
    noisy = False
    above: float | None = None

    def __init__(self, spec: BackendSpec) -> None:
        super().__init__(BackendSpec("interpreter", order=spec.order, check_pointers=spec.check_pointers))
        self.spec = spec
        self.name = self.label
        self.role = BackendSpec(self.label).role  # it plays the part its label names

    def make_session(self, plan):
        s = _Session(self.options, plan)
        s.delta, s.relative, s.only, s.noisy, s.above = self.delta, self.relative, self.program, self.noisy, self.above
        return s


class _Session(Session):
    delta = 1.0
    relative = False
    only: int | None = None
    noisy = False
    above: float | None = None  # perturb only stores holding a value this large

    def transform_store(self, ptrs, value, mask):
        data = np.asarray(value.data)
        only = self.grid[0] - 1 if self.only == -1 else self.only
        if data.dtype.kind != "f":
            return value
        rows = np.ones(data.shape, bool)  # the lanes of the program perturbed (in a batch: its row)
        if only is not None:
            if self.batch is None:
                if self.program[0] != only:
                    return value
            else:
                hit = self.coords[:, 0] == only
                if not hit.any():
                    return value
                rows = np.broadcast_to(hit.reshape((-1,) + (1,) * (data.ndim - 1)), data.shape)
        if self.above is not None and not (np.abs(data[rows]) > self.above).any():
            return value
        delta = self.delta
        if self.noisy:
            delta *= float(np.random.default_rng().uniform(0.5, 1.5))
        bump = data * delta if self.relative else delta
        return TensorHandle(np.where(rows, data + bump, data).astype(data.dtype), value.dtype)


class FakeCompiledExact(Perturb):
    """Plays the compiled side, correctly."""

    label = "compiled"
    delta = 0.0


class FakeCompiledWrong(Perturb):
    label = "compiled"
    delta = 3.0


class FakeCompiledNoisy(Perturb):
    label = "compiled"
    delta = 1e-2
    relative = True
    noisy = True


class FakeCompiledSlightly(Perturb):
    """Off by a relative 2e-5: beyond the float32 arithmetic tolerance, still close to the truth."""

    label = "compiled"
    delta = 2e-5
    relative = True


class FakeCompiledUndecided(Perturb):
    """Off by a relative 4e-6: beyond tolerance from the interpreter, within it from a reference
    halfway between them."""

    label = "compiled"
    delta = 4e-6
    relative = True


class FakeCompiledOther(Perturb):
    label = "compiled"
    delta = -2.0


class FaultyInterpreter(Perturb):
    """Plays the interpreter side, wrongly."""

    label = "interpreter"
    delta = 3.0


class FakeCompiledTf32High(Perturb):
    """Plays the compiled side of a tf32 `tl.dot`: a relative 3e-3 high (within tf32's allowance)."""

    label = "compiled"
    delta = 3e-3
    relative = True


class FaultyInterpreterTf32Low(Perturb):
    """Plays the interpreter side, a relative 3e-3 low: beyond float32's tolerance, within tf32's."""

    label = "interpreter"
    delta = -3e-3
    relative = True


class FaultyFirstProgram(Perturb):
    """Perturbs only the stores of program 0."""

    label = "faulty"
    program = 0


class FakeCompiledTail(Perturb):
    """Plays the compiled side (every program), wrong only in the last program of the grid."""

    label = "compiled"
    program = -1


class FakeCompiling(Perturb):
    """Plays the compiled side, correctly, and "compiles" (sleeps `compile_seconds`) each launch
    specialization this worker has not run before, as Triton's JIT cache would."""

    label = "compiled"
    delta = 0.0
    cache: set = set()
    compile_seconds = 0.25
    reports_keys = True  # as the compiled backend does

    def run(self, target, case):
        import time

        from tdiff.execute.launch_keys import launch_keys

        new = set(launch_keys(target, case) or ()) - self.cache
        self.cache |= new
        time.sleep(self.compile_seconds * len(new))
        outcome = super().run(target, case)
        outcome.compiles = len(new)
        outcome.compile_seconds = self.compile_seconds * len(new)
        if self.reports_keys:
            outcome.launch_keys = launch_keys(target, case)
        return outcome


class FakeCompilingSilent(FakeCompiling):
    """`FakeCompiling` that does not report its launch keys, like a third-party compiling backend."""

    reports_keys = False


class FakeCompilingCheap(FakeCompiling):
    """`FakeCompiling` with quick compiles, for tests that run many."""

    compile_seconds = 0.01


class FakeCompilingWrongOnOne(FakeCompiling):
    """Compiles like `FakeCompiling`, and is wrong only in the specialization where an integer
    argument equals 1 (a one-element input)."""

    compile_seconds = 0.01

    def make_session(self, plan):
        s = super().make_session(plan)
        if any(a.numel == 1 for a in plan.case.tensors().values()):
            s.delta, s.relative = 1.0, False
        else:
            s.delta = 0.0
        return s


class FakeCompilingWrongOnHuge(FakeCompiling):
    """Compiles like `FakeCompiling`, and stores wrong results wherever a value exceeds 1e4."""

    delta = 1.0
    relative = True
    above = 1e4


class AlwaysRaises:
    """Plays the compiled side and raises NotImplementedError on every case: an error, never an
    interpreter limitation."""

    def __init__(self, spec: BackendSpec) -> None:
        self.spec = spec
        self.name = "compiled"
        self.role = BackendSpec("compiled").role

    def run(self, target, case):
        from tdiff.core.outcome import Outcome
        from tdiff.execute.backends.base import error_info

        out = Outcome(self.name, role=self.role)
        try:
            raise NotImplementedError("this backend cannot do anything")
        except NotImplementedError as exc:
            out.error = error_info(exc)
        return out


class CrashingCompiled:
    """Plays the compiled side and kills its worker process (a segfault) on every case."""

    def __init__(self, spec: BackendSpec) -> None:
        self.spec = spec
        self.name = "compiled"
        self.role = BackendSpec("compiled").role

    def run(self, target, case):
        import os
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)


class LimitedInterpreter(InterpreterBackend):
    """Plays the interpreter and hits a known interpreter limitation (inline assembly) every time."""

    def __init__(self, spec: BackendSpec) -> None:
        super().__init__(BackendSpec("interpreter"))
        self.spec = spec
        self.name = "interpreter"
        self.role = BackendSpec("interpreter").role

    def run(self, target, case):
        from tdiff.core.outcome import ErrorInfo, Outcome

        out = Outcome(self.name, role=self.role)
        out.error = ErrorInfo("limitation", "NotImplementedError: inline_asm not supported in interpreter mode",
                              limitation="inline-asm")
        return out


class FaultyOnHuge(Perturb):
    """Plays a backend of its own, wrong only where it stores a value past 1e30 (a corpus entry's case, say, where
    a search's first cases are not)."""

    label = "faulty"
    delta = 1.0
    relative = True
    above = 1e30


class FakeCompiledGpu(InterpreterBackend):
    """Plays the compiled side with the GPU's documented arithmetic (tf32 dot operands, fused multiply-adds, flushed
    subnormals: execute.interpreter.gpu_arith), as a correct kernel compiled for an NVIDIA GPU computes."""

    label = "compiled"
    force_tf32 = False  # a faulty compiler: tf32 even where the kernel asks input_precision="ieee"

    def __init__(self, spec: BackendSpec) -> None:
        super().__init__(BackendSpec("interpreter", gpu_arith=True, check_pointers=spec.check_pointers))
        self.spec = spec
        self.name = self.label
        self.role = BackendSpec(self.label).role

    def run(self, target, case):
        if not self.force_tf32:
            return super().run(target, case)
        from tdiff.execute.interpreter import gpu_arith

        own = gpu_arith._precision
        gpu_arith._precision = lambda p: "tf32" if own(p) == "ieee" else own(p)
        try:
            return super().run(target, case)
        finally:
            gpu_arith._precision = own


class FakeCompiledTf32Always(FakeCompiledGpu):
    """A faulty compiled side: its dots run in tf32 whatever precision the kernel asks for."""

    force_tf32 = True


class FakeCompiledGpuOther(FakeCompiledGpu):
    """The GPU's arithmetic with another rounding of its own (a summation order the interpreter does not take):
    random rounding seeded apart from the judge's modelled runs."""

    def __init__(self, spec: BackendSpec) -> None:
        super().__init__(spec)
        self.options.rounding = 101
