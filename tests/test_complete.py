"""Persistent chains: ``complete_chain`` records a base in a data set on disk, ``complete_daf`` reopens the whole chain
from its leaf (real FilesDaf directories and H5df files, reopened from disk)."""

from __future__ import annotations

import gc
import json
import os

import numpy as np
import pytest

import pydaf


def _cells(path: str) -> pydaf.DafWriter:
    daf = pydaf.open_daf(path, "w", name="cells!")
    daf.set_scalar("organism", "human").add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "age", [1, 5, 7, 2]).set_matrix("cell", "gene", "UMIs", np.arange(8).reshape(4, 2))
    return daf


@pytest.mark.parametrize(("base_name", "new_name"), [("cells.daf", "metacells.daf"), ("cells.h5df", "more.h5df"),
                                                     ("cells.h5df", "deeper/metacells.daf"),
                                                     ("group.h5dfs#/cells", "deeper/group.h5dfs#/metacells")])
def test_a_chain_is_recorded_and_reopened(tmp_path, base_name, new_name):
    os.makedirs(tmp_path / "deeper", exist_ok=True)
    base = _cells(f"{tmp_path}/{base_name}")
    new = pydaf.open_daf(f"{tmp_path}/{new_name}", "w", name="metacells!")
    chain = pydaf.complete_chain(base_daf=base, new_daf=new, name="chain!")
    assert chain.name == "chain!" and isinstance(chain, pydaf.DafWriter)
    chain.set_vector("cell", "metacell", ["M1", "M1", "M2", ""])
    recorded = new.get_scalar("base_daf_repository")
    assert not os.path.isabs(recorded)
    assert os.path.normpath(os.path.join(tmp_path, os.path.dirname(new_name.partition("#")[0]),
                                         recorded.partition("#")[0])) == os.path.normpath(
        f"{tmp_path}/{base_name.partition('#')[0]}")
    assert not new.has_scalar("base_daf_view") and not base.has_vector("cell", "metacell")
    del chain, new, base

    reopened = pydaf.complete_daf(f"{tmp_path}/{new_name}", name="again!")
    assert reopened.name == "again!.complete" and not isinstance(reopened, pydaf.DafWriter)
    assert reopened.get_vector("cell", "metacell").tolist() == ["M1", "M1", "M2", ""]
    assert reopened.get_vector("cell", "age").tolist() == [1, 5, 7, 2]
    assert reopened.get_scalar("organism") == "human"
    assert reopened.complete_path() == os.path.abspath(f"{tmp_path}/{new_name.partition('#')[0]}") + (
        "#" + new_name.partition("#")[2] if "#" in new_name else "")

    del reopened
    gc.collect()  # an HDF5 file open read-only in this process can't be opened for writing
    writable = pydaf.complete_daf(f"{tmp_path}/{new_name}", "r+")
    writable.set_vector("gene", "is_marker", [True, False])
    assert pydaf.open_daf(f"{tmp_path}/{new_name}").get_vector("gene", "is_marker").tolist() == [True, False]
    assert not pydaf.open_daf(f"{tmp_path}/{base_name}").has_vector("gene", "is_marker")
    with pytest.raises(pydaf.DafValueError, match="because it exists in the earlier"):
        writable.delete_vector("cell", "age")


def test_a_moved_tree_still_opens_and_an_absolute_record_does_not_move(tmp_path):
    base = _cells(f"{tmp_path}/root/cells.daf")
    relative = pydaf.FilesDaf(tmp_path / "root" / "relative.daf", "w")
    pydaf.complete_chain(base_daf=base, new_daf=relative)
    absolute = pydaf.FilesDaf(tmp_path / "root" / "absolute.daf", "w")
    pydaf.complete_chain(base_daf=base, new_daf=absolute, absolute=True)
    assert absolute.get_scalar("base_daf_repository") == str(tmp_path / "root" / "cells.daf")
    del base, relative, absolute
    os.rename(tmp_path / "root", tmp_path / "moved")
    assert pydaf.complete_daf(tmp_path / "moved" / "relative.daf").get_scalar("organism") == "human"
    with pytest.raises(pydaf.DafError):
        pydaf.complete_daf(tmp_path / "moved" / "absolute.daf")


def test_a_view_of_the_base_is_recorded_and_applied_again(tmp_path):
    base = _cells(f"{tmp_path}/cells.h5df")
    new = pydaf.FilesDaf(tmp_path / "obs.daf", "w", name="obs!")
    axes = [("obs", "@ cell [ age > 1 ]"), ("var", "gene")]
    data = [(pydaf.ALL_SCALARS, None), (("obs", "age"), "="), (("obs", "var", "X"), ":: UMIs")]
    chain = pydaf.complete_chain(base_daf=base, new_daf=new, axes=axes, data=data)
    assert json.loads(new.get_scalar("base_daf_view")) == {
        "axes": [{"obs": "@ cell [ age > 1 ]"}, {"var": "gene"}],
        "data": [{"*": None}, {'("obs", "age")': "="}, {'("obs", "var", "X")': ":: UMIs"}]}
    chain.set_vector("obs", "type", ["T", "T", "B"])
    expected = chain.description()
    expected = expected[expected.index("scalars:"):]
    del chain, new, base

    reopened = pydaf.complete_daf(tmp_path / "obs.daf", name="obs")
    assert reopened.axes_set() == {"obs", "var"}
    assert reopened.scalars_set() == {"base_daf_repository", "base_daf_view", "base_daf_fingerprint"}
    assert reopened.get_vector("obs", "type").tolist() == ["T", "T", "B"]
    np.testing.assert_array_equal(reopened.get_matrix("obs", "var", "X"), np.arange(8).reshape(4, 2)[1:])
    text = reopened.description()
    assert text[text.index("scalars:"):] == expected
    view = pydaf.complete_daf(tmp_path / "obs.daf", name="deep").description(deep=True)
    assert "- name: deep.view_0\n  type: View\n" in view

    # Recording again without a view forgets the old one.
    again = pydaf.FilesDaf(tmp_path / "obs.daf", "r+")
    pydaf.complete_chain(base_daf=pydaf.H5df(tmp_path / "cells.h5df", "r"), new_daf=again)
    assert not again.has_scalar("base_daf_view")
    assert pydaf.complete_daf(tmp_path / "obs.daf").axes_set() == {"cell", "gene", "obs"}


def test_a_three_level_chain(tmp_path):
    base = _cells(f"{tmp_path}/cells.daf")
    middle = pydaf.H5df(tmp_path / "middle.h5df", "w", name="middle!")
    pydaf.complete_chain(base_daf=base, new_daf=middle, data=[pydaf.VIEW_ALL_VECTORS, pydaf.VIEW_ALL_MATRICES])
    middle.add_axis("cell", ["A", "B", "C", "D"]).set_vector("cell", "score", [0.1, 0.2, 0.3, 0.4])
    chain = pydaf.complete_daf(tmp_path / "middle.h5df", "r+")
    leaf = pydaf.FilesDaf(tmp_path / "leaf.daf", "w", name="leaf!")
    pydaf.complete_chain(base_daf=chain, new_daf=leaf).set_vector("cell", "flag", [True, False, True, False])
    del base, middle, chain, leaf

    reopened = pydaf.complete_daf(tmp_path / "leaf.daf")
    assert reopened.vectors_set("cell") == {"age", "score", "flag"}
    assert "organism" not in reopened.scalars_set()  # hidden by the middle's view of the base
    assert reopened.complete_path() == str(tmp_path / "leaf.daf")


def test_invalid_records_and_arguments(tmp_path):
    base = _cells(f"{tmp_path}/cells.daf")
    memory = pydaf.MemoryDaf(name="memory!")
    new = pydaf.FilesDaf(tmp_path / "new.daf", "w", name="new!")
    with pytest.raises(pydaf.DafValueError, match=r"^the new daf data: memory!\nhas no path"):
        pydaf.complete_chain(base_daf=base, new_daf=memory)
    with pytest.raises(pydaf.DafValueError, match=r"^the base daf data: memory!\nhas no path"):
        pydaf.complete_chain(base_daf=memory, new_daf=new)
    with pytest.raises(pydaf.DafModeError, match=r"^read-only new_daf"):
        pydaf.complete_chain(base_daf=base, new_daf=pydaf.FilesDaf(tmp_path / "new.daf", "r"))
    with pytest.raises(pydaf.DafValueError, match="invalid wildcard"):
        pydaf.complete_chain(base_daf=base, new_daf=new, data=[("*", "organism")])
    assert new.scalars_set() == set()  # nothing written by a failed call
    with pytest.raises(pydaf.DafModeError, match=r"^invalid mode: w\nfor complete_daf"):
        pydaf.complete_daf(tmp_path / "new.daf", "w")

    new.set_scalar("base_daf_repository", "new.daf")
    with pytest.raises(pydaf.DafFormatError, match=r"^cyclic base_daf_repository"):
        pydaf.complete_daf(tmp_path / "new.daf")
    new.set_scalar("base_daf_repository", 7, overwrite=True)
    with pytest.raises(pydaf.DafFormatError, match=r"^invalid base_daf_repository: 7"):
        pydaf.complete_daf(tmp_path / "new.daf")
    new.set_scalar("base_daf_repository", "cells.daf", overwrite=True)
    for text, why in (("[1, 2]", "expected a JSON object"), ("{", "not JSON"), ('{"rows": []}', "unknown view"),
                      ('{"axes": {"cell": "="}}', "expected a list")):
        new.set_scalar("base_daf_view", text, overwrite=True)
        with pytest.raises(pydaf.DafFormatError, match=f"^invalid base_daf_view: .*\n\\({why}"):
            pydaf.complete_daf(tmp_path / "new.daf")
    new.set_scalar("base_daf_view", '{"axes": [{"cell": 3}]}', overwrite=True)
    with pytest.raises(pydaf.DafValueError, match="invalid ViewAxis"):
        pydaf.complete_daf(tmp_path / "new.daf")
    new.set_scalar("base_daf_view", '{"axes": [{"cell": "="}], "data": [{"(\\"cell\\", \\"age\\")": "="}]}',
                   overwrite=True)
    assert pydaf.complete_daf(tmp_path / "new.daf").vectors_set("cell") == {"age"}
