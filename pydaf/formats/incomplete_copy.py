"""The "incomplete copy" marker: a copy of many properties into an existing data set (:func:`~pydaf.copy_all`) is
not one atomic change, so a process killed in its middle would leave a data set that opens with part of the copy.
Before its first change the copy writes a small hidden marker file next to the data set, and removes it after its
last change is committed; every open of a stored data set (:meth:`pydaf.formats.registry.PersistentDaf.open`) finding
a marker refuses with a :class:`~pydaf.errors.DafIncompleteError` that says what happened and how to recover.

The marker is a sibling of the data set's container (``.<name>.pydaf-incomplete-copy`` next to ``x.h5df``,
``x.daf``, ``x.daf.zarr``, ``x.daf.zip``; with a hash of the group for ``x.h5dfs#/group``), never a file inside it:
the data set's own bytes are untouched, so Julia reads the data set exactly as before (and does not see the marker:
Julia opens a data set a killed copy left as it is). Mode ``w`` (which replaces the data set) removes the marker, as
does a conversion or repack that replaces the data set. The process that writes the copy may open the data set
meanwhile; another process is told the copy is under way.

Example:
    >>> import os, tempfile, pydaf
    >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
    >>> daf = pydaf.FilesDaf(path, "w")
    >>> token = begin_incomplete_copy(daf.complete_path(), what="a test")
    >>> pydaf.FilesDaf(path, "r").axes_set()  # (this process is writing the copy: it may open the data set)
    set()
    >>> end_incomplete_copy(token)
    >>> os.path.exists(marker_path(path))
    False
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator

from .._os.files import read_regular_file
from .._os.locks import process_is_alive
from ..errors import DafError, DafIncompleteError, DafStorageError
from .paths import split_complete_path, storage_path

__all__ = ["begin_incomplete_copy", "building_aside", "clear_incomplete_copy", "end_incomplete_copy", "marker_path",
           "refuse_incomplete_copy"]

#: What a marker's name ends with.
MARKER_SUFFIX = ".pydaf-incomplete-copy"

# The markers this process wrote and has not removed yet (its own copies under way), by path, with their tokens.
_live: dict[str, set[str]] = {}
_live_mutex = threading.Lock()

# The markers of data sets this process builds aside (a conversion's hidden temporary): no copy into them is marked,
# a killed build being a temporary the next conversion removes.
_aside: set[str] = set()


def marker_path(path: str | os.PathLike) -> str:
    """Where the marker of the data set at ``path`` (``container`` or ``container#/group``) is: next to the container,
    whatever spelling (a symbolic link, a relative path) names it.

    Example:
        >>> marker_path("/data/cells.h5df")
        '/data/.cells.h5df.pydaf-incomplete-copy'
        >>> marker_path("/data/all.h5dfs#/cells") == marker_path("/data/all.h5dfs#cells/")
        True
    """
    group = "/".join(part for part in split_complete_path(os.fspath(path))[1].lstrip("#").split("/") if part)
    folder, name = os.path.split(os.path.realpath(storage_path(path)))
    tail = f"-{hashlib.sha1(group.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}" if group else ""
    return os.path.join(folder, f".{name}{MARKER_SUFFIX}{tail}")


def refuse_incomplete_copy(path: str | os.PathLike, *, daf_name: str | None = None) -> None:
    """Raise a :class:`~pydaf.errors.DafIncompleteError` if a copy into the data set at ``path`` is under way in
    another process, or was interrupted (its marker is there); the process writing a copy may open it.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
        >>> with open(marker_path(path), "w") as marker:
        ...     _ = marker.write('{"pid": 0, "started": "2026-01-01 00:00:00 UTC", "what": "a copy_all"}')
        >>> refuse_incomplete_copy(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafIncompleteError: incomplete copy: ...x.h5df
        (a copy_all into it, started 2026-01-01 00:00:00 UTC by the process 0, was interrupted before it ended:
        the data set holds part of what was copied)
        to recover: replace it (pydaf convert SOURCE DESTINATION --overwrite), or restore it from a backup;
        to open it as it is (and copy into it again, with overwrite=True), remove the marker: ...
    """
    marker = marker_path(path)
    if not os.path.lexists(marker):
        return
    with _live_mutex:
        if _live.get(marker):
            return
    try:
        record = json.loads(read_regular_file(marker, what="an incomplete copy marker", limit=1 << 16))
        pid, started, what = int(record["pid"]), str(record["started"]), str(record["what"])
    except Exception:  # (a marker cut short by a kill, or unreadable: the copy is still not known to be complete)
        pid, started, what = -1, "at an unknown time", "a copy"
    text = os.fspath(path)
    if pid > 0 and pid != os.getpid() and process_is_alive(pid):
        raise DafIncompleteError(f"incomplete copy: {text}\n({what} into it, started {started} by the process {pid}, "
                                 "is under way: open it when it ends)", daf_name=daf_name)
    by = f" by the process {pid}" if pid >= 0 else ""
    raise DafIncompleteError(
        f"incomplete copy: {text}\n({what} into it, started {started}{by}, was interrupted before it ended:\nthe data "
        "set holds part of what was copied)\nto recover: replace it (pydaf convert SOURCE DESTINATION --overwrite), or "
        "restore it from a backup;\nto open it as it is (and copy into it again, with overwrite=True), remove the "
        f"marker: {marker}", daf_name=daf_name)


@contextlib.contextmanager
def building_aside(path: str | os.PathLike) -> Iterator[None]:
    """While building the data set at ``path`` aside (a hidden temporary, moved into place when complete), copies into
    it are not marked (:func:`begin_incomplete_copy` returns ``None``).

    Example:
        >>> with building_aside("/tmp/.x.daf.tmp-1-0123abcd"):
        ...     print(begin_incomplete_copy("/tmp/.x.daf.tmp-1-0123abcd"))
        None
    """
    marker = marker_path(path)
    with _live_mutex:
        _aside.add(marker)
    try:
        yield
    finally:
        with _live_mutex:
            _aside.discard(marker)


def begin_incomplete_copy(path: str | os.PathLike, *, what: str = "a copy_all") -> tuple[str, str] | None:
    """Mark the data set at ``path`` as being written by a copy (before its first change); returns the token to give
    :func:`end_incomplete_copy` once the last change is committed (``None`` for a data set built aside, see
    :func:`building_aside`). A marker that can't be written is a
    :class:`~pydaf.errors.DafStorageError` (before anything is copied).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> token = begin_incomplete_copy(path)
        >>> os.path.exists(marker_path(path))
        True
        >>> end_incomplete_copy(token)
    """
    marker = marker_path(path)
    with _live_mutex:
        if marker in _aside:
            return None
    token = uuid.uuid4().hex
    record = {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "what": what,
              "token": token}
    with _live_mutex:
        _live.setdefault(marker, set()).add(token)
    try:
        # (written in place: a kill while it is written leaves a marker cut short, which refuses the data set too)
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o644)
        try:
            os.write(fd, json.dumps(record).encode())
        finally:
            os.close(fd)
    except OSError as error:
        with _live_mutex:
            _live[marker].discard(token)
        raise DafStorageError(f"can't write the incomplete copy marker: {marker}\nof the data set: {os.fspath(path)}\n"
                              f"({type(error).__name__}: {error}; the folder must be writable to copy into a data "
                              "set safely)") from None
    return marker, token


def end_incomplete_copy(token: tuple[str, str] | None) -> None:
    """Remove the marker :func:`begin_incomplete_copy` wrote (after the copy's last change is committed), unless
    another copy has marked the data set since.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> end_incomplete_copy(begin_incomplete_copy(path)); os.path.exists(marker_path(path))
        False
    """
    if token is None:
        return
    marker, mine = token
    try:
        record = json.loads(read_regular_file(marker, what="an incomplete copy marker", limit=1 << 16))
        if record.get("token") == mine:
            os.unlink(marker)
    except (OSError, ValueError, AttributeError, DafError):
        pass  # (gone already: a mode w open or a conversion replaced the data set meanwhile)
    finally:
        with _live_mutex:
            _live.get(marker, set()).discard(mine)


def clear_incomplete_copy(path: str | os.PathLike) -> None:
    """Remove the marker of the data set at ``path``, if any (it was replaced whole: by mode ``w``, a conversion or a
    repack).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> _ = begin_incomplete_copy(path)
        >>> clear_incomplete_copy(path); os.path.exists(marker_path(path))
        False
    """
    marker = marker_path(path)
    try:
        os.unlink(marker)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        pass  # (not a marker pydaf wrote: left as it is, and refused at the next open)
