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
        (its scalars: none)
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


class DafInexactError(DafValueError):
    """A value that does not convert exactly to the element type asked for (Julia's ``InexactError``): pydaf never
    wraps, truncates or rounds one (see :func:`pydaf.core.values.exact_cast`). ``value`` is the first such value and
    ``position`` its index in the array converted."""

    def __init__(self, message: str, *, value: object = None, position: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.value = value
        self.position = position


class DafTypeError(DafError, TypeError):
    """An element type that Daf cannot store (complex, float16, object, datetime, …)."""


class DafFormatError(DafError):
    """Storage that is not a Daf data set, has an unsupported version, or is truncated or corrupt."""


class DafChainError(DafFormatError):
    """A persistent chain whose base (the data set its ``base_daf_repository`` names) is no longer the data set the
    chain was built on: it was replaced, or its axes were changed, since :func:`~pydaf.complete_chain`."""


class DafModeError(DafError, ValueError):
    """An invalid open mode, or an attempt to write through a read-only data set."""


class DafReadOnlyError(DafModeError, AttributeError):
    """A write through a read-only data set. Also an ``AttributeError``: a read-only data set has no write methods
    (``hasattr(reader, "set_scalar")`` is false), and calling one says how to open the data set for writing."""


class DafClosedError(DafError, ValueError):
    """A use (read, write or query) of a data set after its ``close()`` (or the end of its ``with`` block), or of a
    wrapper (read-only, view, chain) of a closed data set. Reopen it (``pydaf.open_daf(path)``) to use it again."""


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
