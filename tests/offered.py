"""What each notebook's parameters cell offers, read from its comments: `NAME: type = default  # ... a | b | c ...`
offers a, b and c (a value's note in brackets after it, `published (NVIDIA's) | draft`), and the MODES line offers
each mode it lists and "all". The default is offered too. A comment that opens with the default and a note in
brackets and lists no other value, `none (why): ...`, offers the default alone."""

from __future__ import annotations

import ast
import re

import nbformat

from helpers.assets import notebook_path

# One value: a word, a number or a ratio (16:9), then an optional note in brackets.
_VALUE = r"[\w.-]+(?::\w+)?(?:\s*\([^)]*\))?"
_CHOICES = re.compile(rf"({_VALUE}(?:\s*\|\s*{_VALUE})+)")
_MODES = re.compile(r"any of ([\w,]+), or \"(\w+)\"")


def parameters_cell(name: str) -> str:
    cells = nbformat.read(notebook_path(name), as_version=4).cells
    return next(c.source for c in cells if "parameters" in c.metadata.get("tags", []))


def offered(name: str) -> dict[str, list[object]]:
    """{parameter: the values its comment offers, the default first}, for each parameter that enumerates them."""
    found: dict[str, list[object]] = {}
    for line in parameters_cell(name).splitlines():
        declaration, _, comment = line.partition("  # ")
        target = ast.parse(declaration).body[0]
        assert isinstance(target, ast.AnnAssign), line
        parameter, default = target.target.id, ast.literal_eval(target.value)
        kind = type(default)
        values: list[object] = []
        if modes := _MODES.search(comment):
            values = [*modes.group(1).split(","), modes.group(2)]
        elif choices := _CHOICES.search(comment):
            values = [kind(re.sub(r"\s*\(.*", "", v).strip()) for v in choices.group(1).split("|")]
        elif comment.startswith(f"{default} ("):
            values = [default]
        if values:
            found[parameter] = [default, *(v for v in values if v != default)]
    return found
