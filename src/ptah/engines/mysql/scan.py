"""One scan of the server's own SQL text (``SHOW CREATE TABLE`` lines and clauses): each
character outside quotes, with its parenthesis depth.

The checks that read a clause the server printed (a column's CHECK, a partitioning's
bounds) need the same two things: skip what is quoted (``'...'``, ``"..."`` with
backslash escapes, backquoted names without), and know how deep in parentheses a
character stands. Kept here once, so the readers cannot disagree on a quote.
"""

from __future__ import annotations

from collections.abc import Iterator


def unquoted(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, depth) of each character of ``text`` from ``start`` outside
    quotes; ``depth`` counts the parentheses open before it (a ``(`` is yielded at the
    depth outside it, its ``)`` at the depth inside)."""
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch in "'`\"":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" and ch != "`" else 1
            i = j + 1
            continue
        yield i, ch, depth
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        i += 1
