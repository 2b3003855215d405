"""`@tdiff.check`: the declaration of how a kernel is launched and what its inputs look like."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis.strategies import SearchStrategy

from .core import kernels
from .core.backend_spec import BackendSpec, parse_all
from .core.option_table import BY_NAME
from .core.tolerance import Tolerance
from .core.tolerance import validate as validate_tolerance
from .errors import DeclarationError

K = TypeVar("K")

CHECKS_ATTR = "__tdiff_checks__"

#: keyword arguments of `check` that are settings, not input strategies
SETTINGS = (
    "launch", "reference", "name", "inputs", "dims", "tolerance", "tolerances", "max_examples",
    "timeout", "check_pointers", "sample_programs", "backends", "configs", "marks", "max_compiles",
    "masked_loads",
    "unspecified",
)


@dataclass
class Check:
    """One `@tdiff.check` on one kernel.

    `module` and `file` are where the check was declared, which need not be where the kernel is
    defined (a check in a test module on a kernel from an installed library).
    """

    kernel: Any
    launch: Callable[..., Any]
    reference: Callable[..., Any] | None
    strategies: dict[str, Any]
    name: str
    module: str
    file: str | None
    inputs: Any = None  # a strategy drawing a dict of inputs
    dims: dict[str, Any] = field(default_factory=dict)
    tolerance: Any = None
    tolerances: dict[str, Any] = field(default_factory=dict)
    max_examples: int | None = None
    timeout: float | None = None
    check_pointers: bool = True
    sample_programs: int | None = None
    backends: tuple[BackendSpec, ...] | None = None  # parsed once, when declared
    configs: tuple[int, ...] | None = None
    marks: tuple[Any, ...] = ()
    max_compiles: int | None = None
    masked_loads: str = "undefined"
    unspecified: str = "fail"
    origin: int = 0  # identity of the declaring module's namespace (tells a re-import from a duplicate)

    @property
    def kernel_name(self) -> str:
        return kernels.kernel_name(self.kernel)

    @property
    def id(self) -> str:
        """Stable identity: `module::kernel[check]`."""
        return f"{self.module}::{self.kernel_name}[{self.name}]"

    @property
    def item_name(self) -> str:
        return f"{self.kernel_name}[{self.name}]"

    def ref(self) -> TargetRef:
        return TargetRef(self.module, self.file, self.kernel_name, self.name)

    def expects_failure(self) -> bool:
        """Whether the check carries an xfail mark whose condition holds (a finding's check): the known
        divergences its corpus entries record are then what it expects to fail with. A condition pytest
        evaluates from a string is taken to hold."""
        for m in self.marks:
            mark = getattr(m, "mark", m)
            if getattr(mark, "name", None) != "xfail":
                continue
            conditions = list(mark.args) + ([mark.kwargs["condition"]] if "condition" in mark.kwargs else [])
            if not conditions or any(c if isinstance(c, bool) else True for c in conditions):
                return True
        return False

    def input_names(self) -> list[str]:
        return list(self.strategies)

    def declared_tolerances(self) -> tuple[str, ...]:
        """The tolerances this check declares (`tolerance=`, `tolerances=`), as the run's summary shows them:
        `every output: exact`, `returned[1]: reduce`."""
        def shown(t: Any) -> str:
            if isinstance(t, Tolerance):
                return t.describe()
            return (t if t == "exact" else f"{t} (at the case's dtype)") if isinstance(t, str) else f"custom {t}"

        out = [f"every output: {shown(self.tolerance)}"] if self.tolerance is not None else []
        return (*out, *(f"{k}: {shown(v)}" for k, v in self.tolerances.items()))

    def __repr__(self) -> str:
        return f"<tdiff check {self.id}>"


#: every check declared in this process, by (declaring module, kernel name, check name)
_REGISTRY: dict[tuple[str, str, str], Check] = {}


def _registered(module: str, kernel: str, name: str) -> Check | None:
    found = _REGISTRY.get((module, kernel, name))
    if found is None and module == "__main__":  # a script, re-imported in a worker under another name
        found = _REGISTRY.get(("__tdiff_main__", kernel, name))
    return found


@dataclass(frozen=True)
class TargetRef:
    """Finds a check again in another process: the module that declared it (and its file), the
    kernel's name and the check's name."""

    module: str
    file: str | None
    kernel: str
    name: str = "tdiff"

    def resolve(self) -> Check:
        found = _registered(self.module, self.kernel, self.name)
        if found is None:
            _import(self.module, self.file)
            found = _registered(self.module, self.kernel, self.name)
        if found is None:
            raise LookupError(
                f"check {self.name!r} of kernel {self.kernel!r} was not declared when {self.module} was imported: "
                "worker processes import the module that declares a check, so declare checks at module level "
                "(or run with isolation='none' / --tdiff-isolation none)")
        return found


def declared_in(module: str) -> list[Check]:
    """The checks a module declared, in declaration order."""
    return [c for (m, _, _), c in _REGISTRY.items() if m == module]


def _import(module: str, file: str | None) -> Any:
    if module == "__main__":  # a script: load it the way multiprocessing does, without its main block
        module = "__tdiff_main__"
    mod = sys.modules.get(module)
    if mod is not None:
        return mod
    if module == "__tdiff_main__":
        if file is None:
            raise ImportError("the kernel was defined in __main__ without a file")
        return _load_file(module, file)
    try:
        mod = importlib.import_module(module)
        if file is None or os.path.samefile(getattr(mod, "__file__", "") or file, file):
            return mod
    except (ImportError, FileNotFoundError):
        if file is None:
            raise
    return _load_file(module, file)


def _load_file(module: str, file: str) -> Any:
    spec = importlib.util.spec_from_file_location(module, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module} from {file}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(module, None)  # a failed import leaves no half-made module (the next case says why too)
        raise
    return mod


def checks_of(obj: Any) -> list[Check]:
    """The checks declared on a kernel object (empty for anything that is not a kernel)."""
    if not kernels.is_kernel(obj):
        return []
    found = getattr(obj, CHECKS_ATTR, None)
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(c, Check) for c in found):
        raise DeclarationError(f"{CHECKS_ATTR} of {obj!r} is not a list of tdiff checks")
    return list(found)


def _declaring_module(depth: int) -> tuple[str, str | None, int]:
    """The module (its name, file and namespace identity) of the code `depth` frames up: where a
    check is declared."""
    frame = sys._getframe(depth + 1)
    g = frame.f_globals
    file = g.get("__file__")
    return g.get("__name__", "__main__"), (os.path.abspath(file) if file else None), id(g)


def _accepts(fn: Callable, names: list[str], skip_first: bool) -> tuple[list[str], list[str]]:
    """(names `fn` cannot take by keyword, required params of `fn` not in names)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if skip_first and params and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        params = params[1:]
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    keywordable = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = [] if var_kw else [n for n in names if n not in keywordable]
    missing = [p.name for p in params if p.default is p.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in names]
    return unknown, missing


def _is_strategy_like(value: Any) -> bool:
    return isinstance(value, SearchStrategy) or hasattr(value, "depends_on")


def check(
    *,
    launch: Callable[..., Any],
    reference: Callable[..., Any] | None = None,
    name: str | None = None,
    inputs: SearchStrategy | None = None,
    dims: Mapping[str, Any] | None = None,
    tolerance: Any = None,
    tolerances: Mapping[str, Any] | None = None,
    max_examples: int | None = None,
    timeout: float | None = None,
    check_pointers: bool = True,
    sample_programs: int | None = None,
    backends: tuple[str, ...] | list[str] | None = None,
    configs: tuple[int, ...] | list[int] | None = None,
    marks: tuple[Any, ...] | list[Any] = (),
    max_compiles: int | None = None,
    masked_loads: str = "undefined",
    unspecified: str = "fail",
    **strategies: Any,
) -> Callable[[K], K]:
    """Declare how to launch a kernel and what its inputs look like; returns the kernel unchanged.

    launch: `launch(kernel, **inputs)`, the user's own launch code; may return outputs.
    reference: optional `reference(**inputs)` computing the same with torch, in place or returned.
    inputs: a strategy drawing a dict of inputs, for inputs that depend on each other.
    dims: named dimensions (`{"M": tst.sizes(block=16)}`) that tensor shapes refer to by name.
    tolerance / tolerances: a `Tolerance` (or preset name) for all outputs / per output name.
    max_examples, timeout: per-check hypothesis examples and per-case timeout in seconds.
    check_pointers: stop and report interpreter accesses outside every allocation.
    sample_programs: in grids above the run's threshold, interpret the first, last and tail-owning
    programs plus this many random ones (None: the run's default; 0: interpret every program).
    backends: the pair of backends to compare, overriding the run's default.
    configs: indices of the autotune configs to test (default: all).
    marks: pytest marks for the check's test item (e.g. `pytest.mark.slow`).
    max_compiles: compiles the check may spend on new combinations of specialization classes it has
    compiled before (new classes are always compiled); past it such cases run without the compiled
    backend (None: the run's compile budget, 30 s; 0: no limit).
    masked_loads: what the interpreter puts in the masked-out lanes of a `tl.load` without `other=`,
    which Triton leaves undefined: "undefined" (default) fills them with NaN (integers: 0x5A bytes),
    so a kernel whose results depend on them fails; "zero" fills them with 0, as the NVIDIA backend
    happens to (the summary then says undefined reads were not checked).
    unspecified: a case whose divergence depends on results Triton leaves unspecified (integer
    division by zero, shifts by the width or more, NaN in min/max under propagate_nan=NONE, float to
    int out of range) "fail"s (default: the kernel relies on them), or is a "note" (not judged, named
    in the summary: for checks of the operations themselves).
    Every other keyword names an input: a hypothesis strategy, a tdiff strategy, a list of
    choices (e.g. constexpr values) or a constant.
    """

    module, file, origin = _declaring_module(1)

    def decorate(kernel: K) -> K:
        if not kernels.is_kernel(kernel):
            raise DeclarationError(
                f"@tdiff.check must decorate a @triton.jit kernel (outermost, above @triton.autotune / "
                f"@triton.heuristics); got {type(kernel).__name__}"
            )
        kname = kernels.kernel_name(kernel)
        where = f"@tdiff.check on kernel `{kname}` (declared in {module})"
        if not callable(launch):
            raise DeclarationError(f"{where}: launch must be a callable launch(kernel, **inputs)")
        if reference is not None and not callable(reference):
            raise DeclarationError(f"{where}: reference must be callable")
        strats: dict[str, Any] = {}
        for arg, value in strategies.items():
            if _is_strategy_like(value):
                strats[arg] = value
            elif isinstance(value, (list, tuple)) and value:
                strats[arg] = ("choices", tuple(value))
            elif isinstance(value, (bool, int, float, str)) or value is None:
                strats[arg] = ("const", value)
            else:
                raise DeclarationError(
                    f"{where}: input `{arg}`: expected a strategy, a list of choices or a constant, "
                    f"got {type(value).__name__}"
                )
        if inputs is not None and not isinstance(inputs, SearchStrategy):
            raise DeclarationError(f"{where}: inputs= must be a hypothesis strategy drawing a dict")
        known = set(strats) | set(dims or {})
        for arg, value in strats.items():
            for dep in getattr(value, "depends_on", lambda: ())():
                if dep not in known and inputs is None:
                    raise DeclarationError(
                        f"{where}: input `{arg}` refers to `{dep}` (like= or a named dimension), "
                        f"which is not an input of this check"
                    )
            validate = getattr(value, "validate", None)
            if validate is not None:
                try:
                    validate()
                except Exception as exc:
                    raise DeclarationError(f"{where}: input `{arg}`: {exc}") from None
        names = list(strats)
        if inputs is None:
            unknown, missing = _accepts(launch, names, skip_first=True)
            if unknown:
                raise DeclarationError(
                    f"{where}: launch does not accept input(s) {', '.join(map(repr, unknown))}; "
                    f"its signature is launch{inspect.signature(launch)}"
                )
            if missing:
                raise DeclarationError(
                    f"{where}: launch requires {', '.join(map(repr, missing))}, which no strategy draws"
                )
            if reference is not None:
                unknown, missing = _accepts(reference, names, skip_first=False)
                if unknown or missing:
                    raise DeclarationError(
                        f"{where}: reference must accept the inputs {names}; "
                        f"its signature is reference{inspect.signature(reference)}"
                    )
        for arg, given, option in (("max_examples", max_examples, "examples"), ("timeout", timeout, "timeout"),
                                   ("max_compiles", max_compiles, "max-compiles")):
            if given is None:
                continue
            try:  # (the run's option of the same meaning, checked by its entry in the options table)
                BY_NAME[option].validate(given, arg)
            except ValueError as exc:
                raise DeclarationError(f"{where}: {exc}") from None
        try:
            specs = parse_all(backends or ())
        except ValueError as exc:
            raise DeclarationError(f"{where}: backends: {exc}") from None
        if masked_loads not in ("undefined", "zero"):
            raise DeclarationError(f"{where}: masked_loads must be 'undefined' or 'zero', got {masked_loads!r}")
        if unspecified not in ("fail", "note"):
            raise DeclarationError(f"{where}: unspecified must be 'fail' or 'note', got {unspecified!r}")
        n_configs = len(kernels.configs(kernel))
        if configs is not None:
            bad = [c for c in configs if not 0 <= c < max(n_configs, 1)]
            if bad:
                raise DeclarationError(f"{where}: configs {bad} do not exist (the kernel has {n_configs})")
        for out in tolerances or {}:
            if out not in known and not out.startswith("returned") and inputs is None:
                raise DeclarationError(f"{where}: tolerances names `{out}`, which is not an input or 'returned'")
        declared = [("tolerance", tolerance), *((f"tolerances[{k!r}]", v) for k, v in (tolerances or {}).items())]
        for what, tol in declared:
            try:
                validate_tolerance(tol)
            except (TypeError, ValueError) as exc:
                raise DeclarationError(f"{where}: {what}: {exc}") from None
        existing = checks_of(kernel)
        mine = [c for c in existing if c.module == module]  # names are unique per declaring module
        cname = name or ("tdiff" if not mine else f"tdiff-{len(mine) + 1}")
        previous = next((c for c in mine if c.name == cname), None)
        if previous is not None and previous.origin == origin:
            raise DeclarationError(f"{where}: two checks named {cname!r}; give each a distinct name=")
        if previous is not None:  # the declaring module was imported again (a reload): the new check replaces it
            existing = [x for x in existing if x is not previous]
        c = Check(
            kernel=kernel, launch=launch, reference=reference, strategies=strats, name=cname, module=module,
            file=file, inputs=inputs, dims=dict(dims or {}),
            tolerance=tolerance, tolerances=dict(tolerances or {}), max_examples=max_examples,
            timeout=timeout, check_pointers=check_pointers, sample_programs=sample_programs,
            backends=specs or None, configs=tuple(configs) if configs else None,
            marks=tuple(marks), max_compiles=max_compiles, masked_loads=masked_loads, unspecified=unspecified,
            origin=origin,
        )
        try:
            setattr(kernel, CHECKS_ATTR, [*existing, c])
        except AttributeError as exc:  # pragma: no cover
            raise DeclarationError(f"{where}: cannot attach a check to {type(kernel).__name__}") from exc
        _REGISTRY[(module, kname, cname)] = c
        return kernel

    return decorate
