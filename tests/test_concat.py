"""concatenate beyond Julia's recorded cases (``test/concat.jl`` runs in test_composition_parity): every kind of source
part (dense or sparse, stored in either layout, missing) into dense and sparse results on every store, several blocks
per part, several concatenated axes, Julia's type promotion, merging, refusals that leave the destination unchanged
(FilesDaf too), the rollback after a write fails, and the resident set of a streaming H5df concatenation."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.composition import concat

CollectAxis, LastValue = pydaf.MergeAction.CollectAxis, pydaf.MergeAction.LastValue
#: Children import this checkout's pydaf.
CHILD_ENV = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parent.parent)}
BACKENDS = ("memory", "h5df", "files")


class Stores:
    """Makes data sets of a backend in a temporary directory."""

    def __init__(self, backend: str, directory) -> None:
        self.backend, self.directory, self.count = backend, directory, 0

    def new(self, name: str) -> pydaf.DafWriter:
        self.count += 1
        if self.backend == "memory":
            return pydaf.MemoryDaf(name=name)
        if self.backend == "h5df":
            return pydaf.H5df(str(self.directory / f"{self.count}.h5df"), "w", name=name)
        return pydaf.FilesDaf(str(self.directory / f"{self.count}.daf"), "w", name=name)


@pytest.fixture(params=BACKENDS)
def stores(request, tmp_path) -> Stores:
    return Stores(request.param, tmp_path)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few hundred bytes, so every part of these small matrices is written in several blocks."""
    monkeypatch.setattr(concat, "_BLOCK_BYTES", 256)
    monkeypatch.setattr(concat, "_SPARSIFY_BLOCK_BYTES", 128)


def _source(stores: Stores, index: int, cells: int, genes: list[str]) -> pydaf.DafWriter:
    return stores.new(f"source{index}!").add_axis("cell", [f"S{index}C{cell}" for cell in range(cells)]).add_axis(
        "gene", genes)


def _sparse(rng: np.random.Generator, shape: tuple[int, int], density: float, dtype) -> np.ndarray:
    values = rng.integers(1, 50, shape).astype(dtype)
    values[rng.random(shape) >= density] = 0
    return values


# Each kind of part, into dense and sparse results, on each store.

PART_KINDS = ("dense", "dense other layout", "sparse", "sparse other layout", "missing")


def _concatenation(stores: Stores, empty: float, fraction: float, sparse_parts: bool):
    """Five sources, one per part kind (gene x cell values; the 'other layout' ones are stored as cell x gene only),
    and the expected gene x cell result."""
    rng = np.random.default_rng(5)
    genes = [f"G{gene}" for gene in range(23)]
    sources, expected = [], []
    for index, (kind, dtype, cells) in enumerate(zip(PART_KINDS, ("float32", "uint8", "int16", "float32", None),
                                                     (7, 9, 40, 33, 6), strict=True)):
        source = _source(stores, index, cells, genes)
        density = 0.1 if sparse_parts else 0.9
        values = _sparse(rng, (len(genes), cells), density, dtype or "float32")
        if kind == "missing":
            values = np.full((len(genes), cells), empty, dtype=np.float32)
        elif kind.startswith("sparse"):
            stored = sp.csc_matrix(values if kind == "sparse" else values.T)
        else:
            stored = values if kind == "dense" else values.T
        if kind != "missing":
            rows, columns = ("gene", "cell") if kind in ("dense", "sparse") else ("cell", "gene")
            source.set_matrix(rows, columns, "UMIs", stored, relayout=False)
        sources.append(source)
        expected.append(values)
    destination = stores.new("destination!")
    # The empty value's type takes part in the promotion: Float32 keeps the result Float32 (a Python float: Float64).
    pydaf.concatenate(destination, "cell", sources, empty={("gene", "cell", "UMIs"): np.float32(empty)},
                      sparse_if_saves_storage_fraction=fraction, progress=False)
    return destination, np.hstack(expected)


@pytest.mark.parametrize("empty", [0.0, 2.5])
def test_every_part_kind_into_a_dense_result(stores, small_blocks, empty):
    destination, expected = _concatenation(stores, empty, fraction=0.999, sparse_parts=False)
    stored = destination.get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    assert isinstance(stored, np.ndarray) and stored.dtype == np.float32  # Float32 with UInt8 and Int16
    np.testing.assert_array_equal(stored, expected)
    assert not destination.has_matrix("cell", "gene", "UMIs", relayout=False)  # the concatenated axis is columns
    assert destination.get_vector("cell", "dataset").tolist() == [
        f"source{index}!" for index, count in enumerate((7, 9, 40, 33, 6)) for _ in range(count)]


@pytest.mark.parametrize("empty", [0.0, 2.5])
def test_every_part_kind_into_a_sparse_result(stores, small_blocks, empty):
    # A non-zero empty value is stored as explicit entries (Julia's estimate counts that part as dense).
    destination, expected = _concatenation(stores, empty, fraction=0.01, sparse_parts=True)
    stored = destination.get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    assert isinstance(stored, pydaf.SparseMatrixCSC) and stored.dtype == np.float32
    np.testing.assert_array_equal(stored.to_dense(), expected)
    missing_entries = 23 * 6 if empty else 0
    assert stored.nnz == np.count_nonzero(expected[:, :-6]) + missing_entries
    assert np.all(np.diff(stored.colptr.astype(np.int64)) >= 0) and stored.colptr[-1] == stored.nnz + 1


def test_large_sparse_part_in_the_other_layout(tmp_path):
    """A sparse source stored only as cell x gene, large enough for the parallel transpose, into a mapped H5df."""
    rng = np.random.default_rng(3)
    cells, genes = 40_000, 300
    values = sp.random(cells, genes, density=0.1, format="csc", random_state=rng, dtype=np.float32)
    first = pydaf.MemoryDaf(name="first!").add_axis("cell", [f"A{cell}" for cell in range(cells)])
    first.add_axis("gene", [f"G{gene}" for gene in range(genes)]).set_matrix("cell", "gene", "UMIs", values,
                                                                           relayout=False)
    second = pydaf.MemoryDaf(name="second!").add_axis("cell", ["B0", "B1"]).add_axis(
        "gene", [f"G{gene}" for gene in range(genes)])
    second.set_matrix("gene", "cell", "UMIs", sp.csc_matrix(np.eye(genes, 2, dtype=np.float64)), relayout=False)
    destination = pydaf.H5df(str(tmp_path / "out.h5df"), "w", name="out!")
    pydaf.concatenate(destination, "cell", [first, second], progress=False)
    stored = destination.get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    assert isinstance(stored, pydaf.SparseMatrixCSC) and stored.dtype == np.float64 and stored.nnz == values.nnz + 2
    expected = sp.hstack([values.T, sp.csc_matrix(np.eye(genes, 2))]).tocsc()
    assert (stored.to_scipy() != expected).nnz == 0


# Vectors, several axes, prefixes, merging.


def test_several_axes_with_prefixes_and_merging(stores):
    sources = []
    for index in range(2):
        source = stores.new(f"batch{index}!").add_axis("cell", [f"C{index}{cell}" for cell in range(3)])
        source.add_axis("metacell", ["M0", "M1"]).add_axis("gene", ["X", "Y"])
        source.set_vector("cell", "metacell", ["M0", "M1", "M1"]).set_vector("cell", "metacell.manual", ["M1"] * 3)
        source.set_vector("cell", "metacell_size", [index, 1, 2]).set_vector("metacell", "grade", [index, index])
        source.set_matrix("gene", "cell", "UMIs", np.arange(6).reshape(2, 3) + 10 * index)
        source.set_matrix("gene", "metacell", "fraction", np.full((2, 2), 0.5 * index))
        source.set_vector("gene", "weight", np.array([index, 2 * index], dtype=np.uint8))
        source.set_scalar("version", index + 1)
        sources.append(source)
    destination = stores.new("both!")
    pydaf.concatenate(destination, ["cell", "metacell"], sources, names=["b0", "b1"], prefix=[False, True],
                      merge=[(pydaf.ALL_VECTORS, LastValue), (("gene", "*"), CollectAxis), ("version", CollectAxis)],
                      progress=False)
    assert destination.axis_vector("metacell").tolist() == ["b0.M0", "b0.M1", "b1.M0", "b1.M1"]
    assert destination.get_vector("cell", "metacell").tolist() == ["b0.M0", "b0.M1", "b0.M1", "b1.M0", "b1.M1",
                                                                    "b1.M1"]
    assert destination.get_vector("cell", "metacell.manual").tolist() == ["b0.M1"] * 3 + ["b1.M1"] * 3
    assert destination.get_vector("cell", "metacell_size").tolist() == [0, 1, 2, 1, 1, 2]  # numbers: not prefixed
    assert destination.get_vector("metacell", "dataset").tolist() == ["b0", "b0", "b1", "b1"]
    assert destination.get_vector("metacell", "grade").tolist() == [0, 0, 1, 1]
    np.testing.assert_array_equal(destination.get_matrix("gene", "cell", "UMIs"),
                                  [[0, 1, 2, 10, 11, 12], [3, 4, 5, 13, 14, 15]])
    np.testing.assert_array_equal(destination.get_matrix("gene", "metacell", "fraction"), [[0, 0, 0.5, 0.5]] * 2)
    # The later ("gene", "*") pair wins over ALL_VECTORS: the weights are collected, not the last one kept.
    assert not destination.has_vector("gene", "weight")
    weights = destination.get_stored_matrix("gene", "dataset", "weight", relayout=False)
    assert weights.dtype == np.uint8 and weights.tolist() == [[0, 1], [0, 2]]
    assert destination.get_vector("dataset", "version").tolist() == [1, 2] and not destination.has_scalar("version")


def test_matrices_between_concatenated_axes_are_refused():
    source = pydaf.MemoryDaf(name="s!").add_axis("cell", ["A"]).add_axis("metacell", ["M"])
    source.set_matrix("metacell", "cell", "weight", np.ones((1, 1)), relayout=False)
    with pytest.raises(pydaf.DafValueError, match="can't concatenate the matrix: weight\nfor the concatenated rows "
                                                  "axis: metacell\nand the concatenated columns axis: cell\nin the "
                                                  "daf data: s!"):
        pydaf.concatenate(pydaf.MemoryDaf(name="d!"), ["cell", "metacell"], [source], progress=False)


def test_a_matrix_stored_only_in_the_other_layout_is_concatenated():
    # Julia lists only the matrices some source stores as (other_axis, axis); pydaf concatenates the others too.
    sources = [pydaf.MemoryDaf(name=f"s{index}!").add_axis("cell", [f"C{index}"]).add_axis("gene", ["X", "Y"])
               .set_matrix("cell", "gene", "UMIs", np.array([[index, 5]]), relayout=False) for index in range(2)]
    destination = pydaf.MemoryDaf(name="d!")
    pydaf.concatenate(destination, "cell", sources, progress=False)
    assert destination.get_stored_matrix("gene", "cell", "UMIs", relayout=False).tolist() == [[0, 1], [5, 5]]


@pytest.mark.parametrize(("dtypes", "expected"), [
    (["bool", "bool"], "Bool"),
    (["bool", "uint8"], "UInt8"),
    (["uint8", "int8"], "Int16"),
    (["uint32", "int8"], "Int64"),
    (["int16", "float32"], "Float32"),
    (["int64", "float32"], "Float64"),
    (["uint32", "int8", "float32"], "Float64"),  # Julia's pairwise reduce: (UInt32, Int8) is Int64 before Float32
    (["int8", "float32", "uint32"], "Float32"),
    (["uint16", "uint64"], "UInt64"),
])
def test_julia_type_promotion(dtypes, expected):
    sources = [pydaf.MemoryDaf(name=f"s{index}!").add_axis("cell", [f"C{index}"]).set_vector(
        "cell", "value", np.ones(1, dtype=dtype)) for index, dtype in enumerate(dtypes)]
    destination = pydaf.MemoryDaf(name="d!")
    pydaf.concatenate(destination, "cell", sources, progress=False)
    vector = destination.get_vector("cell", "value")
    assert pydaf.storage_types.julia_name(vector.dtype) == expected and vector.tolist() == [1] * len(dtypes)


def test_numbers_concatenated_with_strings_become_julia_strings():
    sources = [pydaf.MemoryDaf(name="s0!").add_axis("cell", ["A", "B"]).set_vector("cell", "x", [1.5, 2.0]),
               pydaf.MemoryDaf(name="s1!").add_axis("cell", ["C"]).set_vector("cell", "x", ["text"]),
               pydaf.MemoryDaf(name="s2!").add_axis("cell", ["D"]).set_vector("cell", "x", [True])]
    destination = pydaf.MemoryDaf(name="d!")
    pydaf.concatenate(destination, "cell", sources, progress=False)
    assert destination.get_vector("cell", "x").tolist() == ["1.5", "2.0", "text", "true"]


def test_string_matrices_are_concatenated_in_memory(stores):
    sources = [_source(stores, index, 2, ["X"]) for index in range(3)]
    sources[0].set_matrix("gene", "cell", "kind", np.array([["a", "b"]], dtype=object), relayout=False)
    sources[1].set_matrix("cell", "gene", "kind", np.array([[1], [2]], dtype=np.int8), relayout=False)
    destination = stores.new("destination!")
    pydaf.concatenate(destination, "cell", sources, empty={("cell", "gene", "kind"): "none"}, progress=False)
    assert destination.get_matrix("gene", "cell", "kind", relayout=False).tolist() == [
        ["a", "b", "1", "2", "none", "none"]]


def test_sparse_vectors_and_empty_values():
    sources = [pydaf.MemoryDaf(name="s0!").add_axis("cell", [f"A{cell}" for cell in range(40)]),
               pydaf.MemoryDaf(name="s1!").add_axis("cell", [f"B{cell}" for cell in range(4)]),
               pydaf.MemoryDaf(name="s2!").add_axis("cell", [f"C{cell}" for cell in range(10)])]
    sources[0].set_vector("cell", "x", pydaf.SparseVector(40, np.array([3, 40]), np.array([1.5, 2.5])))
    sources[1].set_vector("cell", "x", np.array([0.0, 0.0, 1.0, 0.0]))  # dense, sparsified
    destination = pydaf.MemoryDaf(name="d!")
    # Julia's estimate: 2 + 4 (dense counts fully) + 0 (empty 0) entries of 12 bytes, against 54 x 8 dense bytes.
    pydaf.concatenate(destination, "cell", sources, empty={("cell", "x"): 0}, progress=False)
    stored = destination.get_stored_vector("cell", "x")
    assert isinstance(stored, pydaf.SparseVector) and stored.nzind.tolist() == [3, 40, 43]
    assert stored.nzval.tolist() == [1.5, 2.5, 1.0] and stored.dtype == np.float64  # Int64 empty, Float64 values


def test_merge_last_value_of_matrices_keeps_the_stored_form(tmp_path):
    sources = []
    for index in range(2):
        source = pydaf.H5df(str(tmp_path / f"s{index}.h5df"), "w", name=f"s{index}!").add_axis("cell", [f"C{index}"])
        source.add_axis("gene", ["X", "Y", "Z"]).add_axis("batch", ["B1", "B2"])
        source.set_matrix("gene", "batch", "scale", sp.csc_matrix(np.array([[index, 0], [0, 0], [0, 7]])))
        source.set_matrix("gene", "gene", "edges", np.eye(3) * (index + 1))
        sources.append(source)
    sources[1].delete_matrix("gene", "gene", "edges")  # the last source that has it wins
    destination = pydaf.H5df(str(tmp_path / "d.h5df"), "w", name="d!")
    pydaf.concatenate(destination, "cell", sources, merge={pydaf.ALL_MATRICES: LastValue}, progress=False)
    scale = destination.get_stored_matrix("gene", "batch", "scale", relayout=False)
    assert isinstance(scale, pydaf.SparseMatrixCSC) and scale.to_dense().tolist() == [[1, 0], [0, 0], [0, 7]]
    assert destination.has_matrix("batch", "gene", "scale", relayout=False)  # each layout merged by its own key
    assert destination.get_matrix("gene", "gene", "edges").tolist() == np.eye(3).tolist()


def test_collected_scalars_use_the_empty_value_for_missing_ones():
    sources = [pydaf.MemoryDaf(name=f"s{index}!").add_axis("cell", [f"C{index}"]) for index in range(3)]
    sources[0].set_scalar("version", np.uint8(3))
    sources[2].set_scalar("version", np.int8(-1))
    destination = pydaf.MemoryDaf(name="d!")
    with pytest.raises(pydaf.DafMissingError, match="no empty value for the scalar: version\nwhich is missing from "
                                                    "the daf data: s1!\nconcatenated into the daf data: d!"):
        pydaf.concatenate(destination, "cell", sources, merge=[(pydaf.ALL_SCALARS, CollectAxis)], progress=False)
    pydaf.concatenate(destination, "cell", sources, merge=[(pydaf.ALL_SCALARS, CollectAxis)],
                      empty={"version": np.int32(0)}, progress=False)
    version = destination.get_vector("dataset", "version")
    assert version.dtype == np.int32 and version.tolist() == [3, 0, -1]


def test_tensor_keys_of_empty_expand_to_each_matrix():
    sources = []
    for index in range(2):
        source = pydaf.MemoryDaf(name=f"s{index}!").add_axis("cell", [f"C{index}"]).add_axis("gene", ["X"])
        source.add_axis("batch", ["B1", "B2"])
        sources.append(source)
    sources[0].set_matrix("gene", "cell", "B1_UMIs", np.array([[4]])).set_matrix("gene", "cell", "B2_UMIs",
                                                                                  np.array([[5]]))
    destination = pydaf.MemoryDaf(name="d!")
    pydaf.concatenate(destination, "cell", sources, empty=[(("batch", "gene", "cell", "UMIs"), 9)], progress=False)
    assert destination.get_matrix("gene", "cell", "B1_UMIs").tolist() == [[4, 9]]
    assert destination.get_matrix("gene", "cell", "B2_UMIs").tolist() == [[5, 9]]


def test_progress_bar(capsys):
    def run(progress: bool) -> str:
        sources = [pydaf.MemoryDaf(name=f"s{index}!").add_axis("cell", [f"C{index}"]).add_axis("gene", ["X"])
                   .set_matrix("gene", "cell", "UMIs", np.ones((1, 1))) for index in range(2)]
        pydaf.concatenate(pydaf.MemoryDaf(name="d!"), "cell", sources, progress=progress)
        return capsys.readouterr().err

    assert "concatenate" in run(True)
    assert run(False) == ""


# Refusals: each leaves the destination as it was (checked on disk for FilesDaf).


def _snapshot(daf: pydaf.DafReader) -> tuple:
    path = daf.complete_path()
    files = sorted(os.path.relpath(os.path.join(folder, name), path) for folder, _, names in os.walk(path)
                   for name in names) if path and os.path.isdir(path) else []
    return daf.description(), files


def _two_sources(stores: Stores) -> list[pydaf.DafWriter]:
    sources = []
    for index in range(2):
        source = _source(stores, index, 2, ["X", "Y"])
        source.set_vector("cell", "age", [index, index]).set_scalar("version", index)
        source.set_matrix("gene", "cell", "UMIs", np.ones((2, 2)) * index)
        sources.append(source)
    return sources


REFUSALS = [
    ("missing axis", lambda sources: sources[1].delete_axis("cell"), {},
     pydaf.DafMissingError, "missing axis: cell\nfor: concatenate!\nof the daf data: source1!"),
    ("existing axis", lambda sources: None, {"_existing": "gene"},
     pydaf.DafExistsError, "existing axis: gene\nin the daf data: destination!"),
    ("dataset axis in a source", lambda sources: sources[0].add_axis("dataset", ["x"]), {},
     pydaf.DafExistsError, "existing axis: dataset\nin the daf data: source0!"),
    ("different entries", lambda sources: sources[1].delete_axis("gene").add_axis("gene", ["Y", "X"]), {},
     pydaf.DafValueError, "different entries for the axis: gene\nbetween the daf data: source0!\nand the daf data: "
                          "source1!\nconcatenated into the daf data: destination!"),
    ("no empty matrix", lambda sources: sources[1].delete_matrix("gene", "cell", "UMIs"), {},
     pydaf.DafMissingError, "no empty value for the matrix: UMIs\nof the rows axis: gene\nand the columns axis: "
                            "cell\nwhich is missing from the daf data: source1!"),
    ("non-unique entries", lambda sources: sources[1].delete_axis("cell").add_axis("cell", ["S0C0", "Z"]), {},
     pydaf.DafShapeError, "non-unique entries for new axis: cell\nin the daf data: destination!"),
    ("collect without dataset axis", lambda sources: None,
     {"dataset_axis": None, "merge": [("version", CollectAxis)]},
     pydaf.DafValueError, "can't collect axis for the scalar: version\nof the daf data sets concatenated into the "
                          "daf data: destination!\nbecause no data set axis was created"),
    ("collect a vector without dataset axis", lambda sources: sources[0].set_vector("gene", "w", [1, 2]),
     {"dataset_axis": None, "merge": [(("gene", "w"), CollectAxis)]},
     pydaf.DafValueError, "can't collect axis for the vector: w\nof the axis: gene\nof the daf data sets"),
    ("collect a matrix", lambda sources: sources[0].set_matrix("gene", "gene", "edges", np.eye(2)),
     {"merge": [(pydaf.ALL_MATRICES, CollectAxis)]},
     pydaf.DafValueError, "can't collect axis for the matrix: edges\nof the rows axis: gene\nand the columns axis: gene"
                          "\nof the daf data sets concatenated into the daf data: destination!\nbecause that would "
                          "create a 3D tensor, which is not supported"),
    ("existing scalar", lambda sources: None, {"_scalar": True, "merge": [("version", LastValue)]},
     pydaf.DafExistsError, "existing scalar: version\nin the daf data: destination!"),
    ("UInt64 above Int64", lambda sources: (
        sources[0].set_vector("cell", "big", np.array([1, 2**63], dtype=np.uint64)),
        sources[1].set_vector("cell", "big", np.array([-1, 1], dtype=np.int8))), {},
     pydaf.DafValueError, "the value: 9223372036854775808\nof the vector: big\nof the axis: cell\nin the daf data: "
                          "source0!\ndoes not fit in the concatenated element type: Int64"),
    ("fraction", lambda sources: None, {"sparse_if_saves_storage_fraction": 1.0},
     pydaf.DafValueError, "invalid sparse_if_saves_storage_fraction: 1.0"),
    ("names count", lambda sources: None, {"names": ["a"]},
     pydaf.DafValueError, "the number of names: 1\nis different from the number of sources: 2"),
    ("non-unique names", lambda sources: None, {"names": ["a", "a"]},
     pydaf.DafValueError, "non-unique names of the concatenated data sets: a"),
    ("prefix count", lambda sources: None, {"prefix": [True, False]}, pydaf.DafValueError, "invalid prefix:"),
    ("prefixed count", lambda sources: None, {"prefixed": [set(), set()]}, pydaf.DafValueError, "invalid prefixed:"),
    ("merge datum", lambda sources: None, {"merge": [("version", "LastValue")]},
     pydaf.DafValueError, "invalid MergeDatum: \\('version', 'LastValue'\\)"),
    ("empty key", lambda sources: None, {"empty": {("cell",): 0}}, pydaf.DafValueError, "invalid empty DataKey"),
    ("dataset axis concatenated", lambda sources: None, {"dataset_axis": "cell"},
     pydaf.DafValueError, "the dataset axis: cell\nis also a concatenated axis"),
]


@pytest.mark.parametrize(("change", "kwargs", "error", "message"), [refusal[1:] for refusal in REFUSALS],
                         ids=[refusal[0] for refusal in REFUSALS])
def test_refusals_change_nothing(stores, change, kwargs, error, message):
    sources = _two_sources(stores)
    change(sources)
    destination = stores.new("destination!").set_scalar("kept", "yes")
    kwargs = dict(kwargs)
    if kwargs.pop("_scalar", False):
        destination.set_scalar("version", 7)
    if "_existing" in kwargs:
        destination.add_axis(kwargs.pop("_existing"), ["X", "Y"])
    before = _snapshot(destination)
    with pytest.raises(error, match=message):
        pydaf.concatenate(destination, "cell", sources, progress=False, **kwargs)
    assert _snapshot(destination) == before


def test_no_sources_or_axes_are_refused():
    destination = pydaf.MemoryDaf(name="d!")
    with pytest.raises(pydaf.DafValueError, match="no sources to concatenate into the daf data: d!"):
        pydaf.concatenate(destination, "cell", [])
    with pytest.raises(pydaf.DafValueError, match="no axis to concatenate"):
        pydaf.concatenate(destination, [], [pydaf.MemoryDaf()])
    with pytest.raises(pydaf.DafTypeError, match="not a daf data set"):
        pydaf.concatenate(destination, "cell", [np.zeros(3)])


def test_overwrite_replaces_existing_scalars():
    sources = [pydaf.MemoryDaf(name=f"s{index}!").add_axis("cell", [f"C{index}"]).set_scalar("version", index)
               for index in range(2)]
    destination = pydaf.MemoryDaf(name="d!").set_scalar("version", 9)
    pydaf.concatenate(destination, "cell", sources, merge=[("version", LastValue)], overwrite=True, progress=False)
    assert destination.get_scalar("version") == 1


ROLLBACK = """
import resource, signal, sys
import numpy as np
import pydaf

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with EFBIG instead of killing the process
sources = []
for index in range(2):
    source = pydaf.MemoryDaf(name=f"s{index}!").add_axis("cell", [f"S{index}C{cell}" for cell in range(500)])
    source.add_axis("gene", [f"G{gene}" for gene in range(1000)]).set_scalar("version", index)
    sources.append(source.set_matrix("gene", "cell", "UMIs", np.ones((1000, 500)), relayout=False))
destination = pydaf.FilesDaf(sys.argv[1], "w", name="destination!").set_scalar("kept", "yes")
resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, resource.RLIM_INFINITY))  # the 8 MB matrix can't be written
try:
    pydaf.concatenate(destination, "cell", sources, merge=[("version", pydaf.MergeAction.LastValue)], progress=False)
except (OSError, pydaf.DafError) as error:
    print(type(error).__name__)
"""


def test_a_failed_write_removes_what_the_call_created(tmp_path):
    path = tmp_path / "destination.daf"
    result = subprocess.run([sys.executable, "-c", ROLLBACK, str(path)], capture_output=True, text=True, check=True,
                            env=CHILD_ENV)
    assert result.stdout.strip(), result.stderr  # the write failed
    destination = pydaf.FilesDaf(str(path), "r")
    assert destination.axes_set() == set() and destination.scalars_set() == {"kept"}


# Streaming: the resident set of a large H5df concatenation stays far below the data.

STREAMING = """
import sys
import numpy as np
import pydaf

def peak() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))

sources = [pydaf.H5df(path, "r") for path in sys.argv[2:]]
destination = pydaf.H5df(sys.argv[1], "w", name="destination!")
before = peak()
pydaf.concatenate(destination, "cell", sources, progress=False)
print(peak() - before)
"""


def _write_streaming_source(path: str, index: int, genes: int, cells: int) -> None:
    source = pydaf.H5df(path, "w", name=f"source{index}!").add_axis("cell", [f"S{index}C{cell}" for cell in
                                                                           range(cells)])
    source.add_axis("gene", [f"G{gene}" for gene in range(genes)])
    with source.empty_dense_matrix("gene", "cell", "UMIs", "Float32") as matrix:
        for start in range(0, cells, 1000):
            matrix[:, start:start + 1000] = index + np.arange(start, start + 1000, dtype=np.float32) / cells
    source.flush()  # and closed when dropped, so the child can open it


def test_streaming_keeps_the_resident_set_small(tmp_path):
    genes, cells, n_sources = 2000, 10_000, 4  # 4 x 80 MB of Float32
    paths = [str(tmp_path / f"source{index}.h5df") for index in range(n_sources)]
    for index, path in enumerate(paths):
        _write_streaming_source(path, index, genes, cells)
    output = str(tmp_path / "out.h5df")
    result = subprocess.run([sys.executable, "-c", STREAMING, output, *paths], capture_output=True, text=True,
                            check=True, env=CHILD_ENV)
    growth = int(result.stdout)
    data = n_sources * genes * cells * 4
    assert growth < 0.25 * data, f"peak RSS grew by {growth / 1e6:.0f} MB while concatenating {data / 1e6:.0f} MB"
    stored = pydaf.H5df(output, "r").get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    last = np.arange(cells - 1, cells, dtype=np.float32) / cells  # as the sources computed it
    for index in range(n_sources):
        columns = stored[:, index * cells:(index + 1) * cells]
        assert columns[0, 0] == index and columns[-1, -1] == index + last[0]
