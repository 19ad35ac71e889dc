"""Persistent chains (Julia's ``CompleteDaf`` and ``complete_chain!``): a data set on disk records the data set it
extends (the scalars ``base_daf_repository`` and ``base_daf_view``, in Julia's layout), so the whole chain can be
reopened from its last (leaf) member. pydaf also records ``base_daf_fingerprint`` (Julia ignores it): the identity of
the base's axes, so :func:`complete_daf` refuses (:class:`~pydaf.DafChainError`) a base replaced by another data
set.

Design: docs/design/views.md."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from typing import Any

import numpy as np

from .._os.files import file_kind
from ..core.brief import brief_scalar
from ..core.readers import DafReader, DafReadOnlyWrapper
from ..core.writers import DafWriter
from ..errors import DafChainError, DafError, DafFormatError, DafModeError, DafPathError, DafValueError
from ..formats.h5df.format import H5dfFormat
from ..formats.paths import split_complete_path
from ..open import open_daf
from ..queries.base import QueryOperation
from .chains import ReadOnlyChainFormat, base_daf_path, chain_reader, chain_writer
from .views import MAX_VIEW_NESTING, ViewFormat, ViewPairs, ViewQuery, make_view, view_nesting, view_pairs

__all__ = ["MAX_CHAIN_DEPTH", "complete_chain", "complete_daf"]

BASE_DAF_REPOSITORY = "base_daf_repository"
BASE_DAF_VIEW = "base_daf_view"
BASE_DAF_FINGERPRINT = "base_daf_fingerprint"

#: The most data sets a persistent chain holds (its leaf and every base reached from it by the
#: ``base_daf_repository`` records). :func:`complete_chain` refuses to build a deeper one and :func:`complete_daf`
#: refuses to open one (records written by hand or by a program gone wrong), with a :class:`~pydaf.DafChainError`
#: naming the depth and this limit, before anything deeper is opened. Each base seen through a view nests one more view
#: in the chain, so a chain with views holds at most :data:`~pydaf.composition.views.MAX_VIEW_NESTING` of them.
MAX_CHAIN_DEPTH = 64
#: The longest ``base_daf_repository`` accepted (Linux's ``PATH_MAX``), checked before the path is used.
MAX_REPOSITORY_CHARACTERS = 4096
#: The longest ``base_daf_view`` text parsed (a view of tens of thousands of pairs fits).
MAX_VIEW_CHARACTERS = 1 << 20
#: The longest ``base_daf_fingerprint`` text parsed (~100 characters per axis of the base).
MAX_FINGERPRINT_CHARACTERS = 16 << 20

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _query_text(query: ViewQuery) -> str | None:
    return str(query) if isinstance(query, QueryOperation) else query


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    return "(" + ", ".join(json.dumps(part, ensure_ascii=False) for part in key) + ")"


def _key_of(text: str) -> Any:
    """A key of the JSON: ``("cell", "age")`` (Julia's print of a tuple) is a tuple key, anything else a name."""
    if len(text) > 2 and text.startswith("(") and text.endswith(")"):
        try:
            parts = json.loads(f"[{text[1:-1]}]")
        except ValueError:
            return text
        if 2 <= len(parts) <= 4 and all(isinstance(part, str) for part in parts):
            return tuple(parts)
    return text


def view_json(axes: list[tuple[Any, ViewQuery]] | None, data: list[tuple[Any, ViewQuery]] | None) -> str:
    """The ``base_daf_view`` text of view parameters (only those given)."""
    parameters: dict[str, list[dict[str, str | None]]] = {}
    if axes is not None:
        parameters["axes"] = [{_key_text(key): _query_text(query)} for key, query in axes]
    if data is not None:
        parameters["data"] = [{_key_text(key): _query_text(query)} for key, query in data]
    return json.dumps(parameters, ensure_ascii=False)


def _parse_json_scalar(text: Any, scalar: str, daf: DafReader, limit: int,
                       daf_path: str | None = None) -> tuple[Any, Callable[[str], DafFormatError]]:
    """The JSON value of a recorded scalar (at most ``limit`` characters, checked before parsing), and the maker of
    its "invalid" errors (naming the data set holding it, and its path)."""
    def invalid(why: str) -> DafFormatError:
        return DafFormatError(f"invalid {scalar}: {brief_scalar(text)}\n({why})", daf_name=daf.name,
                              hint=None if daf_path is None else f"at: {daf_path}")

    if not isinstance(text, str):
        raise invalid("expected a JSON string")
    if len(text) > limit:
        raise invalid(f"a text of {len(text)} characters; at most {limit} are read")
    try:
        return json.loads(text), invalid
    except ValueError as error:
        raise invalid(f"not JSON: {error}") from None
    except RecursionError:
        raise invalid("not JSON: nested too deeply") from None


def parse_view_json(text: Any, daf: DafReader, daf_path: str | None = None) -> dict[str, list[tuple[Any, Any]]]:
    """The :func:`~pydaf.viewer` parameters recorded in a ``base_daf_view`` scalar (Julia's
    ``parse_view_parameters``); anything else than that layout (or a text of more than
    :data:`MAX_VIEW_CHARACTERS`) is a :class:`~pydaf.DafFormatError`.

    Example:
        >>> import pydaf
        >>> parse_view_json('{"axes": [{"cell": "="}]}', pydaf.MemoryDaf())
        {'axes': [('cell', '=')]}
    """
    parsed, invalid = _parse_json_scalar(text, BASE_DAF_VIEW, daf, MAX_VIEW_CHARACTERS, daf_path)
    if not isinstance(parsed, dict):
        raise invalid("expected a JSON object")
    parameters: dict[str, list[tuple[Any, Any]]] = {}
    for parameter, pairs in parsed.items():
        if parameter not in ("axes", "data"):
            raise invalid(f"unknown view parameter: {parameter}")
        if not isinstance(pairs, list) or not all(isinstance(pair, dict) for pair in pairs):
            raise invalid(f"expected a list of single-key objects for: {parameter}")
        parameters[parameter] = [(_key_of(key) if parameter == "data" else key, query)
                                 for pair in pairs for key, query in pair.items()]
    return parameters


def _relative_path(base_path: str, new_path: str) -> str:
    """The base's path relative to the directory of the new data set (keeping an HDF5 group's ``#/group``)."""
    base_file, group = split_complete_path(base_path)
    directory = os.path.dirname(split_complete_path(new_path)[0])
    return os.path.relpath(base_file, directory) + group


def _entries_digest(entries: np.ndarray) -> str:
    """The SHA-256 of an axis' entries: their UTF-8 text joined by NUL, then their lengths (little-endian 64-bit), so
    that no two lists of entries share a text (even entries holding a NUL)."""
    texts = [str(entry) for entry in entries.tolist()]
    digest = hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass"))
    digest.update(np.fromiter(map(len, texts), dtype="<i8", count=len(texts)).tobytes())
    return digest.hexdigest()


def _identified_base(daf: DafReader) -> DafReader:
    """The data set whose axes reopening ``daf``'s complete path gives: a view (as :func:`complete_daf` makes, with its
    base's path) reports its base's path, so its base's axes are the ones to record, not its own (renamed) ones."""
    while isinstance(daf.format, ViewFormat):
        daf = daf.format.base
    return daf


def base_daf_fingerprint(base_daf: DafReader, repository: str) -> str:
    """The ``base_daf_fingerprint`` text recording the identity of ``base_daf`` (reached by the recorded
    ``repository``): each of its axes, with its number of entries and their digest.

    Example:
        >>> import json, pydaf
        >>> base = pydaf.MemoryDaf().add_axis("cell", ["A", "B"])
        >>> recorded = json.loads(base_daf_fingerprint(base, "cells.daf"))
        >>> cell = recorded["axes"]["cell"]
        >>> recorded["base_daf_repository"], cell["entries"], len(cell["sha256"])
        ('cells.daf', 2, 64)
    """
    base = _identified_base(base_daf)
    axes = {}
    for axis in sorted(base.axes_set()):
        entries = base.axis_vector(axis)
        axes[axis] = {"entries": int(entries.shape[0]), "sha256": _entries_digest(entries)}
    return json.dumps({BASE_DAF_REPOSITORY: repository, "axes": axes}, ensure_ascii=False)


def _check_base(daf: DafReader, daf_path: str, repository: str, base_path: str, bases: list[DafReader]) -> None:
    """Refuse a base that is not the data set ``daf``'s ``base_daf_fingerprint`` recorded (``bases``: the reopened
    base and its own bases, each axis taken from the first that has it, as the chain does). Without a record (written
    by Julia, or by pydaf before it recorded one), or with one left from another ``base_daf_repository`` (recorded
    again by a program that does not know the fingerprint), nothing can be checked."""
    text = daf.get_scalar(BASE_DAF_FINGERPRINT, default=None)
    if text is None:
        return

    recorded, invalid = _parse_json_scalar(text, BASE_DAF_FINGERPRINT, daf, MAX_FINGERPRINT_CHARACTERS, daf_path)
    if not isinstance(recorded, dict) or not isinstance(recorded.get("axes"), dict) or not all(
            isinstance(axis, dict) and isinstance(axis.get("entries"), int) and isinstance(axis.get("sha256"), str)
            for axis in recorded["axes"].values()):
        raise invalid('expected {"base_daf_repository": path, "axes": {axis: {"entries": count, "sha256": digest}}}')
    if recorded.get(BASE_DAF_REPOSITORY) != repository:
        return
    changes = []
    for axis, expected in recorded["axes"].items():
        owner = next((base for base in bases if base.has_axis(axis)), None)
        if owner is None:
            changes.append(f"the axis: {axis} (of {expected['entries']} entries) is missing")
            continue
        entries = owner.axis_vector(axis)
        if entries.shape[0] != expected["entries"]:
            changes.append(f"the axis: {axis} has {entries.shape[0]} entries instead of {expected['entries']}")
        elif _entries_digest(entries) != expected["sha256"]:
            changes.append(f"the axis: {axis} has different entries (of the same number: {expected['entries']})")
    if changes:
        raise DafChainError(
            f"changed base daf data: {base_path}\nof the daf data: {daf.name}\nat: {daf_path}\n"
            f"(its {BASE_DAF_REPOSITORY}: {repository})\nsince complete_chain recorded it:\n"
            + "".join(f"- {change}\n" for change in changes)
            + "so it is not the data set the chain was built on (it was replaced, or lost or changed axes)\n"
            f"to open the chain anyway: complete_daf(..., accept_changed_base=True)\n"
            f"to build the chain on this base for good: complete_chain(base_daf=open_daf({base_path!r}), "
            f"new_daf=open_daf({daf_path!r}, \"r+\")) (with the axes and data of its {BASE_DAF_VIEW}, if any)",
            daf_name=daf.name, daf_preposition=None)


def _stored_members(daf: DafReader) -> list[DafReader]:
    """The data sets ``daf`` reads from: itself, or the members of a chain and the bases of views (read-only
    wrappers unwrapped), in chain order."""
    while isinstance(daf, DafReadOnlyWrapper):
        daf = daf.base
    if isinstance(daf.format, ViewFormat):
        return _stored_members(daf.format.base)
    if isinstance(daf.format, ReadOnlyChainFormat):
        return [stored for member in daf.format.members for stored in _stored_members(member)]
    return [daf]


def _group_parts(group: str) -> list[str]:
    return [part for part in group.lstrip("#").split("/") if part not in ("", ".")]


def _is_data_set(path: str, daf: DafReader) -> bool:
    """Whether the data set at the complete ``path`` is ``daf`` (a stored data set), whatever the spelling: a symbolic
    or hard link to its file or directory, ``./`` or ``..`` parts, an HDF5 group reached by another (soft or hard)
    link. Never raises: a path that can't be looked at is not ``daf``."""
    own = daf.complete_path()
    if own is None:
        return False
    if path == own:
        return True
    container, group = split_complete_path(path)
    own_container, own_group = split_complete_path(own)
    try:
        if not os.path.samefile(container, own_container):
            return False
    except (OSError, ValueError):  # (missing, a NUL byte, too long, not encodable...)
        return False
    storage = daf.format
    if isinstance(storage, H5dfFormat):
        try:
            root = storage.root
            found = root.file.get("/" + "/".join(_group_parts(group)))
            return found is not None and found == root.file[root.name]
        except Exception:  # (an unreadable or closed file: not known to be the same)
            return False
    return _group_parts(group) == _group_parts(own_group)


def _record_context(daf: DafReader, daf_path: str, record: Any) -> str:
    return f"(the {BASE_DAF_REPOSITORY}: {brief_scalar(record)}\nof the daf data: {daf.name}\nat: {daf_path})"


def _recorded_base_path(daf: DafReader, daf_path: str, record: Any) -> str:
    """The absolute path of the base that ``daf`` (at ``daf_path``) records, checked to be a local path that can be
    looked at (no NUL byte, valid UTF-8, at most :data:`MAX_REPOSITORY_CHARACTERS`, not a URL) before it is used."""
    def invalid(why: str) -> DafFormatError:
        return DafFormatError(f"invalid {BASE_DAF_REPOSITORY}: {brief_scalar(record)}\n({why})", daf_name=daf.name,
                              hint=f"at: {daf_path}\n(record the base again: complete_chain(base_daf=..., "
                                   f"new_daf=open_daf({daf_path!r}, \"r+\")))")

    if not isinstance(record, str) or not record:
        raise invalid("expected a path")
    if len(record) > MAX_REPOSITORY_CHARACTERS:
        raise invalid(f"expected a path: a text of {len(record)} characters; at most {MAX_REPOSITORY_CHARACTERS}")
    if "\0" in record:
        raise invalid("expected a path: it holds a NUL character")
    try:
        record.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid("expected a path: it is not valid UTF-8") from None
    if _URL.match(record):
        raise invalid("expected a path: a URL; a chain's bases are local paths")
    return base_daf_path(daf_path, record)


def _require_base_storage(path: str, context: str) -> None:
    """Refuse, without opening it, a base whose file or directory is missing or is neither (a FIFO, a socket, a
    device: opening those may block)."""
    container = split_complete_path(path)[0]
    try:
        status = os.stat(container)
    except FileNotFoundError:
        raise DafChainError(f"missing base daf data: {path}\n{context}\n(it was moved or deleted; put it back, or "
                            "record the base again with complete_chain)", daf_preposition=None) from None
    except (OSError, ValueError) as error:
        raise DafChainError(f"can't look at the base daf data: {path}\n{context}\n({type(error).__name__}: {error})",
                            daf_preposition=None) from None
    if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
        raise DafChainError(f"not a daf data set but {file_kind(status.st_mode)}: the base daf data: {path}\n"
                            f"{context}", daf_preposition=None)


def _open_base(path: str, context: str) -> DafReader:
    """The base at ``path`` opened read-only; any failure names the chain member that records it (``context``)."""
    _require_base_storage(path, context)
    try:
        return open_daf(path, "r")
    except DafError as error:
        raise error.with_line(f"for the base daf data: {path}\n{context}") from None
    except (OSError, ValueError, TypeError, LookupError, UnicodeError, RecursionError) as error:
        raise DafChainError(f"can't open the base daf data: {path}\n{context}\n({type(error).__name__}: {error})",
                            daf_preposition=None) from None


def _depth_error(what: str) -> DafChainError:
    return DafChainError(f"too deep chain: {what}\n(a persistent chain holds at most MAX_CHAIN_DEPTH = "
                         f"{MAX_CHAIN_DEPTH} data sets: a deeper one is refused, so that opening it ends)",
                         daf_preposition=None)


def _require_no_cycle(base_daf: DafReader, base_path: str, new_daf: DafWriter, new_path: str) -> None:
    """Refuse (before anything is written) a base that is the new data set, by any path, or that is built on it (a
    member of a chain, or reached by following the ``base_daf_repository`` records from the base), and a base whose
    recorded chain already holds :data:`MAX_CHAIN_DEPTH` data sets."""
    target = _stored_members(new_daf)[-1]  # (the data set the records are written to)
    known = _stored_members(base_daf)

    def cycle(via: str) -> DafChainError:
        return DafChainError(
            f"cyclic chain: the base daf data: {base_daf.name}\nat: {base_path}\n{via}the new daf data: "
            f"{new_daf.name}\nat: {new_path}\n(recording it would make the new daf data its own base; nothing was "
            "written: choose a base that is not built on the new daf data)", daf_preposition=None)

    for member in known:
        member_path = member.complete_path()
        if member is target or (member_path is not None and _is_data_set(member_path, target)):
            raise cycle("is " if member_path == base_path else f"holds: {member_path}\nwhich is ")
    # The chain complete_daf would open below the new data set: the base and every base its records reach (those
    # opened here are closed again: an HDF5 file left open read-only could not be opened for writing afterwards).
    opened: list[DafReader] = []
    try:
        _walk_bases(base_path, target, known, opened, cycle, f"the new daf data: {new_daf.name}\nat: {new_path}\n"
                    f"would have more than {MAX_CHAIN_DEPTH - 1} bases, reached from: {base_path}")
    finally:
        for daf in opened:
            daf.close()


def _walk_bases(path: str, target: DafReader, known: list[DafReader], opened: list[DafReader],
                cycle: Callable[[str], DafChainError], too_deep: str) -> None:
    """Follow the ``base_daf_repository`` records from the base at ``path``, refusing one that reaches ``target``
    (``cycle``) or a chain of more than :data:`MAX_CHAIN_DEPTH` data sets with ``target`` (``too_deep``); a broken
    record ends the walk (:func:`complete_daf` reports it). ``known``: data sets already open, used as they are;
    ``opened``: those this opens."""
    base_path = path
    seen: list[DafReader] = []
    while True:
        if _is_data_set(path, target):
            raise cycle("is " if path == base_path else f"is built on: {path}\nwhich is ")
        if any(_is_data_set(path, earlier) for earlier in seen):
            return  # (a cycle among the bases themselves: complete_daf reports it)
        if len(seen) + 1 >= MAX_CHAIN_DEPTH:
            raise _depth_error(too_deep)
        daf = next((member for member in known if _is_data_set(path, member)), None)
        if daf is None:
            try:
                daf = open_daf(path, "r")
            except Exception:  # (a broken record of the base is complete_daf's to report)
                return
            known.append(daf)
            opened.append(daf)
        seen.append(daf)
        record = daf.get_scalar(BASE_DAF_REPOSITORY, default=None)
        daf_path = daf.complete_path()
        if record is None or daf_path is None:
            return
        try:
            path = _recorded_base_path(daf, daf_path, record)
        except DafError:
            return


def complete_chain(*, base_daf: DafReader, new_daf: DafWriter, name: str | None = None, axes: ViewPairs | None = None,
                   data: ViewPairs | None = None, absolute: bool = False) -> DafWriter:
    """A write chain of ``base_daf`` (or of a :func:`~pydaf.viewer` of it, with ``axes`` and ``data``) and
    ``new_daf``, both on disk, recorded in ``new_daf`` (the scalars ``base_daf_repository``: the base's path, relative
    to ``new_daf``'s directory unless ``absolute``; ``base_daf_view``: the view parameters, if any; and
    ``base_daf_fingerprint``: the identity of the base, its axes' entries, which Julia ignores) so that
    :func:`complete_daf` reopens the same chain later, and refuses a base replaced meanwhile by another data set.
    Everything is checked before anything is written: a base that is ``new_daf`` by any path (a link, another
    spelling, another HDF5 link to its group), or is built on it (a chain holding it, or records on disk leading to
    it), and a chain of more than :data:`MAX_CHAIN_DEPTH` data sets are a :class:`~pydaf.DafChainError`. Calling it
    again on the same ``new_daf`` records its base anew (for a base that was replaced on purpose).

    Example:
        >>> import pydaf, tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> base = pydaf.FilesDaf(os.path.join(folder, "cells.daf"), "w").add_axis("cell", ["A", "B"])
        >>> new = pydaf.FilesDaf(os.path.join(folder, "metacells.daf"), "w")
        >>> chain = pydaf.complete_chain(base_daf=base, new_daf=new, name="chain!")
        >>> chain.set_vector("cell", "metacell", ["M1", "M1"]).get_scalar("base_daf_repository")
        'cells.daf'
        >>> pydaf.complete_daf(os.path.join(folder, "metacells.daf")).get_vector("cell", "metacell").tolist()
        ['M1', 'M1']
    """
    if not isinstance(new_daf, DafWriter):
        raise DafModeError(f"read-only new_daf: {new_daf.name}\nfor complete_chain")
    new_path = new_daf.complete_path()
    base_path = base_daf.complete_path()
    for what, daf, path in (("new", new_daf, new_path), ("base", base_daf, base_path)):
        if path is None:
            raise DafValueError(f"the {what} daf data: {daf.name}\nhas no path (complete_chain needs data sets on "
                                "disk)")
    assert new_path is not None and base_path is not None
    _require_no_cycle(base_daf, base_path, new_daf, new_path)
    recorded_view = None
    base = base_daf
    if axes is not None or data is not None:
        base = make_view(base_daf, name=None, axes=axes, data=data, path=base_path)
        recorded_view = view_json(
            None if axes is None else view_pairs(axes, data=False, name=base.name, daf_name=base_daf.name),
            None if data is None else view_pairs(data, data=True, name=base.name, daf_name=base_daf.name))
    chain = chain_writer([base, new_daf], name=name)
    repository = base_path if absolute else _relative_path(base_path, new_path)
    fingerprint = base_daf_fingerprint(base_daf, repository)
    for scalar, text, limit in ((BASE_DAF_REPOSITORY, repository, MAX_REPOSITORY_CHARACTERS),
                                (BASE_DAF_VIEW, recorded_view or "", MAX_VIEW_CHARACTERS),
                                (BASE_DAF_FINGERPRINT, fingerprint, MAX_FINGERPRINT_CHARACTERS)):
        if len(text) > limit:  # (complete_daf would refuse to read it back)
            raise DafValueError(f"too long {scalar}: {len(text)} characters (at most {limit})\nfor the base daf "
                                f"data: {base_path}\nof the new daf data: {new_path}", daf_preposition=None)
    new_daf.set_scalar(BASE_DAF_REPOSITORY, repository, overwrite=True)
    if recorded_view is None:
        new_daf.delete_scalar(BASE_DAF_VIEW, must_exist=False)  # a view recorded before no longer applies
    else:
        new_daf.set_scalar(BASE_DAF_VIEW, recorded_view, overwrite=True)
    new_daf.set_scalar(BASE_DAF_FINGERPRINT, fingerprint, overwrite=True)
    return chain


def complete_daf(path: str | os.PathLike, mode: str = "r", *, name: str | None = None,
                 accept_changed_base: bool = False) -> DafReader:
    """Reopen a chain from its leaf (Julia's ``complete_daf``): the data set at ``path``, its base (its
    ``base_daf_repository``), that one's base, and so on, each base seen through the view its ``base_daf_view``
    records, if any. Only ``r`` and ``r+`` are valid modes; with ``r+`` the leaf (only) is writable and the result is a
    write chain. The chain is named ``<name>.complete`` (``name`` defaults to ``path``).

    A base that is no longer the data set :func:`complete_chain` recorded (its ``base_daf_fingerprint``: a base
    replaced by another data set, or one that lost or changed an axis) is a :class:`~pydaf.DafChainError`, unless
    ``accept_changed_base`` (which opens the chain as it is, unchecked, and records nothing; calling
    :func:`complete_chain` again records the new base for good). Chains without that record (written by Julia, or by
    pydaf before it recorded one) open unchecked. Records are checked before they are used, and every failure
    names the member holding the record and the base it names: a cycle, a chain of more than
    :data:`MAX_CHAIN_DEPTH` data sets or more than :data:`~pydaf.composition.views.MAX_VIEW_NESTING` views, a
    missing base or one that is not a file or directory (a FIFO is never opened) are a :class:`~pydaf.DafChainError`;
    a malformed record is a :class:`~pydaf.DafFormatError`.

    Example:
        >>> import pydaf, tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> base = pydaf.H5df(os.path.join(folder, "cells.h5df"), "w").set_scalar("organism", "human")
        >>> leaf = pydaf.H5df(os.path.join(folder, "more.h5df"), "w")
        >>> _ = pydaf.complete_chain(base_daf=base, new_daf=leaf, data=[(pydaf.ALL_SCALARS, "=")])
        >>> chain = pydaf.complete_daf(os.path.join(folder, "more.h5df"), "r+", name="more")
        >>> chain.set_scalar("version", 2).get_scalar("organism"), chain.name
        ('human', 'more.complete')
    """
    path = os.fspath(path)
    if mode not in ("r", "r+"):
        raise DafModeError(f"invalid mode: {mode}\nfor complete_daf: {path}\n(expected r or r+)")
    if "\0" in path:  # (which the OS refuses with an untyped ValueError)
        raise DafPathError(f"invalid path: {path!r}\nfor complete_daf\n(it holds a NUL character)")
    name = path if name is None else name
    members = list(reversed(_collect(path, mode, name, 0, [], check=not accept_changed_base)))
    if mode == "r+":
        return chain_writer(members, name=f"{name}.complete")
    return chain_reader(members, name=f"{name}.complete")


def _collect(path: str, mode: str, name: str, index: int, opened: list[DafReader], *, check: bool,
             child: tuple[DafReader, str, str] | None = None) -> list[DafReader]:
    """The data sets of a chain from its leaf at ``path`` towards its root (Julia's ``collect_dafs``), each base
    checked against the identity its child recorded, if ``check``. ``opened``: every data set of the chain opened so
    far (for cycles, by identity, and the depth); ``child``: the member recording ``path`` as its base, its path and
    its record (for errors)."""
    members: list[DafReader] = []
    # The records of the members whose base is the next member: checked once the bases' own bases are open too.
    links: list[tuple[int, str, str, str]] = []
    while True:
        if child is None:
            daf = open_daf(path, mode)
        else:
            child_daf, child_path, child_record = child
            context = _record_context(child_daf, child_path, child_record)
            earlier = next((member for member in opened if _is_data_set(path, member)), None)
            if earlier is not None:
                raise DafChainError(f"cyclic {BASE_DAF_REPOSITORY}\nreaching again the daf data: {earlier.name}\n"
                                    f"at: {path}\n{context}", daf_preposition=None)
            if len(opened) >= MAX_CHAIN_DEPTH:
                raise _depth_error(f"the daf data: {opened[0].name}\nat: {opened[0].complete_path()}\nhas more than "
                                   f"{MAX_CHAIN_DEPTH - 1} bases\nthe next one: {path}\n{context}")
            daf = _open_base(path, context)
        complete_path = daf.complete_path() or os.path.abspath(path)
        opened.append(daf)
        members.append(daf)
        record = daf.get_scalar(BASE_DAF_REPOSITORY, default=None)
        if record is None:
            break
        path = _recorded_base_path(daf, complete_path, record)
        base = str(record)  # (checked to be a string)
        child = (daf, complete_path, base)
        recorded_view = daf.get_scalar(BASE_DAF_VIEW, default=None)
        if recorded_view is not None:
            parameters = parse_view_json(recorded_view, daf, complete_path)
            bases = _collect(path, "r", name, index + 1, opened, check=check, child=child)
            if check:
                _check_base(daf, complete_path, base, path, bases)  # the base itself, not the view of it
            bases.reverse()
            chain = chain_reader(bases, name=f"{name}.chain_{index}")
            if view_nesting(chain) >= MAX_VIEW_NESTING:
                raise _depth_error(f"the daf data: {daf.name}\nat: {complete_path}\nis seen through "
                                   f"{view_nesting(chain) + 1} nested views (its own and its bases' {BASE_DAF_VIEW}; "
                                   f"at most MAX_VIEW_NESTING = {MAX_VIEW_NESTING})")
            members.append(make_view(chain, name=f"{name}.view_{index}", axes=parameters.get("axes"),
                                     data=parameters.get("data"), path=bases[-1].complete_path()))
            break
        links.append((len(members) - 1, complete_path, base, path))
        mode = "r"
    if check:
        for position, daf_path, base, base_path in links:
            _check_base(members[position], daf_path, base, base_path, members[position + 1:])
    return members
