"""The exceptions pydaf raises.

Every error is a :class:`DafError`. Each subclass also derives from the closest built-in exception, so code that
catches ``KeyError``-like lookups (``LookupError``), ``ValueError`` or ``TypeError`` keeps working. Messages follow
Julia's templates: the problem first, then ``in the daf data: <name>``. They are built from the error's fields
(:attr:`DafError.daf_name`, :attr:`~DafError.what`, :attr:`~DafError.for_`, :attr:`~DafError.hint`), which code
reads instead of the text.
"""

from __future__ import annotations

from typing import Any


class DafError(Exception):
    """Base class of every error pydaf raises.

    Its message is built from its fields (Julia's templates), in this order: ``problem``; ``for the <for_>``;
    ``<daf_preposition> the daf data: <daf_name>``; ``hint`` (pydaf's advice: what exists, how to fix). Fields left
    ``None`` are left out.

    - ``problem``: the message given, in Julia's words (``missing scalar: version``);
    - ``daf_name``: the data set the error is about (``None``: not known where it was raised);
    - ``daf_preposition``: how the trailer names it (``in``, ``of``, ``for``…); ``None`` when ``problem`` already
      names the data set itself (then no trailer is added);
    - ``what``: the property concerned as ``(kind, *names)``, e.g. ``("vector", "cell", "age")`` (see
      :func:`pydaf.core.storage.property_text`), or ``None``;
    - ``for_``: what was being done, a ``for the …`` line (``vector: age\\nof the axis: cell``), or ``None``.

    Example:
        >>> import pydaf
        >>> try:
        ...     pydaf.MemoryDaf(name="errors-example!").get_scalar("version")
        ... except pydaf.DafError as error:
        ...     print(error)
        ...     error.daf_name, error.what
        missing scalar: version
        in the daf data: errors-example!
        (its scalars: none)
        ('errors-example!', ('scalar', 'version'))
        >>> print(DafError("can't read the file", for_="vector: age\\nof the axis: cell", daf_name="cells!"))
        can't read the file
        for the vector: age
        of the axis: cell
        in the daf data: cells!
    """

    def __init__(self, problem: str = "", *, daf_name: str | None = None, daf_preposition: str | None = "in",
                 what: tuple[str, ...] | None = None, for_: str | None = None, hint: str | None = None) -> None:
        self.problem = problem
        self.daf_name = daf_name
        self.daf_preposition = daf_preposition
        self.what = what
        self.for_ = for_
        self.hint = hint
        super().__init__(self.text())

    def text(self, *, daf: bool = True) -> str:
        """The message; without the ``… the daf data: <name>`` trailer if not ``daf`` (``pydaf check``, which names
        the data set once).

        Example:
            >>> DafError("missing scalar: x", daf_name="cells!").text(daf=False)
            'missing scalar: x'
        """
        lines = [self.problem]
        if self.for_ is not None:
            lines.append(f"for the {self.for_}")
        if daf and self.daf_name is not None and self.daf_preposition is not None:
            lines.append(f"{self.daf_preposition} the daf data: {self.daf_name}")
        if self.hint is not None:
            lines.append(self.hint)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def completed(self, *, daf_name: str, what: tuple[str, ...] | None = None, for_: str | None = None) -> DafError:
        """A copy of this error (same class and fields) that also says what it was for and names its data set: how a
        caller that knows them completes an error raised without them (the message given so far stays first).

        Example:
            >>> print(DafFormatError("truncated file").completed(daf_name="cells!", for_="scalar: x"))
            truncated file
            for the scalar: x
            in the daf data: cells!
        """
        # (not ``copy.copy``: where tblib's pickling support is installed, as ``distributed`` does on import, the
        # copy of an exception shares its ``__dict__`` with the original, which would change too)
        error = type(self).__new__(type(self))
        error.__dict__.update(self.__dict__)
        error.problem, error.hint = str(self), None
        error.daf_name, error.daf_preposition = daf_name, "in"
        error.what = what if what is not None else self.what
        error.for_ = for_
        error.args = (error.text(),)
        return error

    def with_line(self, line: str) -> DafError:
        """This error with one more line at the end of its message (advice, or where it happened), its fields kept;
        returned, for ``raise error.with_line(...)``.

        Example:
            >>> print(DafError("missing axis: cell", daf_name="x!").with_line("(did you mean: cells?)"))
            missing axis: cell
            in the daf data: x!
            (did you mean: cells?)
        """
        self.hint = line if self.hint is None else f"{self.hint}\n{line}"
        self.args = (self.text(), *self.args[1:])
        return self


class DafMissingError(DafError, LookupError):
    """A scalar, axis, vector, matrix or entry that does not exist (and no default was given)."""


class DafKeyError(DafMissingError, KeyError):
    """A missing key of a dict-like facade (``DafAnnData``'s ``obs``, ``layers``, ``uns``…): also a ``KeyError``, as
    the code written for ``anndata`` and ``pandas`` catches."""


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

    def __init__(self, message: str = "", *, value: object = None, position: tuple[int, ...] = (),
                 **fields: Any) -> None:
        super().__init__(message, **fields)
        self.value = value
        self.position = position


class DafIndexError(DafValueError, IndexError):
    """An index that does not select entries of an axis (out of range, of the wrong length, unsupported, or not in the
    axis order): also an ``IndexError``."""


class DafTypeError(DafError, TypeError):
    """An element type that Daf cannot store (complex, float16, object, datetime, …)."""


class DafFormatError(DafError):
    """Storage that is not a Daf data set, has an unsupported version, or is truncated or corrupt."""


class DafChainError(DafFormatError):
    """A persistent chain whose base (the data set its ``base_daf_repository`` names) is no longer the data set the
    chain was built on: it was replaced, or its axes were changed, since :func:`~pydaf.complete_chain`."""


class DafZarrVersionError(DafFormatError):
    """A Zarr v2 store (DAF.jl reads only Zarr v3), with the hint to convert it."""


class DafNotDafError(DafFormatError):
    """Storage that exists but is not a Daf data set (``not a daf data set: <path>``): an HDF5 file or group, a Zarr
    group or a ZIP archive (group) without Daf's layout."""


class DafIncompleteError(DafFormatError):
    """A data set a copy (:func:`~pydaf.copy_all`) is writing in another process, or that a killed copy left holding
    part of what it copied (its "incomplete copy" marker is there): the message says what happened and how to
    recover."""


class DafUnknownFormatError(DafFormatError):
    """A path that no registered Daf format recognises (``no known Daf format can open the path``), listing the
    known formats."""


class DafPathError(DafValueError, DafFormatError):
    """A path that breaks the ``container`` / ``container#/group`` grammar of its format (a missing or empty group, a
    group in a singular container, an unknown suffix): :func:`pydaf.formats.paths.split_container_path`. Also a
    :class:`DafFormatError`, which these paths raised before."""


class DafModeError(DafError, ValueError):
    """An invalid open mode, or an attempt to write through a read-only data set."""


class DafReadOnlyError(DafModeError, AttributeError):
    """A write through a read-only data set. Also an ``AttributeError``: a read-only data set has no write methods
    (``hasattr(reader, "set_scalar")`` is false), and calling one says how to open the data set for writing."""


class DafAppendOnlyError(DafModeError):
    """A delete or an overwrite of a property stored in an append-only ZIP archive (Julia's "the ZIP backend is
    append-only")."""


class DafClosedError(DafError, ValueError):
    """A use (read, write or query) of a data set after its ``close()`` (or the end of its ``with`` block), or of a
    wrapper (read-only, view, chain) of a closed data set. Reopen it (``pydaf.open_daf(path)``) to use it again."""


class DafStorageError(DafError, OSError):
    """Storage that could not be written: a full disk, a file-size limit, an I/O error. The failed call changed
    nothing that was stored before it."""


class DafLockedError(DafStorageError):
    """A file that another process is writing (to read it), or is reading or writing (to write it)."""


class DafHttpError(DafStorageError):
    """A data set served over HTTP (:class:`~pydaf.HttpDaf`) that could not be read: a file the server does not
    have (404), a server error that persisted through the retries (5xx), a timeout or a dropped connection, a
    redirect loop, or a response that disagrees with itself or with ``metadata.json`` (a truncated body, a
    ``Content-Length`` or ``Content-Range`` that lies). :attr:`url` is the address concerned and :attr:`status` the
    HTTP status (``None`` when no response arrived)."""

    def __init__(self, problem: str = "", *, url: str | None = None, status: int | None = None,
                 **fields: Any) -> None:
        self.url = url
        self.status = status
        super().__init__(problem, **fields)


class DafUnsupportedError(DafError, ValueError):
    """Data that Daf cannot hold (e.g. AnnData's ``obsm``), reported by an ``unsupported_handler="error"``."""


class DafQueryError(DafError, ValueError):
    """A query that does not parse, or that cannot be applied to the data (Julia's message, pointing with ``▲`` at
    the offending part of the query)."""


class DafContractError(DafValueError):
    """A computation that broke its contract (:mod:`pydaf.composition.contracts`): a required input missing or of
    the wrong type, an output not created, data accessed that the contract does not list, an input modified, an
    unused required input; or a contract that is inconsistent, or two contracts that can't be merged. The message is
    Julia's, naming the computation and the data set."""


# The errors of the Julia bridge (pydaf.julia; also importable from pydaf.julia.errors).


class DafJuliaUnavailableError(DafError, RuntimeError):
    """No usable Julia for the bridge: no Julia executable was found (pydaf never downloads one), the Julia project
    is not instantiated, ``juliacall`` is not installed, or Julia could not load DataAxesFormats. The message says
    what was looked at and how to fix it.

    Example:
        >>> issubclass(DafJuliaUnavailableError, DafError)
        True
    """


class DafJuliaError(DafError):
    """An error raised by Julia (DataAxesFormats.jl) while running something for pydaf; the message is Julia's."""


class DafJuliaVersionError(DafJuliaUnavailableError, DafJuliaError):
    """juliacall and the Julia project's PythonCall are not the matching pair (juliacall X.Y.Z runs only with
    PythonCall X.Y.Z), or the project has no PythonCall: Julia is not started. The message names both versions and how
    to install the matching pair. A :class:`DafJuliaUnavailableError` (the bridge can't start) and a
    :class:`DafJuliaError`.

    Example:
        >>> issubclass(DafJuliaVersionError, DafJuliaUnavailableError), issubclass(DafJuliaVersionError, DafJuliaError)
        (True, True)
    """


# Julia's templates for the errors every API raises (its ``require_*`` messages), built from the property.


def _property_lines(adjective: str, kind: str, names: tuple[str, ...]) -> str:
    if kind == "vector":
        return f"{adjective} vector: {names[1]}\nfor the axis: {names[0]}"
    if kind == "matrix":
        return f"{adjective} matrix: {names[2]}\nfor the rows axis: {names[0]}\nand the columns axis: {names[1]}"
    return f"{adjective} {kind}: {names[0]}"


def missing_property(kind: str, *names: str, **fields: Any) -> DafMissingError:
    """Julia's ``missing <property>`` error: ``kind`` is ``scalar`` (name), ``axis`` (axis), ``vector`` (axis, name)
    or ``matrix`` (rows axis, columns axis, name); ``fields`` as :class:`DafError` (``daf_name``, ``hint``…).

    Example:
        >>> error = missing_property("vector", "cell", "age", daf_name="cells!")
        >>> print(error); error.what
        missing vector: age
        for the axis: cell
        in the daf data: cells!
        ('vector', 'cell', 'age')
    """
    return DafMissingError(_property_lines("missing", kind, names), what=(kind, *names), **fields)


def existing_property(kind: str, *names: str, **fields: Any) -> DafExistsError:
    """Julia's ``existing <property>`` error (arguments as :func:`missing_property`).

    Example:
        >>> print(existing_property("scalar", "version", daf_name="cells!"))
        existing scalar: version
        in the daf data: cells!
    """
    return DafExistsError(_property_lines("existing", kind, names), what=(kind, *names), **fields)
