"""Reconstruct implicit axes (Julia's ``Reconstruction``). AnnData's two axes make other axes be stored expanded (a
type for each cell, and a color for each cell where the color is really per type); :func:`reconstruct_axis` creates
the implicit axis (``type``), moves the properties that are consistent per type (``color``) to it, and deletes them
from the existing axis.

The work is vectorized: the entries are grouped once by their implicit value (``numpy.unique``), and each property is
checked for consistency in one comparison of its values against the first value of each group, so an axis of millions
of entries takes no per-entry Python loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.values import exact_scalar
from ..errors import DafExistsError, DafMissingError, DafReadOnlyError, DafTypeError, DafValueError
from ..hints import existing_names_hint
from ..julia_text import julia_string
from ..keys import pairs_as_dict
from ..storage_types import STRING_DTYPE, StorageScalar, julia_name, scalar_value

if TYPE_CHECKING:
    from ..core.readers import DafReader
    from ..core.writers import DafWriter

__all__ = ["reconstruct_axis"]


def reconstruct_axis(daf: DafWriter, *, existing_axis: str, implicit_axis: str, rename_axis: str | None = None,
                     empty_implicit: StorageScalar | None = None, implicit_properties: Iterable[str] | None = None,
                     skipped_properties: Iterable[str] | None = None,
                     properties_defaults: Mapping[str, StorageScalar] | Iterable[tuple[str, StorageScalar]] | None
                     = None) -> dict[str, StorageScalar | None]:
    """Create an axis from the ``implicit_axis`` vector of the ``existing_axis`` (Julia's ``reconstruct_axis!``): its
    entries are the distinct values of the vector (sorted; numbers named as Julia prints them), the axis is named
    ``rename_axis`` (default: ``implicit_axis``), and each property of the existing axis whose value is the same for
    all entries with the same implicit value moves to the new axis (deleted from the existing one).

    - ``empty_implicit``: the value meaning "no value" (becomes ``""``; strings default to ``""``). A vector of numbers,
      or one with an ``empty_implicit`` other than ``""``, is rewritten as strings (``""`` for no value).
    - ``implicit_properties``: only these properties move, and each must be consistent (else an error); by default
      every consistent property moves and the others stay (``skipped_properties`` stay regardless).
    - If the axis already exists, it must hold every used value; its other entries take the property's value from
      ``properties_defaults`` (a dict or ``(name, value)`` pairs), else an error.

    Returns, for each moved property, its value for the entries with no implicit value (``None`` if there are none):
    it is lost from the data set (rebuild it with ``?? value``, e.g. ``@ cell : type : color ?? magenta``). Everything
    is checked before anything is written.

    Differences from Julia: a name in ``implicit_properties`` or ``skipped_properties`` that is not a vector of the
    existing axis is an error (Julia ignores it), and so is a moved property that already exists in the reconstructed
    axis (checked before writing); defaults convert exactly to the property's type.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="example!")
        >>> _ = daf.add_axis("cell", ["A", "B", "C", "D"]).set_vector("cell", "batch", ["X", "X", "Y", ""])
        >>> _ = daf.set_vector("cell", "age", [1, 1, 2, 3]).set_vector("cell", "score", [0.0, 0.5, 1.0, 2.0])
        >>> reconstruct_axis(daf, existing_axis="cell", implicit_axis="batch")
        {'age': np.int64(3)}
        >>> daf.axis_vector("batch").tolist(), daf.get_vector("batch", "age").tolist(), sorted(daf.vectors_set("cell"))
        (['X', 'Y'], [1, 2], ['batch', 'score'])
    """
    daf_name = daf.name
    if not hasattr(daf, "set_vector"):
        raise DafReadOnlyError("can't reconstruct_axis: the daf data is read-only", daf_name=daf_name)
    for argument, value in (("existing_axis", existing_axis), ("implicit_axis", implicit_axis),
                            ("rename_axis", rename_axis)):
        if value is not None and not isinstance(value, str):
            raise DafTypeError(f"invalid {argument} given to reconstruct_axis: {value!r} (expected an axis name)",
                               daf_name=daf_name)
    axis_name = implicit_axis if rename_axis is None else rename_axis
    implicit_set = _names_set(implicit_properties, "implicit_properties", daf_name)
    skipped_set = _names_set(skipped_properties, "skipped_properties", daf_name)
    defaults = _defaults(properties_defaults, daf_name)
    if empty_implicit is not None:
        empty_implicit = scalar_value(empty_implicit, what="empty_implicit value")

    implicit_values = daf.get_vector(existing_axis, implicit_axis)
    existing_vectors = daf.vectors_set(existing_axis)
    for names, argument in ((implicit_set, "implicit_properties"), (skipped_set, "skipped_properties")):
        if names is None:
            continue
        if implicit_axis in names:
            raise DafValueError(f"the implicit axis: {implicit_axis}\nis also in the {argument} given to "
                                "reconstruct_axis", daf_name=daf_name)
        for name in sorted(names - existing_vectors):
            raise DafMissingError(f"missing vector: {name}\nof the axis: {existing_axis}\nin the {argument} given "
                                  f"to reconstruct_axis", daf_name=daf_name,
                                  hint=existing_names_hint(name, existing_vectors, "vectors"))

    is_strings = implicit_values.dtype == STRING_DTYPE
    if is_strings and empty_implicit is None:
        empty_implicit = ""
    rewrite_implicit = not is_strings or (empty_implicit is not None and empty_implicit != "")
    groups = _Groups(implicit_values, empty_implicit, is_strings)

    axis_entries = groups.axis_entries
    if daf.has_axis(axis_name):
        existing_entries = daf.axis_vector(axis_name)
        missing = groups.missing_from(existing_entries)
        if missing is not None:
            raise DafMissingError(f"missing used entry: {missing}\nfrom the existing reconstructed axis: "
                                  f"{implicit_axis}", daf_name=daf_name)
        axis_entries = existing_entries
    group_of_axis_entry = groups.group_of(axis_entries)

    empty_values: dict[str, StorageScalar | None] = {}
    moved_vectors: dict[str, np.ndarray] = {}
    for name in sorted(existing_vectors):
        if name == implicit_axis or (skipped_set is not None and name in skipped_set):
            continue
        is_explicit = implicit_set is not None and name in implicit_set
        if implicit_set is not None and not is_explicit:
            continue
        moved = _moved_property(daf, groups, group_of_axis_entry, axis_entries, existing_axis=existing_axis,
                                implicit_axis=implicit_axis, name=name, default=defaults.get(name),
                                must_be_consistent=is_explicit)
        if moved is not None:
            empty_values[name], moved_vectors[name] = moved

    if daf.has_axis(axis_name):
        for name in sorted(moved_vectors):
            if daf.has_vector(axis_name, name):
                raise DafExistsError(f"existing vector: {name}\nof the reconstructed axis: {axis_name}\n(it would be "
                                     f"replaced by the property of the axis: {existing_axis}; delete one of them, or "
                                     "skip it with skipped_properties)", daf_name=daf_name)
    else:
        daf.add_axis(axis_name, axis_entries)
    if rewrite_implicit:
        daf.set_vector(existing_axis, implicit_axis, groups.implicit_strings(), overwrite=True)
    for name, vector in moved_vectors.items():
        daf.set_vector(axis_name, name, vector)
        daf.delete_vector(existing_axis, name)
    return empty_values


class _Groups:
    """The entries of the existing axis grouped by their implicit value as Julia's text (``""``: no value)."""

    def __init__(self, implicit_values: np.ndarray, empty_implicit: StorageScalar | None, is_strings: bool) -> None:
        unique_values, inverse = np.unique(implicit_values, return_inverse=True)
        inverse = inverse.reshape(-1)
        if empty_implicit is None or (is_strings != isinstance(empty_implicit, str)):
            is_empty = np.zeros(len(unique_values), dtype=bool)  # (Julia: a number is never == a string)
        else:
            is_empty = np.asarray(unique_values == empty_implicit, dtype=bool)
        texts = unique_values if is_strings else np.array([julia_string(value) for value in unique_values.tolist()],
                                                          dtype=object)
        texts = np.asarray(texts, dtype=object).copy()
        #: The new axis' entries: the used values in their sorted order (numbers sort as numbers, as in Julia).
        self.axis_entries = _distinct(texts[~is_empty])
        texts[is_empty] = ""
        # Group by the text (two values may print alike, and the empty value joins any "" value).
        self.names, group_of_unique = np.unique(texts, return_inverse=True)
        self.group_of_entry = group_of_unique.reshape(-1)[inverse]
        _, self.first_entry = np.unique(self.group_of_entry, return_index=True)
        self.n_entries = len(implicit_values)

    def implicit_strings(self) -> np.ndarray:
        """The implicit vector as strings, ``""`` for no value (what Julia writes back)."""
        return self.names[self.group_of_entry]

    def missing_from(self, entries: np.ndarray) -> str | None:
        """The first used value (in sorted order) that ``entries`` lacks, or ``None``."""
        found = _found(np.asarray(entries, dtype=object), self.axis_entries)
        return None if found.all() else str(self.axis_entries[np.argmin(found)])

    def group_of(self, entries: np.ndarray) -> np.ndarray:
        """The group of each axis entry, -1 for entries no existing-axis entry uses."""
        entries = np.asarray(entries, dtype=object)
        positions = np.searchsorted(self.names, entries)
        positions[positions >= len(self.names)] = 0
        return np.where(self.names[positions] == entries, positions, -1) if len(self.names) \
            else np.full(len(entries), -1)

    def empty_group(self) -> int | None:
        """The group of the entries with no implicit value, if any."""
        return 0 if len(self.names) and self.names[0] == "" else None


def _moved_property(daf: DafReader, groups: _Groups, group_of_axis_entry: np.ndarray, axis_entries: np.ndarray, *,
                    existing_axis: str, implicit_axis: str, name: str, default: StorageScalar | None,
                    must_be_consistent: bool) -> tuple[StorageScalar | None, np.ndarray] | None:
    """The value for no implicit value and the vector of the new axis, of a property that is consistent per group;
    ``None`` (or an error if ``must_be_consistent``) if it is not."""
    values = daf.get_vector(existing_axis, name)
    first_values = values[groups.first_entry]
    differs = np.asarray(values != first_values[groups.group_of_entry], dtype=bool)
    differs[groups.first_entry] = False  # (a NaN differs from itself; Julia only compares later entries)
    if differs.any():
        if not must_be_consistent:
            return None
        position = int(np.argmax(differs))
        group = groups.group_of_entry[position]
        raise DafValueError(f"inconsistent values: {julia_string(values[position])} != "
                            f"{julia_string(first_values[group])}\nof the property: {name}\n"
                            f"for the same implicit axis value: {groups.names[group]}\nof the axis: {existing_axis}\n"
                            f"for the reconstructed axis: {implicit_axis}", daf_name=daf.name)

    empty_group = groups.empty_group()
    empty_value = None if empty_group is None else _item(first_values[empty_group])
    used = group_of_axis_entry >= 0
    vector = np.empty(len(axis_entries), dtype=values.dtype)
    vector[used] = first_values[group_of_axis_entry[used]]
    if not used.all():
        if default is None:
            raise DafMissingError(f"no default value specified for the unused entry: "
                                  f"{axis_entries[np.argmin(used)]}\nof the reconstructed property: {name}",
                                  daf_name=daf.name, hint="(give it in properties_defaults)")
        vector[~used] = _converted_default(default, values.dtype, name, daf.name)
    return empty_value, vector


def _converted_default(default: StorageScalar, dtype: np.dtype, name: str, daf_name: str) -> StorageScalar:
    if (dtype == STRING_DTYPE) != isinstance(default, str):
        raise DafTypeError(f"invalid default: {julia_string(default)}\nof the reconstructed property: {name}\n"
                           f"(a {type(default).__name__} for a vector of {julia_name(dtype)})", daf_name=daf_name)
    if dtype == STRING_DTYPE:
        return default
    return exact_scalar(default, dtype, what=f"default of the reconstructed property: {name}", daf_name=daf_name)


def _item(value: Any) -> StorageScalar:
    return value if isinstance(value, str | np.bool_ | np.integer | np.floating) else scalar_value(value)


def _distinct(texts: np.ndarray) -> np.ndarray:
    """``texts`` without repeats, in their order."""
    if len(texts) < 2:
        return texts
    _, first = np.unique(texts, return_index=True)
    return texts[np.sort(first)] if len(first) < len(texts) else texts


def _found(haystack: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """Whether each of ``needles`` is in ``haystack`` (strings; vectorized through a sort)."""
    if len(haystack) == 0:
        return np.zeros(len(needles), dtype=bool)
    ordered = np.sort(haystack)
    positions = np.searchsorted(ordered, needles)
    positions[positions >= len(ordered)] = 0
    return np.asarray(ordered[positions] == needles, dtype=bool)


def _names_set(names: Iterable[str] | None, argument: str, daf_name: str) -> set[str] | None:
    if names is None:
        return None
    if isinstance(names, str | bytes):
        raise DafTypeError(f"invalid {argument} given to reconstruct_axis: the string {names!r} (expected a set of "
                           f"property names, e.g. {{{names!r}}})", daf_name=daf_name)
    result = set(names)
    for name in result:
        if not isinstance(name, str):
            raise DafTypeError(f"invalid property name: {name!r}\nin the {argument} given to reconstruct_axis",
                               daf_name=daf_name)
    return result


def _defaults(properties_defaults: Any, daf_name: str) -> dict[str, StorageScalar]:
    if properties_defaults is None:
        return {}
    if isinstance(properties_defaults, str | bytes):
        raise DafTypeError("invalid properties_defaults given to reconstruct_axis: a string (expected a dict or "
                           "(name, value) pairs)", daf_name=daf_name)
    try:
        defaults = pairs_as_dict(properties_defaults)
    except (TypeError, ValueError) as error:
        raise DafTypeError("invalid properties_defaults given to reconstruct_axis: expected a dict or (name, value) "
                           "pairs", daf_name=daf_name) from error
    for name, default in defaults.items():
        if not isinstance(name, str):
            raise DafTypeError(f"invalid property name: {name!r}\nin the properties_defaults given to "
                               "reconstruct_axis", daf_name=daf_name)
        if default is None or not isinstance(default, str | bool | int | float | np.bool_ | np.integer | np.floating):
            raise DafTypeError(f"invalid property default: {default!r}\nof the property: {name}\n(expected a "
                               "number or a string)", daf_name=daf_name)
    return defaults
