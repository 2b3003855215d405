"""mkdocs hook: the options reference is generated from `tdiff/options.py`'s OPTIONS at build time, so it
cannot drift from what pytest and the `tdiff` script accept. A page holding the line `<!-- tdiff:options -->`
gets the table in its place."""

from __future__ import annotations

import sys
from pathlib import Path

MARKER = "<!-- tdiff:options -->"
ROOT = Path(__file__).resolve().parents[2]


def _cell(text: str) -> str:
    return text.replace("|", r"\|").replace("\n", " ")


def _takes(o) -> str:
    if o.words:
        return "`" + r"\|".join(o.words) + "`"
    if o.type is int:
        what = "N"
    elif o.type is float:
        what = "S" if o.unit == "seconds" else "X"
    else:
        return "text"
    bounds = []
    if o.minimum is not None:
        bounds.append(f"{o.minimum:g} or more")
    if o.positive:
        bounds.append("positive")
    if o.zero:
        bounds.append(f"0: {o.zero}")
    if o.unit:
        bounds.append(o.unit)
    return what + (f" ({'; '.join(bounds)})" if bounds else "")


def options_markdown() -> str:
    """The table of every option of OPTIONS: flag, ini key, what it takes, default, help."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tdiff.options import OPTIONS, ini_key

    rows = ["| option | ini key | takes | default | what |", "|---|---|---|---|---|"]
    for o in OPTIONS:
        flag = f"`{o.flag}`" + "".join(f"<br>(old name: `--tdiff-{a}`, deprecated)" for a in o.aliases)
        rows.append(f"| {flag} | `{ini_key(o.name)}` | {_takes(o)} | {_cell(o.default)} | {_cell(o.help)} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs' hook signature)
    return markdown.replace(MARKER, options_markdown()) if MARKER in markdown else markdown
