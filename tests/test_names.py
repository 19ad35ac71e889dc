"""Hostile names on every entry point of every backend: refused by the reader/writer layer with a ``DafNameError``
before any backend sees them, so nothing outside (or inside) the data set is touched; names a file written elsewhere
may legitimately hold stay readable; axis entries are not names."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import pydaf
from pydaf import SparseMatrixCSC
from pydaf.errors import DafQueryError
from pydaf.queries.tokens import escape_value

HOSTILE = ["", ".", "..", "../x", "../../victim", "a/b", "/daf", "/b/scalars/x", "a\\b", "nul\0", "/", 3, None]


@pytest.fixture(params=["memory", "h5df", "h5dfs", "files"])
def store(request, tmp_path):
    """A writable data set (cells x genes, a vector, a sparse matrix, a scalar) and a file outside it."""
    victim = tmp_path / "victim"
    victim.write_text("must survive")
    kind = request.param
    if kind == "memory":
        daf = pydaf.MemoryDaf(name="memory!")
    elif kind == "h5df":
        daf = pydaf.H5df(tmp_path / "data.h5df", "w", name="h5df!")
    elif kind == "h5dfs":
        pydaf.H5df(f"{tmp_path}/data.h5dfs#/b", "w").set_scalar("x", "the other data set's")
        daf = pydaf.H5df(f"{tmp_path}/data.h5dfs#/a", "w", name="h5dfs!")
    else:
        daf = pydaf.FilesDaf(tmp_path / "data" / "set.daf", "w", name="files!")
    daf.set_scalar("x", 1).add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "age", [1, 2, 3])
    daf.set_matrix("cell", "gene", "UMIs", SparseMatrixCSC((3, 2), np.array([1, 2, 3]), np.array([2, 1]),
                                                           np.array([5, 6])))
    return daf, victim


def _state(daf: pydaf.DafWriter, tmp_path) -> tuple:
    """Everything observable: the data set's description and every file under the test folder."""
    files = sorted((str(path.relative_to(tmp_path)), path.stat().st_size) for path in tmp_path.rglob("*"))
    return daf.description(), files


def _calls(daf: pydaf.DafWriter, name: object) -> list:
    """Every entry point that takes a name, with ``name`` in each position (entries and values are valid)."""
    calls = [
        ("has_scalar", lambda: daf.has_scalar(name)),
        ("get_scalar", lambda: daf.get_scalar(name)),
        ("get_scalar default", lambda: daf.get_scalar(name, default=None)),
        ("set_scalar", lambda: daf.set_scalar(name, 1)),
        ("delete_scalar", lambda: daf.delete_scalar(name)),
        ("delete_scalar quiet", lambda: daf.delete_scalar(name, must_exist=False)),
        ("has_axis", lambda: daf.has_axis(name)),
        ("add_axis", lambda: daf.add_axis(name, ["q"])),
        ("delete_axis", lambda: daf.delete_axis(name, must_exist=False)),
        ("axis_length", lambda: daf.axis_length(name)),
        ("axis_vector", lambda: daf.axis_vector(name)),
        ("axis_vector default", lambda: daf.axis_vector(name, default=None)),
        ("axis_dict", lambda: daf.axis_dict(name)),
        ("axis_indices", lambda: daf.axis_indices(name, ["A"])),
        ("axis_entries", lambda: daf.axis_entries(name)),
        ("vectors_set", lambda: daf.vectors_set(name)),
        ("has_vector axis", lambda: daf.has_vector(name, "age")),
        ("has_vector name", lambda: daf.has_vector("cell", name)),
        ("get_vector axis", lambda: daf.get_vector(name, "age")),
        ("get_vector name", lambda: daf.get_vector("cell", name)),
        ("get_vector default", lambda: daf.get_vector("cell", name, default=0)),
        ("get_stored_vector", lambda: daf.get_stored_vector("cell", name, default=None)),
        ("get_pd_vector", lambda: daf.get_pd_vector("cell", name, default=None)),
        ("set_vector axis", lambda: daf.set_vector(name, "age", [1])),
        ("set_vector name", lambda: daf.set_vector("cell", name, [1, 2, 3])),
        ("delete_vector axis", lambda: daf.delete_vector(name, "age", must_exist=False)),
        ("delete_vector name", lambda: daf.delete_vector("cell", name, must_exist=False)),
        ("empty_dense_vector", lambda: daf.empty_dense_vector("cell", name, "Int8").__enter__()),
        ("empty_sparse_vector", lambda: daf.empty_sparse_vector("cell", name, "Int8", 0).__enter__()),
        ("matrices_set rows", lambda: daf.matrices_set(name, "gene")),
        ("matrices_set columns", lambda: daf.matrices_set("cell", name)),
        ("has_matrix rows", lambda: daf.has_matrix(name, "gene", "UMIs")),
        ("has_matrix columns", lambda: daf.has_matrix("cell", name, "UMIs")),
        ("has_matrix name", lambda: daf.has_matrix("cell", "gene", name)),
        ("get_matrix", lambda: daf.get_matrix("cell", "gene", name, default=None)),
        ("get_matrix rows", lambda: daf.get_matrix(name, "gene", "UMIs")),
        ("get_stored_matrix", lambda: daf.get_stored_matrix("cell", "gene", name)),
        ("get_pd_matrix", lambda: daf.get_pd_matrix("cell", "gene", name, default=None)),
        ("set_matrix", lambda: daf.set_matrix("cell", "gene", name, 1)),
        ("relayout_matrix", lambda: daf.relayout_matrix("cell", "gene", name, overwrite=True)),
        ("delete_matrix", lambda: daf.delete_matrix("cell", "gene", name, must_exist=False)),
        ("delete_matrix columns", lambda: daf.delete_matrix("cell", name, "UMIs", must_exist=False)),
        ("empty_dense_matrix", lambda: daf.empty_dense_matrix("cell", "gene", name, "Int8").__enter__()),
        ("empty_sparse_matrix", lambda: daf.empty_sparse_matrix("cell", "gene", name, "Int8", 0).__enter__()),
        ("read_only get", lambda: daf.read_only().get_vector("cell", name)),
    ]
    if isinstance(name, str) and "\0" not in name:  # (the query parser reads an escaped NUL as "_")
        escaped = escape_value(name) if name else "''"
        calls += [
            ("query scalar", lambda: daf.get_query(f". {escaped}", cache=False)),
            ("query axis", lambda: daf.get_query(f"@ {escaped}", cache=False)),
            ("query vector", lambda: daf.get_query(f"@ cell : {escaped}", cache=False)),
            ("query matrix", lambda: daf.get_query(f"@ cell @ gene :: {escaped}", cache=False)),
        ]
    return calls


@pytest.mark.parametrize("name", HOSTILE, ids=repr)
def test_hostile_names_are_refused_by_every_entry_point(store, tmp_path, name):
    daf, victim = store
    before = _state(daf, tmp_path)
    for what, call in _calls(daf, name):
        with pytest.raises(pydaf.DafError) as raised:
            call()
        # A query may also be refused by its parser (a DafQueryError) before any name is looked up.
        expected = (pydaf.DafNameError, DafQueryError) if what.startswith("query") else pydaf.DafNameError
        assert isinstance(raised.value, expected), (what, raised.value)
        if isinstance(raised.value, pydaf.DafNameError):
            assert "invalid " in str(raised.value) and f"in the daf data: {daf.name}" in str(raised.value), what
    assert _state(daf, tmp_path) == before
    assert victim.read_text() == "must survive"
    for query in ("@ cell : " + escape_value("../x"), ". " + escape_value("/x")):
        assert not daf.has_query(query)


def test_filesdaf_delete_of_an_escaping_name_deletes_nothing(tmp_path):
    outside = tmp_path / "x.json"
    outside.write_text("{}")
    daf = pydaf.FilesDaf(tmp_path / "deep" / "set.daf", "w").add_axis("cell", ["A"])
    for call in (lambda: daf.delete_vector("cell", "../../../x"), lambda: daf.delete_scalar("../../x"),
                 lambda: daf.delete_axis("../../x"), lambda: daf.delete_matrix("cell", "cell", "../../../../x")):
        with pytest.raises(pydaf.DafNameError):
            call()
    assert outside.read_text() == "{}"


def test_h5df_delete_of_the_root_dataset_is_refused(tmp_path):
    daf = pydaf.H5df(tmp_path / "x.h5df", "w").set_scalar("x", 1)
    for name in ("/daf", "../daf", "/scalars"):
        with pytest.raises(pydaf.DafNameError):
            daf.delete_scalar(name)
    with pytest.raises(pydaf.DafNameError):
        daf.delete_scalar(".")  # "." is the scalars group itself in HDF5
    daf.flush()
    assert pydaf.H5df(tmp_path / "x.h5df", "r").get_scalar("x") == 1


def test_h5dfs_names_never_reach_another_data_set(tmp_path):
    pydaf.H5df(f"{tmp_path}/x.h5dfs#/b", "w").set_scalar("x", "b's").add_axis("cell", ["A"]).set_vector(
        "cell", "v", [7])
    a = pydaf.H5df(f"{tmp_path}/x.h5dfs#/a", "w").add_axis("cell", ["A"])
    for call in (lambda: a.get_scalar("/b/scalars/x"), lambda: a.has_scalar("/b/scalars/x"),
                 lambda: a.get_vector("cell", "/b/vectors/cell/v"), lambda: a.axis_length("/b/axes/cell"),
                 lambda: a.delete_scalar("/b/scalars/x")):
        with pytest.raises(pydaf.DafNameError):
            call()
    assert pydaf.H5df(f"{tmp_path}/x.h5dfs#/b", "r").get_scalar("x") == "b's"


def test_names_written_elsewhere_stay_readable(tmp_path):
    """A leading '.' or a newline can't be created by pydaf, but an HDF5 file written elsewhere may hold them."""
    path = tmp_path / "foreign.h5df"
    pydaf.H5df(path, "w").add_axis("cell", ["A", "B"]).flush()
    with h5py.File(path, "r+") as file:
        file["scalars"].create_dataset(".hidden", data=np.int64(5))
        file["vectors/cell"].create_dataset("two\nlines", data=np.array([1.5, 2.5]))
    daf = pydaf.H5df(path, "r+")
    assert daf.has_scalar(".hidden") and daf.get_scalar(".hidden") == 5 and ".hidden" in daf.scalars_set()
    assert daf.get_vector("cell", "two\nlines").tolist() == [1.5, 2.5]
    assert pydaf.check_daf(daf) == []
    with pytest.raises(pydaf.DafNameError):
        daf.set_scalar(".other", 1)  # still not created by pydaf
    daf.delete_scalar(".hidden").delete_vector("cell", "two\nlines")
    assert daf.scalars_set() == set() and daf.vectors_set("cell") == set()


@pytest.mark.parametrize("kind", ["memory", "h5df", "files"])
def test_axis_entries_are_not_names(tmp_path, kind):
    entries = ["a/b", "..", ".", "/daf", "x\\y", "../../victim", "with\0nul"]
    daf = {"memory": lambda: pydaf.MemoryDaf(), "h5df": lambda: pydaf.H5df(tmp_path / "e.h5df", "w"),
           "files": lambda: pydaf.FilesDaf(tmp_path / "e.daf", "w")}[kind]()
    if kind == "h5df":
        entries.remove("with\0nul")  # (HDF5 strings can't hold NUL)
    daf.add_axis("cell", entries).set_vector("cell", "v", np.arange(len(entries)))
    assert daf.axis_vector("cell").tolist() == entries
    assert daf.axis_indices("cell", ["..", "/daf"]).tolist() == [1, 3]
    assert daf.get_query("@ cell [ v > 2 ] : v", cache=False).index.tolist() == entries[3:]
    assert pydaf.check_daf(daf) == []
