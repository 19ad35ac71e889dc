"""The ops, expectations and skips of Julia's recorded cases of ``groups.jl`` and ``reconstruction.jl`` (see
``tests/composition.py``).

The records are Julia's 1-based conventions: group labels ``0`` (no group) and ``1..N``, entry positions from 1.
pydaf's are ``-1`` and ``0..N-1``, positions from 0: the ops convert on the way in and back on the way out, so the
records' expected values stay Julia's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pydaf.composition.groups import collect_group_members, compact_groups, group_names
from pydaf.composition.reconstruction import reconstruct_axis

from .composition import EXPECTATIONS, Session, _kwargs, op


@op("compact_groups")
def _compact_groups(session: Session, spec: dict) -> Any:
    julia_labels = session.value(spec["group_indices"])  # (the variable; compacted in place, as Julia's)
    labels = np.asarray(julia_labels, dtype=np.int64) - 1
    count = compact_groups(labels)
    julia_labels[:] = labels + 1
    return count


@op("collect_group_members")
def _collect_group_members(session: Session, spec: dict) -> Any:
    labels = np.asarray(session.value(spec["group_indices"]), dtype=np.int64) - 1
    return [(members + 1).tolist() for members in collect_group_members(labels)]


@op("group_names")
def _group_names(session: Session, spec: dict) -> Any:
    names = session.value(spec["names_of_entries"])
    entries_of_groups = [[position - 1 for position in entries] for entries in spec["entries_of_groups"]]
    return group_names(names, entries_of_groups, **_kwargs(session, spec))


@op("reconstruct_axis")
def _reconstruct_axis(session: Session, spec: dict) -> Any:
    return reconstruct_axis(session.daf(spec["daf"]), **_kwargs(session, spec, pairs=("properties_defaults",)))


def _vector_of_vectors(result: Any, record: dict, session: Session) -> None:
    assert [list(members) for members in result] == record["expected"], f"{record['id']}: {result!r}"


EXPECTATIONS["vector_of_vectors"] = _vector_of_vectors
