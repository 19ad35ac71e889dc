"""Where a dask task finds its data: a :class:`DafSource` names a stored data set (a path, ``file#/group`` or a URL),
small enough to travel in every task of a graph, and :func:`open_source` opens it once per worker process.

Nothing large is pickled into a graph: each task carries the source and the positions it reads, and opens the data
set itself (read-only; a mapped format maps, so a chunk is a view of the file). A worker keeps a few data sets open
between tasks (as xarray's ``CachingFileManager`` keeps files), keyed by the source and by the stamp the source was
given when the graph was built: a data set rewritten since then (another stamp) is opened afresh, never read through
a stale handle.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..core.readers import DafReader
from ..errors import DafValueError
from ..formats.paths import storage_path
from ..open import open_daf

__all__ = ["DafSource", "forget_sources", "local_reader", "open_source", "source_of"]

# How many data sets a worker keeps open (each holds a few descriptors and its maps).
_KEPT_OPEN = 8


@dataclass(frozen=True)
class DafSource:
    """A data set a worker can open by itself: ``path`` (as :func:`~pydaf.open_daf` takes it, or an ``http(s)://``
    URL) and ``stamp``, the identity and modification time of its storage when the graph was built (``None`` for a
    URL), so a rewritten data set is opened afresh.

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.h5df")
        >>> _ = pydaf.open_daf(path, "w").add_axis("cell", ["A", "B"])
        >>> source = source_of(path)
        >>> open_source(source).axis_length("cell"), source.path == path
        (2, True)
    """

    path: str
    stamp: tuple[int, ...] | None = None


def _is_url(path: str) -> bool:
    return path.startswith(("http://", "https://"))


def _stamp(path: str) -> tuple[int, ...] | None:
    if _is_url(path):
        return None
    storage = storage_path(path)
    try:
        status = os.stat(storage)
    except OSError:
        return None
    stamps = [status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size]
    # A FilesDaf or a Zarr directory changes its files, not itself: its metadata files say when it last changed.
    if os.path.isdir(storage):
        for name in ("daf.json", "zarr.json", ".zattrs", "metadata.json"):
            try:
                inner = os.stat(os.path.join(storage, name))
            except OSError:
                continue
            stamps += [inner.st_mtime_ns, inner.st_size]
    return tuple(stamps)


def cluster_client() -> Any:
    """The default ``distributed`` client (whose workers are other processes), or ``None`` (dask's local schedulers
    run tasks in this process).

    Example:
        >>> cluster_client() is None
        True
    """
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def source_of(daf: DafReader | str | os.PathLike) -> DafSource:
    """The :class:`DafSource` of a stored data set (an open one, or its path or URL). A data set that lives only in
    this process (a ``MemoryDaf``, a view or a chain) has none: a :class:`~pydaf.DafValueError` says to write it to
    a file first (workers are other processes). Nor, with a ``distributed`` client, has an H5df open for writing
    (its lock keeps every other process out): pass its path, and write results with
    :func:`~pydaf.dask.store_vector` given the path.

    Example:
        >>> import pydaf
        >>> source_of(pydaf.MemoryDaf(name="cells!"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: the data set cells! lives in this process only (MemoryDaf): ...
    """
    if isinstance(daf, DafReader):
        if daf.format.is_writable and type(daf.format).__name__ == "H5dfFormat" and cluster_client() is not None:
            raise DafValueError(
                "an H5df open for writing in this process locks its file against every other process, the dask "
                "workers too", daf_name=daf.name,
                hint=f'(open it read-only, pydaf.open_daf("{daf.complete_path()}"), or pass its path; to write '
                     "results into it, pass the path to pydaf.dask.store_vector / store_matrix)")
        path = daf.complete_path()
        stored = type(daf.format).__module__.startswith("pydaf.formats.")  # not a view, chain or contract
        if path is None or not stored:
            raise DafValueError(
                f"the data set {daf.name} lives in this process only ({daf.format.type_name}): dask workers are other "
                "processes and open their data by path; write it to a file first (pydaf.copy_all into an H5df or "
                "a FilesDaf) and pass that path")
    else:
        path = os.fspath(daf)
    return DafSource(path, _stamp(path))


def local_reader(daf: DafReader | str | os.PathLike) -> tuple[DafSource, DafReader]:
    """The source of ``daf`` and a reader of it in this process (``daf`` itself when it is open), for building a
    graph: its shapes, types and errors.

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.daf")
        >>> _ = pydaf.open_daf(path, "w").add_axis("cell", ["A", "B"])
        >>> source, reader = local_reader(path)
        >>> reader.axis_length("cell"), source.path == path
        (2, True)
    """
    source = source_of(daf)
    return source, daf if isinstance(daf, DafReader) else open_source(source)


_opened: OrderedDict[tuple[int, DafSource], DafReader] = OrderedDict()
_opened_lock = threading.Lock()


def open_source(source: DafSource) -> DafReader:
    """The data set ``source`` names, opened read-only once per process and kept (the last few used).

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.daf")
        >>> _ = pydaf.open_daf(path, "w").add_axis("cell", ["A", "B"])
        >>> open_source(source_of(path)) is open_source(source_of(path))
        True
    """
    key = (os.getpid(), source)  # a forked child opens its own
    with _opened_lock:
        daf = _opened.get(key)
        if daf is not None:
            _opened.move_to_end(key)
            return daf
    daf = open_daf(source.path, "r")
    with _opened_lock:
        kept = _opened.setdefault(key, daf)
        _opened.move_to_end(key)
        while len(_opened) > _KEPT_OPEN:
            _opened.popitem(last=False)
    return kept


def forget_sources(path: str) -> int:
    """Close the data sets this process keeps open whose storage is ``path`` (a file, directory or complete path),
    and collect what they mapped, so a writer in another process can take the file (an H5df's readers hold a shared
    lock that its writer waits for); returns how many were closed. Run on every worker before writing back
    (``client.run(forget_sources, path)``).

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.h5df")
        >>> _ = pydaf.open_daf(path, "w").add_axis("cell", ["A", "B"])
        >>> _ = open_source(source_of(path))
        >>> forget_sources(path), forget_sources(path)
        (1, 0)
    """
    import gc

    storage = storage_path(path)
    with _opened_lock:
        keys = [key for key in _opened if storage_path(key[1].path) == storage]
        closed = [_opened.pop(key) for key in keys]
    for daf in closed:
        daf.close()
    del closed
    gc.collect()  # (chunks already released may still hold maps in reference cycles)
    return len(keys)
