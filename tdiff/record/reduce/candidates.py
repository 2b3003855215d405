"""Candidate edits of one function's source, found on its AST and applied to its text (so what is kept
keeps its formatting and comments). Each pass lists its edits in the order to try them; an edit is
applied lazily and may give text that does not parse (the loop then skips it).

Passes, in order: comment lines dropped, constexpr specialisation (a constexpr parameter's uses replaced by
the case's value), compound statements replaced by a branch or by one iteration of their loop, statement
deletion (ddmin over each block: halves, quarters, ... single statements), a name bound once to another name
or a constant replaced by it, a name bound once and read once replaced by its value, the kernel's unused
parameters dropped, a `def` over several lines written on one, loops cut to one iteration, keyword arguments
dropped, expressions replaced by one of their operands or a condition by a constant.
"""


from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .expressions import expressions
from .names import MAX_LINE, aliases, signature, temporaries, unused_parameters
from .statements import cleanup, compounds, deletions, keywords, one_iteration, specialise
from .text import Edit, Text

__all__ = ["MAX_LINE", "PASSES", "Edit", "Text", "aliases", "cleanup", "compounds", "deletions", "edits",
           "expressions", "keywords", "one_iteration", "signature", "specialise", "temporaries",
           "unused_parameters"]


#: the passes, in the order the loop runs them (constexpr specialisation takes the case's values)
PASSES: list[tuple[str, Callable[..., list[Edit]]]] = [
    ("cleanup", cleanup),
    ("specialise", specialise),
    ("compound", compounds),  # (first: specialised constexprs leave `if True:` / `if False:`)
    ("delete", deletions),
    ("alias", aliases),
    ("temporary", temporaries),
    ("parameters", unused_parameters),  # (the kernel's own only: its launches are rewritten by `build`)
    ("signature", signature),
    ("loop", one_iteration),
    ("keyword", keywords),
    ("expression", expressions),
]


def edits(pass_name: str, src: str, constexprs: dict[str, Any]) -> list[Edit]:
    """The edits of one pass on `src` (none where it does not parse)."""
    try:
        t = Text(src)
    except SyntaxError:
        return []
    fn = dict(PASSES)[pass_name]
    return fn(t, constexprs) if pass_name == "specialise" else fn(t)
