"""ZarrDaf: a Daf data set as a Zarr v3 group, in a directory or a ZIP.

:mod:`.format` holds the storage, the facade and the format's registry entry; :mod:`.convert` the conversions between
FilesDaf and ZarrDaf that link the data files instead of copying them.
"""

from .convert import files_to_zarr, zarr_to_files
from .format import FORMAT, DafZarrVersionError, ZarrDaf, ZarrFormat, split_zarr_path

__all__ = ["FORMAT", "DafZarrVersionError", "ZarrDaf", "ZarrFormat", "files_to_zarr", "split_zarr_path",
           "zarr_to_files"]
