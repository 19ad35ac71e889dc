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
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.brief import brief_scalar
from ..core.readers import DafReader
from ..core.writers import DafWriter
from ..errors import DafChainError, DafFormatError, DafModeError, DafValueError
from ..formats.paths import split_complete_path
from ..open import open_daf
from ..queries.base import QueryOperation
from .chains import base_daf_path, chain_reader, chain_writer
from .views import ViewFormat, ViewPairs, ViewQuery, make_view, view_pairs

__all__ = ["complete_chain", "complete_daf"]

BASE_DAF_REPOSITORY = "base_daf_repository"
BASE_DAF_VIEW = "base_daf_view"
BASE_DAF_FINGERPRINT = "base_daf_fingerprint"


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


def _parse_json_scalar(text: Any, scalar: str, shown: str,
                       daf: DafReader) -> tuple[Any, Callable[[str], DafFormatError]]:
    """The JSON value of a recorded scalar (``shown`` in errors), and the maker of its "invalid" errors."""
    def invalid(why: str) -> DafFormatError:
        return DafFormatError(f"invalid {scalar}: {shown}\n({why})", daf_name=daf.name)

    if not isinstance(text, str):
        raise invalid("expected a JSON string")
    try:
        return json.loads(text), invalid
    except ValueError as error:
        raise invalid(f"not JSON: {error}") from None


def parse_view_json(text: Any, daf: DafReader) -> dict[str, list[tuple[Any, Any]]]:
    """The :func:`~pydaf.viewer` parameters recorded in a ``base_daf_view`` scalar (Julia's
    ``parse_view_parameters``); anything else than that layout is a :class:`~pydaf.DafFormatError`."""
    parsed, invalid = _parse_json_scalar(text, BASE_DAF_VIEW, repr(text), daf)
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

    recorded, invalid = _parse_json_scalar(text, BASE_DAF_FINGERPRINT, brief_scalar(text), daf)
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


def complete_chain(*, base_daf: DafReader, new_daf: DafWriter, name: str | None = None, axes: ViewPairs | None = None,
                   data: ViewPairs | None = None, absolute: bool = False) -> DafWriter:
    """A write chain of ``base_daf`` (or of a :func:`~pydaf.viewer` of it, with ``axes`` and ``data``) and
    ``new_daf``, both on disk, recorded in ``new_daf`` (the scalars ``base_daf_repository``: the base's path, relative
    to ``new_daf``'s directory unless ``absolute``; ``base_daf_view``: the view parameters, if any; and
    ``base_daf_fingerprint``: the identity of the base, its axes' entries, which Julia ignores) so that
    :func:`complete_daf` reopens the same chain later, and refuses a base replaced meanwhile by another data set.
    Everything is checked before anything is written. Calling it again on the same ``new_daf`` records its base
    anew (for a base that was replaced on purpose).

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
    pydaf before it recorded one) open unchecked.

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
    name = path if name is None else name
    members = list(reversed(_collect(path, mode, name, 0, set(), check=not accept_changed_base)))
    if mode == "r+":
        return chain_writer(members, name=f"{name}.complete")
    return chain_reader(members, name=f"{name}.complete")


def _collect(path: str, mode: str, name: str, index: int, visited: set[str], *, check: bool) -> list[DafReader]:
    """The data sets of a chain from its leaf at ``path`` towards its root (Julia's ``collect_dafs``), each base
    checked against the identity its child recorded, if ``check``."""
    members: list[DafReader] = []
    # The records of the members whose base is the next member: checked once the bases' own bases are open too.
    links: list[tuple[int, str, str, str]] = []
    while True:
        daf = open_daf(path, mode)
        complete_path = daf.complete_path() or os.path.abspath(path)
        if complete_path in visited:
            raise DafFormatError(f"cyclic {BASE_DAF_REPOSITORY}\nreaching again the daf data: {daf.name}\n"
                                 f"at: {complete_path}", daf_name=daf.name, daf_preposition=None)
        visited.add(complete_path)
        members.append(daf)
        base = daf.get_scalar(BASE_DAF_REPOSITORY, default=None)
        if base is None:
            break
        if not isinstance(base, str) or not base:
            raise DafFormatError(f"invalid {BASE_DAF_REPOSITORY}: {brief_scalar(base)}\n(expected a path)",
                                 daf_name=daf.name)
        path = base_daf_path(complete_path, base)
        recorded_view = daf.get_scalar(BASE_DAF_VIEW, default=None)
        if recorded_view is not None:
            parameters = parse_view_json(recorded_view, daf)
            bases = _collect(path, "r", name, index + 1, visited, check=check)
            if check:
                _check_base(daf, complete_path, base, path, bases)  # the base itself, not the view of it
            bases.reverse()
            chain = chain_reader(bases, name=f"{name}.chain_{index}")
            members.append(make_view(chain, name=f"{name}.view_{index}", axes=parameters.get("axes"),
                                     data=parameters.get("data"), path=bases[-1].complete_path()))
            break
        links.append((len(members) - 1, complete_path, base, path))
        mode = "r"
    if check:
        for position, daf_path, base, base_path in links:
            _check_base(members[position], daf_path, base, base_path, members[position + 1:])
    return members
