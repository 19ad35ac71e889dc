"""The exceptions pydaf raises.

Every error is a :class:`DafError`. Each subclass also derives from the closest built-in exception, so code that
catches ``KeyError``-like lookups (``LookupError``), ``ValueError`` or ``TypeError`` keeps working. Messages follow
Julia's templates: the problem first, then ``in the daf data: <name>``.
"""

from __future__ import annotations


class DafError(Exception):
    """Base class of every error pydaf raises.

    Example:
        >>> import pydaf
        >>> try:
        ...     pydaf.MemoryDaf(name="example").get_scalar("version")
        ... except pydaf.DafError as error:
        ...     print(error)
        missing scalar: version
        in the daf data: example
    """


class DafMissingError(DafError, LookupError):
    """A scalar, axis, vector, matrix or entry that does not exist (and no default was given)."""

    def __str__(self) -> str:  # LookupError would otherwise be fine; keep plain text, never a repr.
        return str(self.args[0]) if self.args else ""


class DafExistsError(DafError, ValueError):
    """A property that already exists was set again without ``overwrite=True``."""


class DafNameError(DafError, ValueError):
    """A reserved name (``name``, ``index``) or a name that the storage cannot hold (``/``, empty, …)."""


class DafShapeError(DafError, ValueError):
    """A vector length or matrix shape that does not match its axes, or duplicate axis entries."""


class DafValueError(DafError, ValueError):
    """A value that is not valid for the operation (bad entries, bad indices, bad arguments)."""


class DafTypeError(DafError, TypeError):
    """An element type that Daf cannot store (complex, float16, object, datetime, …)."""


class DafFormatError(DafError):
    """Storage that is not a Daf data set, has an unsupported version, or is truncated or corrupt."""


class DafModeError(DafError, ValueError):
    """An invalid open mode, or an attempt to write through a read-only data set."""


class DafReadOnlyError(DafModeError):
    """A write through a read-only data set."""


class DafStorageError(DafError, OSError):
    """Storage that could not be written: a full disk, a file-size limit, an I/O error. The failed call changed
    nothing that was stored before it."""


class DafLockedError(DafStorageError):
    """A file that another process is writing (to read it), or is reading or writing (to write it)."""


class DafUnsupportedError(DafError, ValueError):
    """Data that Daf cannot hold (e.g. AnnData's ``obsm``), reported by an ``unsupported_handler="error"``."""


class DafQueryError(DafError, ValueError):
    """A query that does not parse, or that cannot be applied to the data (Julia's message, pointing with ``▲`` at
    the offending part of the query)."""


def for_daf(message: str, daf_name: str) -> str:
    """Append Julia's ``in the daf data: <name>`` trailer to a message."""
    return f"{message}\nin the daf data: {daf_name}"
