"""A persistent chain notices a replaced base: ``complete_chain`` records the identity of its base (the scalar
``base_daf_fingerprint``: the base's axes and a digest of their entries) and ``complete_daf`` refuses a base that is no
longer that data set, while appending to the base, moving the chain's folder and old or Julia-written chains (without
the record) keep working. Real files of every persistent format, reopened from disk."""

from __future__ import annotations

import gc
import json
import os
import shutil

import numpy as np
import pytest

import pydaf

# The bases: every persistent format (and the groups of the multi-data-set files), and whether writing a new data set
# at the same path with mode "w" replaces it (the append-only ZIP archives can't truncate one of their groups).
BASES = [("cells.h5df", True), ("cells.daf", True), ("cells.daf.zarr", True), ("cells.daf.zarr.zip", True),
         ("cells.daf.zip", True), ("cells.h5dfs#/cells", True), ("cells.dafs.zip#/cells", False),
         ("cells.dafs.zarr.zip#/cells", False)]
LEAVES = ["more.daf", "more.h5df"]
REPLACEMENTS = [(base, leaf, method) for index, (base, rewritable) in enumerate(BASES)
                for leaf in [LEAVES[index % 2]] for method in (["rewrite", "replace"] if rewritable else ["replace"])]


def _create(path: str, cells: list[str], *, name: str = "cells!") -> pydaf.DafWriter:
    mode = "w+" if "#" in path and "zip#" in path else "w"  # a group of an existing archive can only be added
    daf = pydaf.open_daf(path, mode, name=name)
    daf.set_scalar("organism", "human").add_axis("cell", cells).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "age", np.arange(len(cells), dtype=np.int64))
    return daf


def _build_chain(folder: str, base_name: str, leaf_name: str) -> None:
    base = _create(f"{folder}/{base_name}", ["A", "B", "C", "D"])
    leaf = pydaf.open_daf(f"{folder}/{leaf_name}", "w", name="leaf!")
    chain = pydaf.complete_chain(base_daf=base, new_daf=leaf)
    # The leaf holds an axis of its own only: the chain's own check of shared axes can't see a replaced base.
    chain.add_axis("metacell", ["M1", "M2"]).set_vector("metacell", "size", [3, 1])
    del chain, leaf, base
    gc.collect()  # an HDF5 file open in this process can't be opened again for writing


def _file_of(path: str) -> str:
    return path.partition("#")[0]


def _replace_base(folder: str, base_name: str, method: str, cells: list[str]) -> None:
    """Put another data set at the base's path: written there anew ("rewrite"), or written elsewhere and moved onto
    the base's file or directory ("replace", as ``os.replace`` or a copy by a user would)."""
    if method == "rewrite":
        _create(f"{folder}/{base_name}", cells, name="other!")
    else:
        os.makedirs(f"{folder}/elsewhere")
        _create(f"{folder}/elsewhere/{base_name}", cells, name="other!")
        gc.collect()
        target, source = _file_of(f"{folder}/{base_name}"), _file_of(f"{folder}/elsewhere/{base_name}")
        if os.path.isdir(target):
            shutil.rmtree(target)
            os.rename(source, target)
        else:
            os.replace(source, target)
    gc.collect()


def _complete_path(folder: str, name: str) -> str:
    file, separator, group = name.partition("#")
    return os.path.abspath(f"{folder}/{file}") + separator + group


@pytest.mark.parametrize(("base_name", "leaf_name", "method"), REPLACEMENTS)
def test_a_replaced_base_is_refused(tmp_path, base_name, leaf_name, method):
    _build_chain(str(tmp_path), base_name, leaf_name)
    assert pydaf.complete_daf(f"{tmp_path}/{leaf_name}").get_vector("cell", "age").tolist() == [0, 1, 2, 3]
    gc.collect()
    _replace_base(str(tmp_path), base_name, method, ["E", "F", "G", "H"])  # as many cells, other ones

    with pytest.raises(pydaf.DafError) as raised:  # (the code before the record opened the other data set silently)
        pydaf.complete_daf(f"{tmp_path}/{leaf_name}")
    assert isinstance(raised.value, pydaf.DafChainError) and isinstance(raised.value, pydaf.DafFormatError)
    message = str(raised.value)
    assert message.startswith(f"changed base daf data: {_complete_path(str(tmp_path), base_name)}\n")
    assert f"\nat: {_complete_path(str(tmp_path), leaf_name)}\n(its base_daf_repository: {base_name})\n" in message
    assert "\n- the axis: cell has different entries (of the same number: 4)\n" in message
    assert "axis: gene" not in message  # the same genes: only what changed is named
    assert "accept_changed_base=True" in message and "complete_chain(base_daf=open_daf(" in message
    gc.collect()

    # On purpose: opened as it is, unchecked.
    accepted = pydaf.complete_daf(f"{tmp_path}/{leaf_name}", accept_changed_base=True)
    assert accepted.axis_vector("cell").tolist() == ["E", "F", "G", "H"]
    assert accepted.get_vector("metacell", "size").tolist() == [3, 1]


def test_the_changes_are_named_and_the_base_can_be_recorded_again(tmp_path):
    _build_chain(str(tmp_path), "cells.h5df", "more.daf")
    base = pydaf.H5df(tmp_path / "cells.h5df", "w", name="other!")
    base.add_axis("cell", ["A", "B", "C"]).add_axis("donor", ["N1"])  # fewer cells, no genes, a new axis
    del base
    gc.collect()
    with pytest.raises(pydaf.DafError, match=r"\n- the axis: cell has 3 entries instead of 4\n"
                                             r"- the axis: gene \(of 2 entries\) is missing\n") as raised:
        pydaf.complete_daf(tmp_path / "more.daf")
    assert isinstance(raised.value, pydaf.DafChainError)

    # Recording the new base (the suggested call) makes the chain whole again, with a new identity.
    before = pydaf.FilesDaf(tmp_path / "more.daf", "r").get_scalar("base_daf_fingerprint")
    pydaf.complete_chain(base_daf=pydaf.open_daf(tmp_path / "cells.h5df"),
                         new_daf=pydaf.open_daf(tmp_path / "more.daf", "r+"))
    after = pydaf.FilesDaf(tmp_path / "more.daf", "r").get_scalar("base_daf_fingerprint")
    assert json.loads(after)["axes"].keys() == {"cell", "donor"} and after != before
    gc.collect()
    chain = pydaf.complete_daf(tmp_path / "more.daf")
    assert chain.axis_vector("cell").tolist() == ["A", "B", "C"]
    assert chain.get_vector("metacell", "size").tolist() == [3, 1]


@pytest.mark.parametrize(("base_name", "rewritable"), BASES)
def test_appending_to_the_base_keeps_the_chain(tmp_path, base_name, rewritable):
    _build_chain(str(tmp_path), base_name, "more.h5df")
    base = pydaf.open_daf(f"{tmp_path}/{base_name}", "r+")
    base.set_vector("cell", "score", [0.5, 1.5, 2.5, 3.5]).set_scalar("version", 2)
    base.add_axis("donor", ["N1", "N2"]).set_vector("donor", "sex", ["F", "M"])
    base.set_matrix("cell", "gene", "UMIs", np.arange(8, dtype=np.uint16).reshape(4, 2))
    del base
    gc.collect()

    chain = pydaf.complete_daf(tmp_path / "more.h5df")
    assert chain.get_vector("cell", "score").tolist() == [0.5, 1.5, 2.5, 3.5]
    assert chain.get_vector("donor", "sex").tolist() == ["F", "M"]
    assert chain.get_matrix("cell", "gene", "UMIs").tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert chain.get_vector("metacell", "size").tolist() == [3, 1]


@pytest.mark.parametrize(("base_name", "rewritable"), BASES)
def test_a_chain_moved_with_its_base_still_opens(tmp_path, base_name, rewritable):
    os.makedirs(tmp_path / "here")
    _build_chain(f"{tmp_path}/here", base_name, "more.daf")
    shutil.copytree(tmp_path / "here", tmp_path / "there")  # another folder (or machine): the paths are relative
    shutil.rmtree(tmp_path / "here")
    chain = pydaf.complete_daf(tmp_path / "there" / "more.daf")
    assert chain.get_vector("cell", "age").tolist() == [0, 1, 2, 3]
    assert chain.get_vector("metacell", "size").tolist() == [3, 1]
    assert chain.complete_path() == str(tmp_path / "there" / "more.daf")


def test_a_base_rewritten_with_the_same_axes_is_the_same_base(tmp_path):
    _build_chain(str(tmp_path), "cells.h5df", "more.daf")
    pydaf.repack(str(tmp_path / "cells.h5df"), str(tmp_path / "packed.h5df"))
    os.replace(tmp_path / "packed.h5df", tmp_path / "cells.h5df")
    assert pydaf.complete_daf(tmp_path / "more.daf").get_vector("cell", "age").tolist() == [0, 1, 2, 3]


def test_a_moved_copy_and_its_replaced_original_are_told_apart(tmp_path):
    os.makedirs(tmp_path / "here")
    _build_chain(f"{tmp_path}/here", "cells.daf", "more.h5df")
    shutil.copytree(tmp_path / "here", tmp_path / "there")
    _replace_base(f"{tmp_path}/here", "cells.daf", "rewrite", ["A", "B", "C", "E"])
    assert pydaf.complete_daf(tmp_path / "there" / "more.h5df").axis_vector("cell").tolist() == ["A", "B", "C", "D"]
    with pytest.raises(pydaf.DafError, match=r"- the axis: cell has different entries \(of the same number: 4"):
        pydaf.complete_daf(tmp_path / "here" / "more.h5df")


def test_chains_without_the_record_open_unchecked(tmp_path):
    # As Julia (and pydaf before the record) writes a chain: base_daf_repository only.
    _create(f"{tmp_path}/cells.h5df", ["A", "B", "C", "D"])
    gc.collect()
    leaf = pydaf.FilesDaf(tmp_path / "julia.daf", "w").set_scalar("base_daf_repository", "cells.h5df")
    leaf.add_axis("metacell", ["M1", "M2"]).set_vector("metacell", "size", [3, 1])
    assert pydaf.complete_daf(tmp_path / "julia.daf").axis_vector("cell").tolist() == ["A", "B", "C", "D"]
    gc.collect()
    _replace_base(str(tmp_path), "cells.h5df", "rewrite", ["E", "F"])
    assert pydaf.complete_daf(tmp_path / "julia.daf").axis_vector("cell").tolist() == ["E", "F"]  # nothing to check

    # A record left from another base_daf_repository (recorded again by a program that keeps other scalars, as Julia's
    # complete_chain! after deleting the old records would) describes another base: it is not applied.
    _build_chain(str(tmp_path), "cells.h5df", "more.daf")
    _create(f"{tmp_path}/other.h5df", ["X", "Y", "Z"])
    gc.collect()
    leaf = pydaf.FilesDaf(tmp_path / "more.daf", "r+")
    leaf.set_scalar("base_daf_repository", "other.h5df", overwrite=True)
    assert pydaf.complete_daf(tmp_path / "more.daf").axis_vector("cell").tolist() == ["X", "Y", "Z"]


def test_the_records_julia_reads_are_unchanged(tmp_path):
    _build_chain(str(tmp_path), "cells.h5df", "more.daf")
    leaf = pydaf.FilesDaf(tmp_path / "more.daf", "r")
    assert leaf.scalars_set() == {"base_daf_repository", "base_daf_fingerprint"}
    assert leaf.get_scalar("base_daf_repository") == "cells.h5df"
    recorded = json.loads(leaf.get_scalar("base_daf_fingerprint"))
    assert recorded["base_daf_repository"] == "cells.h5df"
    assert {axis: entry["entries"] for axis, entry in recorded["axes"].items()} == {"cell": 4, "gene": 2}
    assert all(len(entry["sha256"]) == 64 for entry in recorded["axes"].values())


def test_an_invalid_record_is_refused(tmp_path):
    _build_chain(str(tmp_path), "cells.h5df", "more.daf")
    leaf = pydaf.FilesDaf(tmp_path / "more.daf", "r+")
    for text, why in ((7, "expected a JSON string"), ("{", "not JSON"), ('{"axes": []}', "expected {")):
        leaf.set_scalar("base_daf_fingerprint", text, overwrite=True)
        with pytest.raises(pydaf.DafFormatError, match=f"^invalid base_daf_fingerprint: .*\n\\({why}"):
            pydaf.complete_daf(tmp_path / "more.daf")
    assert pydaf.complete_daf(tmp_path / "more.daf", accept_changed_base=True).axis_vector("gene").tolist() == [
        "X", "Y"]


def test_a_viewed_base_and_a_deeper_base_are_checked(tmp_path):
    base = _create(f"{tmp_path}/cells.h5df", ["A", "B", "C", "D"])
    middle = pydaf.FilesDaf(tmp_path / "obs.daf", "w", name="obs!")
    view = pydaf.complete_chain(base_daf=base, new_daf=middle, axes=[("obs", "@ cell [ age > 1 ]"), ("var", "gene")],
                                data=[(("obs", "age"), "=")])
    view.set_vector("obs", "type", ["T", "B"])
    del base, middle, view
    gc.collect()
    chain = pydaf.complete_daf(tmp_path / "obs.daf", "r+")
    leaf = pydaf.H5df(tmp_path / "leaf.h5df", "w", name="leaf!")
    pydaf.complete_chain(base_daf=chain, new_daf=leaf).set_vector("obs", "flag", [True, False])
    # The leaf records the axes of its base as reopened (the view's obs and var), not those of the base's base.
    assert json.loads(leaf.get_scalar("base_daf_fingerprint"))["axes"].keys() == {"obs", "var"}
    del chain, leaf
    gc.collect()
    assert pydaf.complete_daf(tmp_path / "leaf.h5df").get_vector("obs", "age").tolist() == [2, 3]
    gc.collect()

    _replace_base(str(tmp_path), "cells.h5df", "rewrite", ["A", "B", "C", "E"])
    with pytest.raises(pydaf.DafError) as raised:
        pydaf.complete_daf(tmp_path / "leaf.h5df")
    assert isinstance(raised.value, pydaf.DafChainError)
    message = str(raised.value)
    assert message.startswith(f"changed base daf data: {tmp_path}/cells.h5df\n")  # the view's base, not the view
    assert f"\nat: {tmp_path}/obs.daf\n" in message and "- the axis: cell has different entries" in message
