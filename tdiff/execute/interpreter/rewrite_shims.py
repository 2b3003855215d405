"""The shims tdiff's rewrite of kernel source applies (`scope`; a reproducer's `stock`): dtypes passed to device
functions as constexprs, `and`/`or` on tensors, `is` on constexprs, int methods on tensors, builtins reached
through aliases. Standalone: triton, `shim_names` and `shim_switches` (embedded by reproducers)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import triton.language as tl

from .shim_names import BOOL_OPS, BUILTIN_ALIASES, CONSTEXPR_ARGS, CONSTEXPR_IS, INT_METHODS
from .shim_switches import ENABLED, count_use

# ------------------------------------------------------------------ constexpr-args, tensor-and-or

def constexpr_args(args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """A device function's arguments as the compiler passes them: a dtype wrapped in tl.constexpr."""
    # (compared by type: tl.constexpr(dtype) == dtype is true)
    if not ENABLED[CONSTEXPR_ARGS] or not any(isinstance(a, tl.dtype) for a in (*args, *kwargs.values())):
        return args, kwargs
    count_use(CONSTEXPR_ARGS)
    return (tuple(tl.constexpr(a) if isinstance(a, tl.dtype) else a for a in args),
            {k: tl.constexpr(v) if isinstance(v, tl.dtype) else v for k, v in kwargs.items()})


def _helper(module: str, name: str) -> ast.Attribute:
    """`__import__(module, fromlist=["_"]).<name>`: a function of `module`, reached from rewritten kernel code."""
    imported = ast.Call(func=ast.Name("__import__", ast.Load()), args=[ast.Constant(module)],
                        keywords=[ast.keyword("fromlist", ast.List([ast.Constant("_")], ast.Load()))])
    return ast.Attribute(value=imported, attr=name, ctx=ast.Load())


class BoolOps(ast.NodeTransformer):
    """`a and b` / `a or b` -> `<module>.bool_op("and", a, lambda: b)`: on tensors the compiler makes them
    elementwise logical operations; on Python values they keep Python's short-circuit semantics.
    `module`: the name of a module that has `bool_op`, imported by the rewritten code."""

    def __init__(self, module: str) -> None:
        self.module = module

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        self.generic_visit(node)
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = node.values[0]
        for value in node.values[1:]:
            helper = _helper(self.module, "bool_op")
            thunk = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                  defaults=[]), body=value)
            result = ast.Call(func=helper, args=[ast.Constant(op), result, thunk], keywords=[])
        return result


def bool_op(op: str, a: Any, b: Callable[[], Any]) -> Any:
    """`a and b()` / `a or b()` as the compiler evaluates it (see `BoolOps`)."""
    if not isinstance(a, tl.core.tensor):
        return (a and b()) if op == "and" else (a or b())
    other = b()
    count_use(BOOL_OPS)
    if not isinstance(other, tl.core.tensor):
        other = tl.full((), bool(other), tl.int1)
    return a.logical_and(other) if op == "and" else a.logical_or(other)


class IsOps(ast.NodeTransformer):
    """`a is b` / `a is not b` -> `<module>.is_op(a, b, negate)`: constexprs compared by their values, as the
    compiler compares them (`code_generator.visit_Compare`)."""

    def __init__(self, module: str) -> None:
        self.module = module

    def visit_Compare(self, node: ast.Compare) -> Any:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            return node
        negate = ast.Constant(isinstance(node.ops[0], ast.IsNot))
        return ast.copy_location(ast.Call(func=_helper(self.module, "is_op"),
                                          args=[node.left, node.comparators[0], negate], keywords=[]), node)


def is_op(a: Any, b: Any, negate: bool) -> bool:
    """`a is b` (or `is not`) on the values of constexprs."""
    if ENABLED[CONSTEXPR_IS] and (isinstance(a, tl.constexpr) or isinstance(b, tl.constexpr)):
        plain = (a is b) != negate
        a, b = getattr(a, "value", a) if isinstance(a, tl.constexpr) else a, \
            getattr(b, "value", b) if isinstance(b, tl.constexpr) else b
        result = (a is b) != negate
        if result != plain:
            count_use(CONSTEXPR_IS)
        return result
    return (a is b) != negate


#: tensor methods a kernel calls on a loop index, which is a Python int in the interpreter and a tensor in the compiler
INT_TENSOR_METHODS = frozenset({"to"})


class IntMethods(ast.NodeTransformer):
    """`x.to(...)` -> `<module>.int_method(x, "to")(...)`: a Python int (a loop index) made the integer tensor the
    compiler's loop index is."""

    def __init__(self, module: str) -> None:
        self.module = module

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in INT_TENSOR_METHODS and not (
                isinstance(f.value, ast.Name) and f.value.id in ("tl", "triton", "core", "language")):
            node.func = ast.copy_location(ast.Call(func=_helper(self.module, "int_method"),
                                                   args=[f.value, ast.Constant(f.attr)], keywords=[]), f)
        return node


def int_method(x: Any, name: str) -> Any:
    """`x.<name>`, with a Python int `x` first made a scalar tensor (int32, else int64 where it does not fit, as a
    kernel's integer argument is)."""
    if type(x) is int and ENABLED[INT_METHODS]:
        from triton.runtime.interpreter import _implicit_cvt

        count_use(INT_METHODS)
        x = _implicit_cvt(x)
    return getattr(x, name)


# ------------------------------------------------------------------ builtin-aliases

def builtin_alias(owner: object, name: str) -> Callable:
    """A module-level alias of the builtin `owner.<name>`: calls what `owner.<name>` is when called (the
    interpreter's patched version in its scope), counted."""

    def call(*args: Any, **kwargs: Any) -> Any:
        count_use(BUILTIN_ALIASES)
        return getattr(owner, name)(*args, **kwargs)

    call.__tdiff_alias_of__ = (owner, name)  # type: ignore[attr-defined]  # (what `bind_aliases` looks for)
    return call


def alias_targets(patches: list[tuple[object, str, Any, Any]]) -> dict[int, tuple[Any, object, str]]:
    """From the interpreter's language patches `(object, attribute, patched, original)`: id(original builtin) ->
    (original, object, attribute), for the builtins a module-level name may be bound to."""
    out: dict[int, tuple[Any, object, str]] = {}
    for obj, name, _new, old in patches:
        if isinstance(obj, type) or not callable(old) or not tl.core.is_builtin(old):
            continue
        out.setdefault(id(old), (old, obj, name))
    return out


def bind_aliases(g: dict[str, Any], targets: dict[int, tuple[Any, object, str]],
                 put: Callable[[dict[str, Any], str, Any], None]) -> None:
    """Rebind the names of a module's globals `g` that hold an original builtin of `targets` to its alias (with
    `put(globals, name, value)`, which records the change to undo it)."""
    if not ENABLED[BUILTIN_ALIASES]:
        return
    for key, value in list(g.items()):
        hit = targets.get(id(value))
        if hit is not None and hit[0] is value:
            put(g, key, builtin_alias(hit[1], hit[2]))
