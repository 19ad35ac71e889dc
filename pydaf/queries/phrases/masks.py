"""Phrases masking a vector's entries: ``[ prop ... ]``, ``[ ! prop ... ]``, and combining masks strictly left to right
with ``&``, ``|``, ``^`` (each optionally negated with ``!``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..query import AsAxis, BeginMask, BeginNegatedMask, EndMask, IfMissing, MaskOperation
from ..state import QueryState, VectorState, as_booleans
from .common import MatrixSlice, ensure_vector_is_axis, finalize_vector_values, lookup_property


def lookup_mask(query_state: QueryState, state: VectorState, as_axis: AsAxis | None,
                begin_mask: BeginMask | BeginNegatedMask, if_missing: IfMissing | None,
                matrix_slice: MatrixSlice | None) -> None:
    finalize_vector_values(query_state, state)
    ensure_vector_is_axis(query_state, state, as_axis)
    query_state.stack.extend((state, begin_mask))
    lookup_property(query_state, state.copy(), begin_mask.property_name, if_missing,  # type: ignore[arg-type]
                    matrix_slice)


def lookup_other_mask(query_state: QueryState, base_state: VectorState, begin_mask: BeginMask | BeginNegatedMask,
                      first_mask_state: VectorState, mask_operation: MaskOperation, if_missing: IfMissing | None,
                      matrix_slice: MatrixSlice | None) -> None:
    finalize_vector_values(query_state, first_mask_state)
    query_state.stack.extend((base_state, begin_mask, first_mask_state, mask_operation))
    lookup_property(query_state, base_state.copy(), mask_operation.property_name, if_missing,  # type: ignore[arg-type]
                    matrix_slice)


def _mask_of(base_state: VectorState, mask_state: VectorState) -> np.ndarray:
    """The mask state's truthiness, over all the base entries (entries the mask lost, e.g. to ``??``, are false)."""
    values = as_booleans(mask_state.vector_values)
    if len(mask_state.vector_entries) == len(base_state.vector_entries):  # type: ignore[arg-type]
        return np.asarray(values, dtype=bool)
    mask = np.zeros(len(base_state.vector_entries), dtype=np.bool_)  # type: ignore[arg-type]
    positions = {name: index for index, name in enumerate(base_state.vector_entries)}  # type: ignore[arg-type]
    mask[[positions[name] for name in mask_state.vector_entries]] = values  # type: ignore[union-attr]
    return mask


def compute_mask_operation(query_state: QueryState, base_state: VectorState, begin_mask: Any,
                           first_mask_state: VectorState, mask_operation: MaskOperation,
                           second_mask_state: VectorState) -> None:
    finalize_vector_values(query_state, second_mask_state)
    if not query_state.computing:
        query_state.stack.extend((base_state, begin_mask, first_mask_state))
        return
    first_mask = _mask_of(base_state, first_mask_state)
    if isinstance(begin_mask, BeginNegatedMask):
        first_mask = ~first_mask
        begin_mask = BeginMask(begin_mask.property_name)
    second_mask = _mask_of(base_state, second_mask_state)
    combined = base_state.copy()
    combined.vector_values = mask_operation.combine(first_mask, second_mask)
    query_state.stack.extend((base_state, begin_mask, combined))


def apply_mask(query_state: QueryState, base_state: VectorState, begin_mask: BeginMask | BeginNegatedMask,
               mask_state: VectorState, _end_mask: EndMask) -> None:
    if not query_state.computing:
        base_state.is_complete_property_axis = False
        query_state.stack.append(base_state)
        return
    finalize_vector_values(query_state, mask_state)
    mask = _mask_of(base_state, mask_state)
    if isinstance(begin_mask, BeginNegatedMask):
        mask = ~mask
    base_state.vector_values = base_state.vector_values[mask]
    base_state.vector_entries = base_state.vector_entries[mask]  # type: ignore[index]
    base_state.is_complete_property_axis = False
    query_state.stack.append(base_state)
