"""Chains: later members override earlier ones; writes go to the last member."""

from __future__ import annotations

import numpy as np
import pytest

import pydaf


def test_later_members_override_and_writes_go_last():
    base = pydaf.MemoryDaf(name="base!").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
    base.set_scalar("version", 1)
    top = pydaf.MemoryDaf(name="top!").set_scalar("version", 2)
    chain = pydaf.chain_writer([base, top], name="chain!")
    assert chain.get_scalar("version") == 2 and chain.get_vector("cell", "age").tolist() == [1, 2]
    chain.set_vector("cell", "age", [5, 6], overwrite=True)
    assert top.axis_vector("cell").tolist() == ["A", "B"]  # the axis was brought into the last member
    assert top.get_vector("cell", "age").tolist() == [5, 6] and base.get_vector("cell", "age").tolist() == [1, 2]
    assert chain.get_vector("cell", "age").tolist() == [5, 6]
    with pytest.raises(pydaf.DafValueError, match="because it exists in the earlier: base!"):
        chain.delete_vector("cell", "age")
    reader = pydaf.chain_reader([base, top], name="reader!")
    assert not hasattr(reader, "set_vector") and reader.get_scalar("version") == 2
    assert "type: ReadOnly Chain\nchain:\n- MemoryDaf base!\n- MemoryDaf top!\n" in reader.description()


def test_members_must_agree_on_axes():
    first = pydaf.MemoryDaf(name="first!").add_axis("cell", ["A", "B"])
    second = pydaf.MemoryDaf(name="second!").add_axis("cell", ["B", "A"])
    with pytest.raises(pydaf.DafValueError, match="different entry#1: B\nfor the axis: cell"):
        pydaf.chain_reader([first, second])
    with pytest.raises(pydaf.DafValueError, match="read-only final data"):
        pydaf.chain_writer([first, first.read_only()])
    assert np.array_equal(pydaf.chain_reader([first]).axis_vector("cell"), ["A", "B"])
