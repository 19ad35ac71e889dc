"""The one grammar of stored data set paths: ``container`` or ``container#/group`` (Julia's ``parse_*_path`` rules).

Every stored format names its containers by suffix: a *singular* container (``x.daf.zip``) holds one data set at its
root, a *plural* one (``x.dafs.zip``) holds data sets in groups, addressed as ``x.dafs.zip#/group/path``. Each format
calls :func:`split_container_path` with its suffixes; a bad path is a :class:`~pydaf.DafPathError` naming the format.
"""

from __future__ import annotations

import os

from ..core.names import is_valid_name
from ..errors import DafPathError


def split_container_path(path: str | os.PathLike, *, singular: tuple[str, ...], plural: str, format: str,
                         directory: str | None = None, strict: bool = True) -> tuple[str, str | None]:
    """Split a path into ``(container, group)``: the file (or directory) that holds the data set, and the group of
    a plural container that the data set occupies (``None`` for the container's root).

    - ``<stem><plural>#/<group>``: the group (``/``-separated parts, each a valid Daf name);
    - ``<stem><suffix>`` for a suffix in ``singular`` (or ``<stem><directory>/``, a directory's trailing ``/``
      dropped): the root;
    - anything else: refused if ``strict``; otherwise the whole path is the container (Julia's H5df, which splits only
      on ``.h5dfs#/`` and opens any other path as a file).

    Example:
        >>> split_container_path("all.dafs.zip#/cells/raw", singular=(".daf.zip",), plural=".dafs.zip",
        ...                      format="ZipDaf")
        ('all.dafs.zip', 'cells/raw')
        >>> split_container_path("all.dafs.zip", singular=(".daf.zip",), plural=".dafs.zip", format="ZipDaf")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafPathError: missing '#/<group>' in plural ZipDaf path: all.dafs.zip
    """
    text = os.fspath(path)
    marker = plural + "#/"
    if marker in text:
        container, group = text.split(marker, 1)
        if not group:
            raise DafPathError(f"empty group name after '#/' in {format} path: {text}")
        if any(part in (".", "..") for part in group.split("/")):  # (HDF5 would make groups named so)
            raise DafPathError(f"invalid group name: {group!r}\nin {format} path: {text}\n(a part . or .. names no "
                               "group: write the group's path from the file's root)")
        if strict and not all(_is_group_part(part) for part in group.split("/")):
            raise DafPathError(f"invalid group name: {group!r}\nin {format} path: {text}\n(each part must be a valid "
                               "Daf name)")
        return container + plural, group
    if not strict:
        return text, None
    roots = (*singular, directory) if directory is not None else singular
    if any(suffix + "#" in text for suffix in roots):
        raise DafPathError(f"can't address a sub-daf in a singular {format} path; use {plural}#/<group>: {text}")
    if text.endswith(singular):
        return text, None
    if directory is not None and text.rstrip("/").endswith(directory):
        return text.rstrip("/"), None
    if text.endswith(plural):
        raise DafPathError(f"missing '#/<group>' in plural {format} path: {text}")
    expected = ", ".join(f"<stem>{suffix}" for suffix in (*sorted(roots, key=len), f"{plural}#/<group>"))
    raise DafPathError(f"can't parse as {format} path: {text}\nexpected one of: {expected}")


def split_complete_path(path: str) -> tuple[str, str]:
    """``(container, group)`` of a complete path (:meth:`~pydaf.DafReader.complete_path`, checked when made): the
    container, and ``#/group`` (``""`` for a container's root), whatever the format.

    Example:
        >>> split_complete_path("/data/all.dafs.zip#/cells"), split_complete_path("/data/cells.daf")
        (('/data/all.dafs.zip', '#/cells'), ('/data/cells.daf', ''))
    """
    container, separator, group = path.partition("#")
    return container, separator + group


def storage_path(path: str | os.PathLike) -> str:
    """The file or directory that holds the data set at ``path``, whatever its format: the part before ``#/`` (a
    trailing ``/`` dropped), to check before any format opens it.

    Example:
        >>> storage_path("/data/all.h5dfs#/cells"), storage_path("/data/cells.daf/")
        ('/data/all.h5dfs', '/data/cells.daf')
    """
    container = split_complete_path(os.fspath(path))[0]
    return container.rstrip("/") or container


def _is_group_part(part: str) -> bool:
    """Whether a part of a group path is a valid Daf name that an archive's UTF-8 entry names can hold."""
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return is_valid_name(part)
