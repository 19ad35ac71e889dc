"""The base of formats whose data set is stored at a path: ``container`` or ``container#/group``.

:class:`StoredFormat` holds where the data set is and how it was opened, and answers the identity half of the storage
contract from it (the default name, the complete path, the description's header, the state shared by every handle on
the same data set in this process). A format that stores data sets in files subclasses it and implements the data
half.
"""

from __future__ import annotations

import os
from typing import Any

from .._os.maps import shared_state
from ..abc.format import FormatWriter


class StoredFormat(FormatWriter):
    """A format whose data set is stored at a path (so ``persistent``, and mapped from its files).

    Attributes:
        container: the absolute path of the file or directory that holds the data set.
        group: the group of the container that the data set occupies (``None``: the container's root).
        path: the data set's complete path: ``container``, or ``container#/group``.
        mode: the mode it was opened in (``r``, ``r+``, ``w+``, ``w``).

    Example:
        >>> import os, tempfile, pydaf
        >>> storage = pydaf.ZipDaf(os.path.join(tempfile.mkdtemp(), "all.dafs.zip#/cells"), "w+").format
        >>> isinstance(storage, StoredFormat), storage.group, storage.path.endswith("all.dafs.zip#/cells")
        (True, 'cells', True)
        >>> lines = []
        >>> storage.format_description_header("", lines, False)
        >>> lines[0], lines[2], lines[1] == f"path: {storage.format_complete_path()}"
        ('type: ZipDaf', 'mode: w+', True)
    """

    maps_files = True
    persistent = True

    container: str
    group: str | None
    path: str
    mode: str

    def locate(self, container: str, group: str | None, mode: str) -> None:
        """Record where the data set is stored and the mode it is opened in (first, in ``__init__``)."""
        self.mode = mode
        self.container = os.path.abspath(container)
        self.group = group
        self.path = self.container if group is None else f"{self.container}#/{group}"

    def format_default_name(self) -> str:
        return self.path

    def format_complete_path(self) -> str | None:
        return self.path

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: {self.type_name}")
        lines.append(f"{indent}path: {self.path}")
        lines.append(f"{indent}mode: {self.mode}")

    def format_shared_state(self, state: Any) -> Any:
        """One lock, cache and set of version counters per stored data set in this process, whatever the path (a
        link, another spelling) it was opened through."""
        return shared_state(self.container, self.group, state)
