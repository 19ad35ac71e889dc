"""The hooks a backend gives its tests: how to make a data set, read it back, and look straight into its storage."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..abc.format import Capabilities
from ..core.readers import DafReader
from ..core.writers import DafWriter


class DafBackend:
    """How to make, reopen and inspect the data sets of one backend: what :class:`~pydaf.testing.DafConformance`
    (and any test that should run on every backend) is parametrised by. Subclass it once per backend and implement
    :meth:`new`; persistent backends also implement :meth:`reopen`, and backends that can be inspected without pydaf
    implement :meth:`snapshot` (the backdoor).

    The storage capabilities (:attr:`persistent`, :attr:`maps_files`, :attr:`rewrites`) are not declared here: they
    are read from the format of a data set the backend makes (:attr:`pydaf.DafReader.capabilities`), and
    :meth:`~pydaf.testing.DafConformance.test_declared_capabilities` checks each against behaviour. Tests that need
    one skip where it is false, naming it, rather than testing which backend they run on.

    Attributes:
        name: the backend's name, used as its test id (``str(backend)``).
        overwrite_keeps_returned_arrays: arrays returned before an overwrite keep their values after it (an
            overwrite never writes into storage that was handed out).

    Example:
        >>> import pydaf
        >>> class Memory(DafBackend):
        ...     name = "memory"
        ...     def new(self, directory, name):
        ...         return pydaf.MemoryDaf(name=name)
        >>> backend = Memory()
        >>> daf = backend.new(None, "example!")
        >>> str(backend), backend.reopen(daf) is daf, backend.reopen(daf, "r").name, backend.has_snapshot
        ('memory', True, 'example!.read_only', False)
        >>> backend.capabilities
        Capabilities(supports_rewrites=True, maps_files=False, persistent=False)
    """

    name: str = "backend"
    overwrite_keeps_returned_arrays: bool = True

    @property
    def capabilities(self) -> Capabilities:
        """What the storage of this backend's data sets can do, as their format declares it: read once from a data
        set made (by :meth:`new`) in a temporary directory and closed."""
        known = self.__dict__.get("_capabilities")
        if known is None:
            with tempfile.TemporaryDirectory(prefix="pydaf-capabilities-") as directory:
                daf = self.new(Path(directory), "capabilities!")
                known = self.__dict__["_capabilities"] = daf.capabilities
                daf.close()
        return known

    @property
    def persistent(self) -> bool:
        """The data outlives the data set object, and :meth:`reopen` reads it back from storage."""
        return self.capabilities.persistent

    @property
    def maps_files(self) -> bool:
        """Stored numbers come back as read-only memory maps of files (zero-copy)."""
        return self.capabilities.maps_files

    @property
    def rewrites(self) -> bool:
        """Stored properties can be deleted and overwritten (an append-only store, such as a ZIP archive, refuses
        both with :class:`~pydaf.DafAppendOnlyError`)."""
        return self.capabilities.supports_rewrites

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def new(self, directory: Path, name: str) -> DafWriter:
        """A new, empty, writable data set called ``name``, stored (if it is stored) under ``directory``; each call
        makes a different one."""
        raise NotImplementedError(f"the backend: {self.name}\ndoes not implement new")

    def path(self, directory: Path) -> str | None:
        """A new path under ``directory`` at which :func:`~pydaf.open_daf` in mode ``w`` creates a data set of this
        backend, or ``None`` for backends that have no path (in memory, composed)."""
        return None

    def reopen(self, daf: DafReader, mode: str = "r+") -> DafReader:
        """The same data set as read back from its storage, opened anew in ``mode``, after releasing what ``daf``
        holds of it (so ``daf`` itself may no longer be usable). In-memory backends return ``daf`` itself (its
        read-only view for mode ``r``)."""
        return daf.read_only() if mode == "r" else daf

    def snapshot(self, daf: DafReader) -> Mapping[str, Any]:
        """The backdoor: everything the storage of ``daf`` holds, read around pydaf (the files, the HDF5 objects, the
        dictionaries themselves), as a mapping from each stored item to a comparable form of its content. Two data
        sets hold the same data the same way if and only if their snapshots are equal. Hidden and temporary items are
        included: a leftover is a difference."""
        raise NotImplementedError(f"the backend: {self.name}\nhas no snapshot backdoor")

    @property
    def has_snapshot(self) -> bool:
        """Whether the backend implements :meth:`snapshot`."""
        return type(self).snapshot is not DafBackend.snapshot
