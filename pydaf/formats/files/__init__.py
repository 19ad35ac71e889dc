"""FilesDaf: a Daf data set as a directory of files (Julia's ``FilesDaf``).

:mod:`.format` holds the storage, the facade and the format's registry entry; :mod:`.layout` the names and metadata
of the files, shared with ZipDaf (the same layout in a ZIP).
"""

from .format import FORMAT, FilesDaf, FilesFormat

__all__ = ["FORMAT", "FilesDaf", "FilesFormat"]
