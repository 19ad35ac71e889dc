"""The ops, expectations and skips of Julia's recorded cases of ``reorder.jl`` (see ``tests/composition.py``).

Julia's permutations are 1-based (``new_entries[i] = old_entries[perm[i]]``); pydaf's are 0-based, so the ops subtract
one. Records with a ``storage`` field make their own FilesDaf / H5df / ZarrDaf (``new_files_daf`` ... ``new_zarr_daf``)
and so run the same on both backends; the others use ``new_memory_daf`` (MemoryDaf, or H5df on the mapped backend).
The derived ``state`` records (COMPOSITION.md §6) compare every axis, vector and matrix of a data set at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import pydaf
from pydaf.abc.reorder import SimulatedCrash

from .composition import ERROR_TYPES, EXPECTATIONS, OPS, Session, _kwargs, op, plain
from .parity import julia_equal

# Julia's exception types that only the type of is asserted (``@test_throws SimulatedCrash ...``).
ERROR_TYPES["DataAxesFormats.Reorder.SimulatedCrash"] = SimulatedCrash
ERROR_TYPES["ArgumentError"] = pydaf.DafValueError


def _reorder_module() -> Any:
    # Imported when first used: the orchestrator lands after this module.
    from pydaf.core import reorder

    return reorder


def _permutation(session: Session, spec: Any) -> np.ndarray:
    """A recorded 1-based permutation (a list, a vector literal or a ``{"ref"}``) as pydaf's 0-based one."""
    values = session.value(spec) if isinstance(spec, dict) else spec
    return np.asarray(values, dtype=np.int64) - 1


@op("reorder_axes")
def _reorder_axes(session: Session, spec: dict) -> Any:
    target = [session.daf(daf) for daf in spec["dafs"]] if "dafs" in spec else session.daf(spec["daf"])
    permutations = {axis: _permutation(session, permutation) for axis, permutation in spec["axes_permutations"]}
    return _reorder_module().reorder_axes(target, permutations, progress=False, **_kwargs(session, spec))


@op("reset_reorder_axes")
def _reset_reorder_axes(session: Session, spec: dict) -> Any:
    return _reorder_module().reset_reorder_axes(session.daf(spec["daf"]))


@op("is_leaf")
def _is_leaf(session: Session, spec: dict) -> Any:
    return pydaf.is_leaf(session.daf(spec["daf"]))


@op("new_zarr_daf")
def _new_zarr_daf(session: Session, spec: dict) -> Any:
    return pydaf.ZarrDaf(session.path(spec["path"]), spec["mode"], name=spec.get("name"))


if "setindex" not in OPS:

    @op("setindex")
    def _setindex(session: Session, spec: dict) -> Any:
        # Julia's ``x[i] = v`` / ``x[i, j] = v``, 1-based; returns the array (the setup binds the result to ``var``).
        array = session.variables[spec["var"]]
        array[tuple(index - 1 for index in spec["indices"])] = session.value(spec["value"])
        return array


@op("state")
def _state(session: Session, spec: dict) -> Any:
    # The data set itself; EXPECTATIONS["state"] reads every property of it.
    return session.daf(spec["daf"])


def _assert_values(what: str, actual: Any, expected: list) -> None:
    values = np.asarray(plain(actual))
    assert values.shape == np.shape(np.array(expected, dtype=object)), f"{what}: shape {values.shape}"
    assert all(julia_equal(value.item() if isinstance(value, np.generic) else value, want)
               for value, want in zip(values.ravel(), np.array(expected, dtype=object).ravel(), strict=True)), \
        f"{what}: {values.tolist()!r} != {expected!r}"


def _check_state(daf: Any, record: dict, session: Session) -> None:
    """Every scalar, axis, vector and matrix (in the ``rows,cols`` layouts listed) equals the recorded state, and
    there are no others."""
    expected = record["expected"]
    what = record["id"]
    assert daf.scalars_set() == set(expected["scalars"]), f"{what}: scalars {sorted(daf.scalars_set())}"
    for name, value in expected["scalars"].items():
        assert julia_equal(daf.get_scalar(name), value), f"{what}: scalar {name}"
    assert daf.axes_set() == set(expected["axes"]), f"{what}: axes {sorted(daf.axes_set())}"
    for axis, entries in expected["axes"].items():
        _assert_values(f"{what}: axis {axis}", daf.axis_vector(axis), entries)
    for axis in expected["axes"]:
        vectors = expected["vectors"].get(axis, {})
        assert daf.vectors_set(axis) == set(vectors), f"{what}: vectors of {axis}: {sorted(daf.vectors_set(axis))}"
        for name, values in vectors.items():
            _assert_values(f"{what}: vector {axis}/{name}", daf.get_stored_vector(axis, name), values)
    for key, matrices in expected["matrices"].items():
        rows_axis, columns_axis = key.split(",")
        assert daf.matrices_set(rows_axis, columns_axis) == set(matrices), \
            f"{what}: matrices of {key}: {sorted(daf.matrices_set(rows_axis, columns_axis))}"
        for name, values in matrices.items():
            _assert_values(f"{what}: matrix {key}/{name}", daf.get_stored_matrix(rows_axis, columns_axis, name),
                           values)
            # The other layout (stored by set_matrix's relayout) must have been permuted the same way.
            if daf.has_matrix(columns_axis, rows_axis, name, relayout=False):
                _assert_values(f"{what}: matrix {columns_axis},{rows_axis}/{name}",
                               daf.get_stored_matrix(columns_axis, rows_axis, name, relayout=False),
                               np.array(values, dtype=object).T.tolist())


EXPECTATIONS["state"] = _check_state
