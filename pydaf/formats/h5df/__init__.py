"""H5df: a Daf data set in an HDF5 file, or in a group of one (Julia's ``H5df``).

:mod:`.format` holds the storage and the facade, :mod:`.open_files` the files this process has open and their locks,
:mod:`.undo_journal` the journal that makes each write operation atomic, :mod:`.global_heap` the check of the strings'
heap, and :mod:`.repack` the compact copy; this package registers the format (:data:`FORMAT`).
"""

from ..registry import FormatEntry, register_format
from .format import H5df, H5dfFormat, _guess_can_open, split_h5df_path
from .open_files import LOCK_WAIT_SECONDS, force_rollback, open_h5_file
from .repack import repack_into

__all__ = ["FORMAT", "LOCK_WAIT_SECONDS", "H5df", "H5dfFormat", "force_rollback", "open_h5_file", "repack_into",
           "split_h5df_path"]

FORMAT = register_format(FormatEntry(
    name="H5df", paths="an HDF5 file (x.h5df), or a group in one (x.h5dfs#/group)", guess_can_open=_guess_can_open,
    open=H5df.open, repack=repack_into, priority=10))
