"""The format registry: which storage format opens a path (xarray's ``BACKEND_ENTRYPOINTS`` and ``guess_engine``).

Each format registers a :class:`FormatEntry`; :func:`~pydaf.open_daf` and every ``pydaf`` command open paths through
:func:`guess_format`, which asks the formats by ``priority`` (the *fallback* ones last), each recognising a path by
its content first and its suffix second. :mod:`pydaf.formats` imports the built-in formats, so their order never
depends on import order. Third parties register through the ``pydaf.formats`` entry point group
(``myformat = "my_package.daf:FORMAT"``), loaded lazily (:func:`load_entry_point_formats`); an installed format never
replaces a registered one. :class:`PersistentDaf` opens every stored format in a mode, mode ``r`` giving a read-only
data set. How to add a format: docs/adding-a-format.md.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.readers import DafReader
from ..core.writers import DafWriter
from ..errors import DafPathError, DafUnknownFormatError, DafValueError
from .incomplete_copy import clear_incomplete_copy, refuse_incomplete_copy

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


@dataclass(frozen=True)
class FormatEntry:
    """How to recognise and open the data sets of one storage format.

    Attributes:
        name: the format's name (its ``type:`` in descriptions), e.g. ``"H5df"``.
        paths: what its paths look like, listed when no format can open a path.
        guess_can_open: whether a path is of this format: decided by what is there (magic bytes, structure) if
            anything is, else by the path's suffix. It never raises and never changes anything.
        open: opens a path in a mode (``r``, ``r+``, ``w+``, ``w``) with an optional data set name; mode ``r``
            returns a read-only data set.
        fallback: asked only after every other format, for paths that none of them recognises (FilesDaf: Julia's
            ``open_daf`` opens a FilesDaf directory "otherwise").
        repack: fills a new, empty writer of this format with a compact copy of the data set at a path
            (``repack(source, writer, *, progress)``; :func:`pydaf.repack` builds the writer aside and moves it into
            place), or ``None`` if the format has no such operation.
        priority: the order in which :func:`guess_format` asks the formats, lowest first (built-in formats: HttpDaf
            0, since a URL may end with any suffix, H5df 10, ZarrDaf 20, ZipDaf 30, FilesDaf 40; a third party's by
            default 100, after them).
        read_only: the format only reads (HttpDaf): it opens in mode ``r`` only, and is never a conversion's
            destination.

    Example:
        >>> import os, tempfile, pydaf
        >>> entry = guess_format(os.path.join(tempfile.mkdtemp(), "x.h5df"))
        >>> entry.name, entry.fallback, entry.repack.__name__
        ('H5df', False, 'repack_into')
    """

    name: str
    paths: str
    guess_can_open: Callable[[str], bool]
    open: Callable[..., DafReader]
    fallback: bool = False
    repack: Callable[..., None] | None = None
    priority: int = 100
    read_only: bool = False


#: The entry point group through which installed packages register their formats.
ENTRY_POINT_GROUP = "pydaf.formats"


_FORMATS: dict[str, FormatEntry] = {}
_entry_points_loaded = False


def register_format(entry: FormatEntry, *, replace: bool = False) -> FormatEntry:
    """Add a format to the registry (with ``replace``, replacing the one of the same name); returns the entry.

    Example:
        >>> import pydaf
        >>> entry = FormatEntry("Nothing", "never", guess_can_open=lambda path: False, open=pydaf.open_daf)
        >>> register_format(entry) is entry, [known.name for known in registered_formats()][-2:]
        (True, ['Nothing', 'FilesDaf'])
        >>> unregister_format("Nothing") is entry
        True
    """
    if entry.name in _FORMATS and not replace:
        raise DafValueError(f"existing Daf format: {entry.name}\n(use replace=True to replace it)")
    _FORMATS[entry.name] = entry
    return entry


def unregister_format(name: str) -> FormatEntry:
    """Remove a format from the registry; returns its entry.

    Example:
        >>> unregister_format("NoSuchFormat")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: unknown Daf format: NoSuchFormat
    """
    if name not in _FORMATS:
        raise DafValueError(f"unknown Daf format: {name}")
    return _FORMATS.pop(name)


def registered_formats() -> list[FormatEntry]:
    """The registered formats, in the order :func:`guess_format` asks them (the fallback ones last).

    Example:
        >>> [entry.name for entry in registered_formats()]
        ['HttpDaf', 'H5df', 'ZarrDaf', 'ZipDaf', 'FilesDaf']
    """
    load_entry_point_formats()
    return _ordered()


def _ordered() -> list[FormatEntry]:
    return sorted(_FORMATS.values(), key=lambda entry: (entry.fallback, entry.priority, entry.name))


def load_entry_point_formats(entry_points: Iterable[EntryPoint] | None = None) -> list[FormatEntry]:
    """Register the formats of installed packages (the :data:`ENTRY_POINT_GROUP` entry points, each naming a
    :class:`FormatEntry`); returns those registered. Without ``entry_points``, the installed ones are loaded the
    first time only. An entry point naming anything else is a :class:`~pydaf.DafValueError`; one whose name is
    already registered is skipped with a warning.

    Example:
        >>> from importlib.metadata import EntryPoint
        >>> point = EntryPoint("h5df", "pydaf.formats.h5df:FORMAT", ENTRY_POINT_GROUP)
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     load_entry_point_formats([point]), str(caught[0].message)
        ([], 'the format H5df of the entry point h5df is already registered; keeping the registered one')
    """
    global _entry_points_loaded
    if entry_points is None:
        if _entry_points_loaded:
            return []
        _entry_points_loaded = True
        from importlib import metadata  # (it imports email, csv, socket...: not at ``import pydaf``)

        entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    registered = []
    for point in entry_points:
        entry = point.load()
        if not isinstance(entry, FormatEntry):
            raise DafValueError(f"the entry point: {point.name} = {point.value}\nof the group: {ENTRY_POINT_GROUP}\n"
                                f"is a {type(entry).__name__}, not a pydaf.formats.registry.FormatEntry")
        if entry.name in _FORMATS:
            warnings.warn(f"the format {entry.name} of the entry point {point.name} is already registered; keeping "
                          "the registered one", stacklevel=2)
            continue
        registered.append(register_format(entry))
    return registered


def guess_format(path: str | os.PathLike) -> FormatEntry:
    """The first registered format that recognises ``path``; a :class:`~pydaf.DafFormatError` listing the known
    formats if none does.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> guess_format(os.path.join(folder, "x.h5dfs#/group")).name, guess_format(folder).name
        ('H5df', 'FilesDaf')
        >>> with open(os.path.join(folder, "notes.txt"), "w") as file:
        ...     _ = file.write("not a data set")
        >>> guess_format(os.path.join(folder, "notes.txt"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafUnknownFormatError: no known Daf format can open the path: .../notes.txt
        the known formats are:
        - H5df: ...
    """
    text = os.fspath(path)
    if "\0" in text:
        raise DafPathError(f"a path with a NUL character: {text!r}\n(no file system can hold it)")
    found = _first_opening(text, fallback=False)
    if found is None and load_entry_point_formats():
        found = _first_opening(text, fallback=False)
    found = found or _first_opening(text, fallback=True)
    if found is not None:
        return found
    entries = sorted(registered_formats(), key=lambda entry: entry.read_only)  # (URLs last: the path is a file's)
    known = "".join(f"\n- {entry.name}: {entry.paths}" for entry in entries)
    raise DafUnknownFormatError(f"no known Daf format can open the path: {text}\nthe known formats are:{known}")


def _first_opening(path: str, *, fallback: bool) -> FormatEntry | None:
    return next((entry for entry in _ordered() if entry.fallback == fallback and entry.guess_can_open(path)), None)


class _OpensInMode(type):
    """The metaclass of :class:`PersistentDaf`: ``Format(path, mode, name=...)`` is ``Format.open(path, mode,
    name=...)``, so that constructing in mode ``r`` can return the read-only wrapper of the data set (which is not an
    instance of the class), while ``__new__`` and ``__init__`` stay ordinary."""

    open: Callable[..., Any]  # (what every class made by this metaclass defines)

    def __call__(cls, *arguments: Any, **keywords: Any) -> Any:
        return cls.open(*arguments, **keywords)


class PersistentDaf(DafWriter, metaclass=_OpensInMode):
    """The base of the facades of stored formats (:class:`~pydaf.H5df`, :class:`~pydaf.FilesDaf`): a subclass's
    ``__init__(path, mode, *, name)`` opens or creates its storage, and calling the class opens it through
    :meth:`open`.

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> type(pydaf.FilesDaf(path, "w+")).__name__, type(pydaf.FilesDaf.open(path, "r")).__name__
        ('FilesDaf', 'DafReadOnlyWrapper')
    """

    @classmethod
    def open(cls, path: Any, mode: str = "r", *, name: str | None = None, **options: Any) -> DafReader:
        """Open (or create) the data set at ``path`` in ``mode``: ``r`` (read-only), ``r+``, ``w+`` (create if
        missing) or ``w`` (truncate). Mode ``r`` returns a :class:`~pydaf.DafReadOnly` whose ``base`` is the data
        set, so a read-only open has no write methods at all (Julia's constructors return ``read_only(...)`` the
        same way); other modes return the data set itself. ``options`` go to the format's constructor (``packed=``
        of :class:`~pydaf.H5df`, :class:`~pydaf.FilesDaf`, :class:`~pydaf.ZipDaf` and :class:`~pydaf.ZarrDaf`).

        Example:
            >>> import os, tempfile, pydaf
            >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
            >>> pydaf.H5df.open(path, "w").set_scalar("x", 1).has_scalar("x")
            True
            >>> reader = pydaf.H5df.open(path, "r")
            >>> hasattr(reader, "set_scalar"), type(reader.base).__name__
            (False, 'H5df')
        """
        if isinstance(path, (str, os.PathLike)) and mode != "w":  # (w replaces the data set: see below)
            refuse_incomplete_copy(path, daf_name=name)
        daf = type.__call__(cls, path, mode, name=name, **options)  # (__new__ and __init__, not _OpensInMode's)
        if mode == "w" and isinstance(path, (str, os.PathLike)):
            clear_incomplete_copy(path)  # (the copy a killed process left is gone with the data set it wrote)
        return daf.read_only(name=name) if mode == "r" else daf
