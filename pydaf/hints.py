"""Hints that end some error messages: what exists, the closest names first ("did you mean"). They are computed only
when an error is raised, and come after Julia's text, which stays unchanged above them.

Example:
    >>> print(existing_names_hint("agee", ["sex", "age"], "vectors for the axis donor"))
    (its vectors for the axis donor: age, sex)
    did you mean: age?
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["MAX_LISTED_NAMES", "close_names", "closest_first", "existing_names_hint", "listed_names"]

#: At most this many names are listed in a hint (then ``(and N more)``).
MAX_LISTED_NAMES = 30


def _similarity(name: str, candidate: str) -> float:
    return difflib.SequenceMatcher(None, name.lower(), candidate.lower()).ratio()


def closest_first(name: str, names: Iterable[str]) -> list[str]:
    """``names`` sorted by their similarity to ``name`` (ignoring case), the closest first; ties in name order.

    Example:
        >>> closest_first("Lgo", ["Abs", "Clamp", "Log", "Round"])[:2]
        ['Log', 'Clamp']
    """
    return sorted(names, key=lambda candidate: (-_similarity(name, candidate), candidate))


def close_names(name: str, names: Iterable[str], *, limit: int = 3) -> list[str]:
    """The names (at most ``limit``) close enough to ``name`` to be what was meant: the same ignoring case, or
    similar (difflib's ratio of at least 0.65, ignoring case: ``Lgo`` is close to ``Log``, ``color`` not to
    ``donor``); the closest first.

    Example:
        >>> close_names("agee", ["age", "sex", "page"]), close_names("umis", ["UMIs"]), close_names("color", ["donor"])
        (['age', 'page'], ['UMIs'], [])
    """
    close = [candidate for candidate in closest_first(name, names)
             if candidate.lower() == name.lower() or _similarity(name, candidate) >= 0.65]
    return close[:limit]


def listed_names(names: Iterable[str]) -> str:
    """The names, comma separated (``none`` if there are none), at most :data:`MAX_LISTED_NAMES` of them.

    Example:
        >>> listed_names(["b", "a"]), listed_names([]), listed_names(str(index) for index in range(32))[-24:]
        ('b, a', 'none', '28, 29, ... (and 2 more)')
    """
    names = list(names)
    if not names:
        return "none"
    text = ", ".join(names[:MAX_LISTED_NAMES])
    if len(names) > MAX_LISTED_NAMES:
        text += f", ... (and {len(names) - MAX_LISTED_NAMES} more)"
    return text


def existing_names_hint(name: str, names: Iterable[str], what: str) -> str:
    """The lines that follow a "missing ..." message: the existing ``what`` (sorted), then the close ones.

    Example:
        >>> print(existing_names_hint("organizm", ["reference", "organism"], "scalars"))
        (its scalars: organism, reference)
        did you mean: organism?
        >>> print(existing_names_hint("x", [], "axes"))
        (its axes: none)
    """
    names = sorted(names)
    text = f"(its {what}: {listed_names(names)})"
    close = close_names(name, names)
    if close:
        text += f"\ndid you mean: {' or '.join(close)}?"
    return text
