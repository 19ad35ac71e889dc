"""ZipDaf: a FilesDaf layout in a ZIP file.

:mod:`.store` holds the ZIP reader and appender (shared with ZarrDaf's ZIP stores), :mod:`.zipdaf` the storage, the
facade and the format's registry entry.
"""

from ...errors import DafAppendOnlyError
from .store import ZipStore, acquire_zip_store
from .zipdaf import FORMAT, ZipDaf, ZipFormat, split_zip_path

__all__ = ["FORMAT", "DafAppendOnlyError", "ZipDaf", "ZipFormat", "ZipStore", "acquire_zip_store", "split_zip_path"]
