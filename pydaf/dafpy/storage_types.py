"""dafpy's type aliases of the values a Daf data set stores.

Example:
    >>> import numpy as np
    >>> from pydaf.dafpy.storage_types import StorageScalar
    >>> isinstance(np.uint8(1), StorageScalar), isinstance("human", StorageScalar)
    (True, True)
"""

from __future__ import annotations

import numpy as np

__all__ = ["StorageNumber", "StorageScalar"]

#: The numbers a data set stores: Python's ``bool``/``int``/``float`` (stored as ``Bool``/``Int64``/``Float64``) or a
#: numpy scalar, whose type is kept (``np.uint8(1)`` is stored as ``UInt8``).
StorageNumber = (bool | int | float | np.int8 | np.int16 | np.int32 | np.int64 | np.uint8 | np.uint16 | np.uint32
                 | np.uint64 | np.float32 | np.float64)

#: The scalars a data set stores: a number or a string.
StorageScalar = StorageNumber | str
