"""One translation of the operating system's write failures into :class:`~pydaf.DafStorageError`, for every format.

A full disk (``ENOSPC``), an exceeded quota (``EDQUOT``) and a file-size limit (``EFBIG``, ``RLIMIT_FSIZE``) are said in
words, with the ``errno`` kept on the error; any other ``OSError`` keeps the system's message. Each format calls
:func:`storage_error` where its write path catches the ``OSError`` (after undoing the failed write).
"""

from __future__ import annotations

import errno

from ..errors import DafStorageError

#: The write failures that mean "no room": their errno and how messages say it.
FULL_REASONS: dict[int, str] = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file is too large",
}


def storage_error(error: OSError, doing: str, *, intact: bool = True) -> DafStorageError:
    """The :class:`~pydaf.DafStorageError` for an ``OSError`` raised while ``doing`` (the first lines of the message:
    what was written, where); its ``errno`` is the system's. ``intact``: the failed write changed nothing stored
    before it (what every format guarantees once it has undone a failed write), which the message says.

    Example:
        >>> import errno
        >>> error = storage_error(OSError(errno.ENOSPC, "No space left on device"), "can't write the scalar: x")
        >>> print(error)
        can't write the scalar: x
        failed: the disk is full (No space left on device); what was stored before is intact
        >>> error.errno == errno.ENOSPC
        True
    """
    reason = FULL_REASONS.get(error.errno) if error.errno is not None else None
    if reason is not None:
        kept = "; what was stored before is intact" if intact else ""
        result = DafStorageError(f"{doing}\nfailed: {reason} ({error.strerror}){kept}")
    else:
        result = DafStorageError(f"{doing}\nfailed: {error.strerror or error}")
    result.errno = error.errno
    return result
