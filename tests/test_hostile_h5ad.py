"""Importing hostile ``.h5ad`` files (see ``tests/hostile_h5ad.py``): every damaged file gives a ``DafError`` with a
clear message (never an untyped exception or a crash: each import runs in a child process), damage the import can
repair is repaired, and a failed import leaves an existing destination exactly as it was."""

from __future__ import annotations

import os

import numpy as np
import pytest

import pydaf
from pydaf.interop import h5ad_as_daf
from pydaf.interop.convert import convert

from . import hostile_h5ad
from .soak import soak

anndata = pytest.importorskip("anndata")


def test_hostile_h5ad_files_give_daf_errors(tmp_path):
    """(With ``unsupported_handler="error"``, so elements of an unknown encoding are errors too.)"""
    cases = hostile_h5ad.damaged(tmp_path, hostile_h5ad.HOSTILE)
    result, outcomes = hostile_h5ad.run_child([path for _, path in cases], "error")
    assert result.returncode == 0, f"the import crashed (status {result.returncode}) at:\n{result.stderr[-3000:]}"
    wrong = {what: outcomes[path] for what, path in cases if not outcomes[path].startswith("Daf")}
    assert wrong == {}
    for what, path in cases:  # each message names the file (or, reported as unsupported, the element), briefly
        message = outcomes[path]
        assert (path in message or "in AnnData for the daf data" in message) and len(message) < 2000, (what, message)


def test_error_messages_name_the_element_and_the_file(tmp_path):
    cases = dict(hostile_h5ad.damaged(tmp_path, {name: hostile_h5ad.HOSTILE[name] for name in (
        "X indices past the columns", "category codes past the categories", "obsp CSC indices negative",
        "X shape of 3 values")}))
    with pytest.raises(pydaf.DafFormatError) as raised:
        h5ad_as_daf(cases["X indices past the columns"], progress=False, unsupported_handler="ignore")
    assert str(raised.value).startswith("invalid indices of the AnnData sparse matrix: X\nfound: indices[3] = 4\n"
                                        "expected: 0..3\n")
    assert f"in the AnnData file: {cases['X indices past the columns']}" in str(raised.value)
    with pytest.raises(pydaf.DafFormatError) as raised:
        h5ad_as_daf(cases["category codes past the categories"], progress=False, unsupported_handler="ignore")
    assert str(raised.value).startswith("can't read the AnnData element: /obs/type\nin the AnnData file: ")
    assert "categorical codes in 0..7 (expected -1..2, for 3 categories)" in str(raised.value)
    with pytest.raises(pydaf.DafFormatError,
                       match="invalid indices of the AnnData sparse matrix: obsp/connectivities"):
        h5ad_as_daf(cases["obsp CSC indices negative"], progress=False, unsupported_handler="ignore")
    with pytest.raises(pydaf.DafFormatError,
                       match=r"(?s)can't read the AnnData element: /X\n.*invalid shape attribute"):
        h5ad_as_daf(cases["X shape of 3 values"], progress=False, unsupported_handler="ignore")


def test_repairable_damage_imports_with_the_right_values(tmp_path):
    expected = tmp_path / "base.h5ad"
    hostile_h5ad.write_base(str(expected))
    X = anndata.read_h5ad(expected).X.toarray()
    cases = hostile_h5ad.damaged(tmp_path, hostile_h5ad.READABLE)
    result, outcomes = hostile_h5ad.run_child([path for _, path in cases], "ignore")
    assert result.returncode == 0, result.stderr[-3000:]
    for what, path in cases:
        assert outcomes[path] == f"ok: {X.tolist()}", what
    unsorted = dict(cases)["X rows out of order"]
    daf = h5ad_as_daf(unsorted, progress=False, unsupported_handler="ignore")
    stored = daf.get_stored_matrix("var", "obs", "X", relayout=False)
    assert pydaf.check_daf(daf) == [] and np.all(np.diff(stored.rowval[:int(stored.colptr[1]) - 1].astype(int)) > 0)


@pytest.fixture(params=["h5df", "h5dfs", "files"])
def existing(request, tmp_path):
    """A destination path that already holds a Daf data set (and, for h5dfs, another data set in the same file)."""
    target = {"h5df": str(tmp_path / "out.h5df"), "h5dfs": f"{tmp_path}/out.h5dfs#/cells",
              "files": str(tmp_path / "out.daf")}[request.param]
    if request.param == "h5dfs":
        pydaf.H5df(f"{tmp_path}/out.h5dfs#/other", "w").set_scalar("keep", "me")
    daf = pydaf.open_daf(target, "w", name="old!").set_scalar("version", 1).add_axis("cell", ["A", "B"])
    daf.set_vector("cell", "age", [10, 20])
    daf.format.format_close()
    return target


def _snapshot(target: str, folder) -> tuple:
    daf = pydaf.open_daf(target, "r", name="snapshot!")
    files = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if "case" not in path.name)
    return daf.description(), files, pydaf.check_daf(daf)


@pytest.mark.parametrize("damage", ["X indices past the columns", "obs column too long", "file truncated to 95%"])
def test_a_failed_import_leaves_the_destination_as_it_was(tmp_path, existing, damage):
    (_, path), = hostile_h5ad.damaged(tmp_path, {damage: hostile_h5ad.HOSTILE[damage]})
    before = _snapshot(existing, tmp_path)
    with pytest.raises(pydaf.DafError):  # a damage found reading, else DafExistsError: not replaced unless asked
        h5ad_as_daf(path, existing, progress=False, unsupported_handler="ignore")
    assert _snapshot(existing, tmp_path) == before
    with pytest.raises(pydaf.DafFormatError):  # asked (convert: h5ad_as_daf into the data set built aside)
        convert(path, existing, overwrite=True, unsupported="ignore", progress=False)
    assert _snapshot(existing, tmp_path) == before
    if "#/" in existing:
        assert pydaf.H5df(existing.replace("#/cells", "#/other"), "r").get_scalar("keep") == "me"
        with __import__("h5py").File(existing.split("#")[0], "r") as file:
            assert sorted(file.keys()) == ["cells", "other"]  # no temporary group left


def test_an_interrupted_import_leaves_the_destination_as_it_was(tmp_path, existing, monkeypatch):
    from pydaf.interop import content as interop

    path = str(tmp_path / "case.h5ad")
    hostile_h5ad.write_base(path)
    before = _snapshot(existing, tmp_path)

    def interrupt(*_arguments, **_options):
        raise KeyboardInterrupt

    monkeypatch.setattr(interop, "_write_member", interrupt)
    with pytest.raises(KeyboardInterrupt):
        convert(path, existing, overwrite=True, unsupported="ignore", progress=False)
    assert _snapshot(existing, tmp_path) == before


def test_a_complete_import_replaces_the_destination(tmp_path, existing):
    path = str(tmp_path / "case.h5ad")
    hostile_h5ad.write_base(path)
    convert(path, existing, overwrite=True, unsupported="ignore", progress=False)
    daf = pydaf.open_daf(existing, "r")
    assert daf.axes_set() == {"obs", "var"} and not daf.has_scalar("version")
    reopened = pydaf.open_daf(existing, "r")
    assert reopened.get_scalar("title") == "hostile" and pydaf.check_daf(reopened) == []
    leftovers = [entry.name for entry in tmp_path.rglob(".*") if entry.name != ".daf.lock"]  # (FilesDaf's lock)
    assert leftovers == []


def test_random_garbage_never_crashes_nor_raises_untyped_errors(tmp_path):
    """64 random bytes written at a random place of a valid h5ad: a DafError, or an import (of whatever values the
    damaged bytes now hold). ``PYDAF_SOAK`` scales the number of files (20 by default)."""
    paths = []
    for seed in range(round(soak(200, 20))):
        path = str(tmp_path / f"garbage{seed}.h5ad")
        hostile_h5ad.write_base(path)
        generator = np.random.default_rng(seed)
        with open(path, "r+b") as file:
            file.seek(int(generator.integers(0, os.path.getsize(path) - 64)))
            file.write(generator.integers(0, 256, 64, dtype=np.uint8).tobytes())
        paths.append(path)
    result, outcomes = hostile_h5ad.run_child(paths, "error")
    assert result.returncode == 0, f"the import crashed (status {result.returncode}) at:\n{result.stderr[-3000:]}"
    assert len(outcomes) == len(paths)
    assert [outcome for outcome in outcomes.values() if not outcome.startswith(("ok", "Daf"))] == []
