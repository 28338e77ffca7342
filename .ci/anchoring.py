"""Where a mutant's edit lands: a function of a module, and a run of Python tokens in it.

A mutant names the function (or class, or method, as a dotted qualified name) whose source
holds the code it changes, and the code as Python tokens. Matching tokens rather than text
means that a formatter (line breaks, spaces, blank lines, comments) leaves every mutant
applicable; naming the function means that the same tokens elsewhere in the module do not
count against uniqueness, and that moving the function to another module fails the
catalogue check loudly, naming the mutant. An edit must match exactly once in its function.
A fragment of a string literal (an error message's wording) is matched as text instead.
"""

from __future__ import annotations

import ast
import io
import tokenize
from typing import NamedTuple

MODULE_SCOPE = "<module>"
"""The scope of a mutant whose edit lies outside every function (a constant, say)."""

_LAYOUT = {
    tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT,
    tokenize.ENDMARKER,
}


class Token(NamedTuple):
    text: str
    start: int  # offsets into the source string
    end: int


def tokens(source: str) -> list[Token]:
    """The source's tokens, layout and comments left out; a fragment yields its tokens so far."""
    line_starts = [0]
    for line in source.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    found: list[Token] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in _LAYOUT:
                continue
            (start_row, start_col), (end_row, end_col) = token.start, token.end
            found.append(Token(token.string, line_starts[start_row - 1] + start_col,
                               line_starts[end_row - 1] + end_col))
    except (tokenize.TokenError, IndentationError):
        pass  # an edit's text may open a bracket it does not close, or start indented
    # A formatter's trailing comma before a closing bracket changes nothing.
    return [t for i, t in enumerate(found)
            if not (t.text == "," and i + 1 < len(found) and found[i + 1].text in ")]}")]


def _spans(tree: ast.AST, prefix: str = "") -> dict[str, ast.AST]:
    named: dict[str, ast.AST] = {}
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            named[name] = node
            named.update(_spans(node, f"{name}."))
    return named


def scope_span(source: str, scope: str) -> tuple[int, int]:
    """Offsets of `scope`'s source in `source` (decorators included); the module for MODULE_SCOPE.

    Raises:
        ValueError: no function or class of that qualified name is defined in the source.
    """
    if scope == MODULE_SCOPE:
        return 0, len(source)
    named = _spans(ast.parse(source))
    node = named.get(scope)
    if node is None:
        raise ValueError(f"defines no function or class {scope!r}")
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    assert node.end_lineno is not None and node.end_col_offset is not None
    lines = source.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: first - 1])
    end = sum(len(line) for line in lines[: node.end_lineno - 1]) + node.end_col_offset
    return start, end


def locate(source: str, scope: str, original: str) -> tuple[int, int]:
    """Offsets of the one run of `original`'s tokens inside `scope`.

    Raises:
        ValueError: the scope is not defined, `original` has no tokens, or its tokens occur
            other than exactly once in the scope.
    """
    low, high = scope_span(source, scope)
    wanted = [t.text for t in tokens(original)]
    if not original.strip():
        raise ValueError(f"an edit's text is blank: {original!r}")
    inside = [t for t in tokens(source) if low <= t.start and t.end <= high]
    texts = [t.text for t in inside]
    hits = [i for i in range(len(texts) - len(wanted) + 1)
            if wanted and texts[i : i + len(wanted)] == wanted]
    if not hits:
        # A fragment of one string literal (an error message's wording) is no token run:
        # it is matched as text, still exactly once in the scope.
        text_hits = source.count(original.strip(), low, high)
        if text_hits == 1:
            start = source.index(original.strip(), low, high)
            return start, start + len(original.strip())
        if text_hits > 1:
            raise ValueError(f"its original text occurs {text_hits} times in {scope}: {original!r}")
    if len(hits) != 1:
        where = "is gone from" if not hits else f"occurs {len(hits)} times in"
        raise ValueError(f"its original text {where} {scope}: {original!r}")
    first, last = inside[hits[0]], inside[hits[0] + len(wanted) - 1]
    return first.start, last.end


def apply_edit(source: str, scope: str, original: str, replacement: str) -> str:
    """`source` with the one run of `original`'s tokens in `scope` replaced by `replacement`.

    Whitespace that `original` carries before its first token or after its last is taken
    off `replacement` too when it carries the same, since the match spans tokens only.
    """
    start, end = locate(source, scope, original)
    lead = original[: len(original) - len(original.lstrip())]
    trail = original[len(original.rstrip()) :]
    if lead and replacement.startswith(lead):
        replacement = replacement[len(lead) :]
    if trail and replacement.endswith(trail):
        replacement = replacement[: len(replacement) - len(trail)]
    return source[:start] + replacement + source[end:]


def enclosing_scope(source: str, offset: int) -> str:
    """The innermost function or class holding `offset`, by qualified name, or MODULE_SCOPE."""
    best, best_size = MODULE_SCOPE, len(source) + 1
    for name in _spans(ast.parse(source)):
        low, high = scope_span(source, name)
        if low <= offset < high and high - low < best_size:
            best, best_size = name, high - low
    return best
