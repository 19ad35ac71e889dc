"""Groups of axis entries (Julia's ``groups.jl``): pydaf's 0-based conventions, Julia's names, hostile inputs."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest

import pydaf
from pydaf.composition.groups import collect_group_members, compact_groups, group_names


def test_julia_names_both_records():
    # test/groups.jl "names": both assertions (the second is not among the recorded parity cases).
    daf = pydaf.MemoryDaf(name="memory!").add_axis("entry", ["A", "B", "C", "D", "E"])
    assert group_names(daf.axis_vector("entry"), [[1, 3], [2, 4]], prefix="G") == ["G1.61", "G2.95"]
    assert group_names(daf.axis_vector("entry"), [[1, 2], [3, 4]], prefix="G") == ["G1.43", "G2.04"]


def test_group_names_hash_is_utf8_sha256_byte_sum():
    names = ["αβ", "T cell", "", "x" * 1000]
    entries = [[0, 1], [2], [], [3, 0]]
    expected = []
    for index, group in enumerate(entries):
        digest = hashlib.sha256(b"".join(names[position].encode("utf-8") for position in group)).digest()
        expected.append(f"M{index + 1}.{sum(digest) % 100:02d}")
    assert group_names(np.array(names, dtype=object), entries, prefix="M") == expected
    assert group_names(names, [np.array([0, 1], dtype=np.uint8)], prefix="")[0] == expected[0][1:]
    assert group_names(names, [], prefix="M") == []


def test_compact_groups_in_place_first_appearance_order():
    labels = np.array([-1, 2, 0, 2, 0])  # Julia's [0, 3, 1, 3, 1]
    assert compact_groups(labels) == 2
    assert labels.tolist() == [-1, 0, 1, 0, 1]
    labels = np.array([9, -1, 4, 9, 7, 4], dtype=np.int32)
    assert compact_groups(labels) == 3
    assert labels.tolist() == [0, -1, 1, 0, 2, 1] and labels.dtype == np.int32
    unsigned = np.array([5, 5, 0, 200], dtype=np.uint8)  # (no "no group" in an unsigned array: every entry grouped)
    assert compact_groups(unsigned) == 3 and unsigned.tolist() == [0, 0, 1, 2]
    nothing = np.full(4, -1)
    assert compact_groups(nothing) == 0 and nothing.tolist() == [-1] * 4
    assert compact_groups(np.array([], dtype=np.int64)) == 0


def test_collect_group_members():
    assert [members.tolist() for members in collect_group_members(np.array([-1, 0, 1, 0, 1]))] == [[1, 3], [2, 4]]
    # A label no entry has still gets its (empty) group, as in Julia.
    members = collect_group_members([2, -1, 0, 2])
    assert [group.tolist() for group in members] == [[2], [], [0, 3]]
    assert all(group.dtype == np.int64 for group in members)
    assert collect_group_members(np.full(3, -1)) == [] and collect_group_members([]) == []


def test_round_trip_on_a_large_axis():
    rng = np.random.default_rng(26)
    labels = rng.integers(-1, 5000, size=1_000_000) * 7  # (-7: invalid; fixed below)
    labels[labels < 0] = -1
    start = time.perf_counter()
    count = compact_groups(labels)
    members = collect_group_members(labels)
    elapsed = time.perf_counter() - start
    assert count == len(members) == len(np.unique(labels[labels >= 0]))
    assert sum(len(group) for group in members) == int(np.sum(labels >= 0))
    for label in (0, count // 2, count - 1):
        assert np.array_equal(members[label], np.flatnonzero(labels == label))
    assert elapsed < 10, f"compact + collect of 1M entries took {elapsed:.1f} s"


@pytest.mark.parametrize(("labels", "error", "text"), [
    (np.array([0.0, 1.0]), pydaf.DafTypeError, "dtype float64 (expected integers"),
    (np.array(["a", "b"]), pydaf.DafTypeError, "expected integers"),
    (np.array([0, -2, 1]), pydaf.DafValueError, "invalid group index: -2\nat the position: 1"),
    (np.zeros((2, 2), dtype=np.int64), pydaf.DafTypeError, "2-dimensional"),
])
def test_hostile_group_labels(labels, error, text):
    for function in (compact_groups, collect_group_members):
        with pytest.raises(error) as caught:
            function(labels.copy())
        assert text in str(caught.value) and function.__name__ in str(caught.value)


def test_compact_groups_refuses_what_it_cannot_change_in_place():
    read_only = np.array([0, 1, 1])
    read_only.flags.writeable = False
    with pytest.raises(pydaf.DafValueError, match="read-only array"):
        compact_groups(read_only)
    assert read_only.tolist() == [0, 1, 1]
    with pytest.raises(pydaf.DafTypeError, match="a list"):
        compact_groups([0, 1, 1])  # type: ignore[arg-type]


def test_hostile_group_names_inputs():
    names = ["A", "B", "C"]
    with pytest.raises(pydaf.DafValueError,
                       match=r"invalid entry position: 3\nof the group: 1\n(.|\n)*positions are 0\.\.2"):
        group_names(names, [[0], [1, 3]], prefix="G")
    with pytest.raises(pydaf.DafValueError, match="invalid entry position: -1"):
        group_names(names, [[-1]], prefix="G")
    with pytest.raises(pydaf.DafTypeError, match="expected a list of integers, got float64"):
        group_names(names, [[0.0, 1.0]], prefix="G")
    with pytest.raises(pydaf.DafTypeError, match="expected a list of the entry positions of each group"):
        group_names(names, np.array([0, 1]), prefix="G")
    with pytest.raises(pydaf.DafTypeError, match="expected strings"):
        group_names([1, 2, 3], [[0]], prefix="G")
    with pytest.raises(pydaf.DafTypeError, match="a single string"):
        group_names("ABC", [[0]], prefix="G")
    with pytest.raises(pydaf.DafTypeError, match="prefix"):
        group_names(names, [[0]], prefix=1)  # type: ignore[arg-type]
    # numpy unicode arrays are names too
    assert group_names(np.array(names), [[0, 1]], prefix="G") == group_names(names, [[0, 1]], prefix="G")
