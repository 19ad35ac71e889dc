"""Groups of axis entries (Julia's ``Groups``), typically computed to create a new axis: ``compact_groups`` renumbers
group labels, ``collect_group_members`` lists the entries of each group, ``group_names`` names the groups.

pydaf's conventions (as :meth:`~pydaf.DafReader.axis_indices`'): a group label ``-1`` means "no group" and groups are
``0..N-1`` (Julia: ``0`` and ``1..N``); entry positions are 0-based. ``group_names`` still names the k-th group
``<prefix><k+1>.<hash>``, exactly Julia's strings, so names agree across languages.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import DafTypeError, DafValueError

__all__ = ["collect_group_members", "compact_groups", "group_names"]


def group_names(names_of_entries: Sequence[str] | np.ndarray, entries_of_groups: Iterable[Sequence[int] | np.ndarray],
                *, prefix: str) -> list[str]:
    """A unique name for each group, Julia's ``group_names``: ``<prefix><k+1>.<XX>`` for the k-th group (0-based),
    where ``XX`` is a two-digit hash of the names of the group's entries (the sum of the bytes of the SHA-256 of
    their concatenated UTF-8 names, modulo 100). ``entries_of_groups`` holds, for each group, the (sorted) 0-based
    positions of its entries in ``names_of_entries``.

    A name like ``M123.89`` is easy to handle by hand, and recomputed groups whose entries changed are unlikely (1%)
    to get the same name as a different old group with leftover metadata.

    Example:
        >>> group_names(["A", "B", "C", "D", "E"], [[1, 3], [2, 4]], prefix="G")
        ['G1.61', 'G2.95']
    """
    if not isinstance(prefix, str):
        raise DafTypeError(f"invalid group name prefix: {prefix!r} (expected a string)")
    names = _names_array(names_of_entries)
    if isinstance(entries_of_groups, str | bytes) or (
            isinstance(entries_of_groups, np.ndarray) and entries_of_groups.ndim == 1
            and entries_of_groups.dtype != object):  # (a flat array of positions: one group not wrapped in a list)
        raise DafTypeError("invalid entries_of_groups: expected a list of the entry positions of each group")
    result = []
    for group_index, entries_of_group in enumerate(entries_of_groups):
        positions = _positions(entries_of_group, len(names), f"group: {group_index}")
        digest = hashlib.sha256("".join(names[positions].tolist()).encode("utf-8")).digest()
        result.append(f"{prefix}{group_index + 1}.{sum(digest) % 100:02d}")
    return result


def compact_groups(group_indices: np.ndarray) -> int:
    """Renumber the group labels of ``group_indices`` in place so they are ``0..N-1`` (in order of first appearance,
    as Julia's ``compact_groups!``), keeping ``-1`` ("no group"); return ``N``. The array must be a writable numpy
    array of integers, each ``-1`` or a non-negative label.

    Example:
        >>> group_indices = np.array([-1, 7, 2, 7, 2])
        >>> compact_groups(group_indices), group_indices.tolist()
        (2, [-1, 0, 1, 0, 1])
    """
    if not isinstance(group_indices, np.ndarray):
        raise DafTypeError(f"invalid group indices given to compact_groups: a {type(group_indices).__name__} "
                           "(expected a numpy array, which it renumbers in place)")
    labels = _group_labels(group_indices, "compact_groups")
    if not group_indices.flags.writeable:
        raise DafValueError("can't compact_groups of a read-only array (it renumbers in place): pass a copy "
                            "(numpy.array(group_indices))")
    grouped = labels >= 0
    if not grouped.any():
        return 0
    unique_labels, first_positions, inverse = np.unique(labels[grouped], return_index=True, return_inverse=True)
    # The rank of each label's first appearance is its compact label.
    compact_of_unique = np.empty(len(unique_labels), dtype=np.int64)
    compact_of_unique[np.argsort(first_positions, kind="stable")] = np.arange(len(unique_labels))
    group_indices[grouped] = compact_of_unique[inverse.reshape(-1)]
    return len(unique_labels)


def collect_group_members(group_indices: np.ndarray | Sequence[int]) -> list[np.ndarray]:
    """The 0-based positions of the entries of each group (sorted), for compact group labels ``0..N-1`` (``-1``: no
    group, ignored), as Julia's ``collect_group_members``. A label that no entry has gets an empty array (as in
    Julia, the result has one array per label up to the largest).

    Example:
        >>> [members.tolist() for members in collect_group_members(np.array([-1, 0, 1, 0, 1]))]
        [[1, 3], [2, 4]]
    """
    labels = _group_labels(group_indices, "collect_group_members")
    grouped = np.flatnonzero(labels >= 0)
    if len(grouped) == 0:
        return []
    grouped_labels = labels[grouped].astype(np.int64, copy=False)
    counts = np.bincount(grouped_labels)
    members = grouped[np.argsort(grouped_labels, kind="stable")]  # (stable: positions stay sorted in each group)
    return list(np.split(members.astype(np.int64, copy=False), np.cumsum(counts)[:-1]))


def _names_array(names_of_entries: Sequence[str] | np.ndarray) -> np.ndarray:
    if isinstance(names_of_entries, str | bytes):
        raise DafTypeError("invalid names_of_entries: a single string (expected a list of names)")
    names = np.asarray(names_of_entries, dtype=object) if not isinstance(names_of_entries, np.ndarray) \
        else names_of_entries
    if names.ndim != 1:
        raise DafTypeError(f"invalid names_of_entries: a {names.ndim}-dimensional array (expected a vector of names)")
    if names.dtype.kind in "UT":
        names = names.astype(object)
    if names.dtype != object or not all(isinstance(name, str) for name in names):
        raise DafTypeError("invalid names_of_entries: expected strings (the names of the axis entries)")
    return names


def _positions(entries: Sequence[int] | np.ndarray, n_entries: int, what: str) -> np.ndarray:
    if isinstance(entries, str | bytes):
        raise DafTypeError(f"invalid entry positions of the {what}: {entries!r} (expected integers)")
    positions = np.asarray(entries)
    if positions.size == 0:
        return np.empty(0, dtype=np.int64)
    if positions.ndim != 1 or positions.dtype.kind not in "iu":
        raise DafTypeError(f"invalid entry positions of the {what}: expected a list of integers, got "
                           f"{positions.dtype} values" + (f" in {positions.ndim} dimensions" if positions.ndim != 1
                                                          else ""))
    out_of_range = (positions < 0) | (positions >= n_entries)
    if out_of_range.any():
        bad = positions[np.argmax(out_of_range)]
        raise DafValueError(f"invalid entry position: {bad}\nof the {what}\n(there are {n_entries} entries: "
                            f"positions are 0..{n_entries - 1})")
    return positions


def _group_labels(group_indices: np.ndarray | Sequence[int], function: str) -> np.ndarray:
    labels = group_indices if isinstance(group_indices, np.ndarray) else np.asarray(group_indices)
    if labels.ndim != 1:
        raise DafTypeError(f"invalid group indices given to {function}: a {labels.ndim}-dimensional array "
                           "(expected a vector with one group label per entry)")
    if labels.size and labels.dtype.kind not in "iu":
        raise DafTypeError(f"invalid group indices given to {function}: dtype {labels.dtype} (expected integers: "
                           "-1 for no group, else the group label)")
    if labels.size and labels.dtype.kind == "i":
        below = labels < -1
        if below.any():
            position = int(np.argmax(below))
            raise DafValueError(f"invalid group index: {labels[position]}\nat the position: {position}\n"
                                f"given to {function} (-1 is no group; groups are 0 and up)")
    return labels
