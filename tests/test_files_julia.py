"""FilesDaf against the directories Julia wrote (``../shared/fixtures/julia``): values read and bytes written."""

from __future__ import annotations

import filecmp
import os

import numpy as np

import pydaf

from .julia_examples import FIXTURES, example_cells_daf, needs_fixtures

JULIA = FIXTURES / "julia"


@needs_fixtures
def test_reads_files_v1_0():
    daf = pydaf.FilesDaf(JULIA / "files-v1.0", "r")
    assert daf.axis_vector("cell").tolist() == ["A", "B", "C", "D"] and daf.axis_vector("gene").tolist() == ["X", "Y"]
    assert daf.get_scalar("cells") == 100 and np.asarray(daf.get_scalar("cells")).dtype == np.int64
    assert daf.get_scalar("note") == "hello" and daf.get_scalar("pi") == 3.14
    donor = daf.get_vector("cell", "donor")
    assert donor.dtype == np.int32 and donor.tolist() == [1, 2, 3, 4]
    flags = daf.get_stored_vector("cell", "flags")  # v1.0 Bool sparse: always all-true
    assert flags.nzind.dtype == np.uint32 and flags.nzind.tolist() == [1, 3] and flags.nzval.all()
    sparse_x = daf.get_stored_vector("cell", "sparse_x")
    assert sparse_x.nzind.tolist() == [2, 4] and sparse_x.nzval.tolist() == [10.0, 30.0]
    np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "dense_m"), np.arange(1.0, 9.0).reshape(2, 4).T)
    mask = daf.get_stored_matrix("cell", "gene", "mask")
    assert mask.colptr.dtype == np.int32 and mask.colptr.tolist() == [1, 2, 3] and mask.rowval.tolist() == [1, 2]
    sparse_m = daf.get_stored_matrix("cell", "gene", "sparse_m")
    assert sparse_m.colptr.tolist() == [1, 3, 4] and sparse_m.rowval.tolist() == [1, 3, 2]
    assert sparse_m.nzval.tolist() == [10.0, 20.0, 30.0]
    np.testing.assert_array_equal(daf.get_matrix("gene", "cell", "mask", relayout=False).toarray(),
                                  daf.get_matrix("cell", "gene", "mask").toarray().T)


@needs_fixtures
def test_reads_files_v1_1_and_writes_it_byte_identical(tmp_path):
    source = pydaf.FilesDaf(JULIA / "files-v1.1", "r")
    assert source.get_vector("cell", "age").tolist() == [10.0, 20.0, 30.0, 40.0]
    umis = source.get_stored_matrix("cell", "gene", "UMIs")
    assert umis.colptr.tolist() == [1, 3, 4, 5] and umis.rowval.tolist() == [1, 4, 2, 3]
    assert umis.nzval.tolist() == [1.0, 4.0, 2.0, 3.0] and umis.colptr.dtype == np.int64
    copy = pydaf.FilesDaf(tmp_path / "copy", "w")
    copy.add_axis("cell", source.axis_vector("cell")).add_axis("gene", source.axis_vector("gene"))
    copy.set_scalar("title", source.get_scalar("title"))
    copy.set_vector("cell", "age", source.get_vector("cell", "age"))
    copy.set_vector("cell", "sv", source.get_stored_vector("cell", "sv"))
    copy.set_matrix("cell", "gene", "UMIs", umis, relayout=False)
    copy.set_matrix("cell", "gene", "dm", source.get_matrix("cell", "gene", "dm"))
    expected = JULIA / "files-v1.1"
    for folder, _, files in os.walk(expected):
        for file in files:
            relative = os.path.relpath(os.path.join(folder, file), expected)
            assert filecmp.cmp(expected / relative, tmp_path / "copy" / relative, shallow=False), relative


@needs_fixtures
def test_example_cells_files_match_the_rebuilt_example():
    stored = pydaf.FilesDaf(JULIA / "example-cells.files", "r")
    built = example_cells_daf()
    assert stored.description()[stored.description().index("scalars:"):] == \
        built.description()[built.description().index("scalars:"):]
    for axis in built.axes_set():
        assert stored.axis_vector(axis).tolist() == built.axis_vector(axis).tolist()
        for name in built.vectors_set(axis):
            np.testing.assert_array_equal(stored.get_vector(axis, name), built.get_vector(axis, name))
    np.testing.assert_array_equal(stored.get_matrix("cell", "gene", "UMIs"), built.get_matrix("cell", "gene", "UMIs"))


@needs_fixtures
def test_packed_properties_read():  # (every property, every codec: tests/test_packed_read.py)
    daf = pydaf.FilesDaf(JULIA / "files-packed" / "gzip.files", "r")
    assert daf.axis_length("cell") == 1200 and daf.get_scalar("name") == "files-packed!"
    assert daf.get_vector("cell", "score").tolist() == list(range(1, 1201))
    assert daf.get_vector("cell", "label").tolist() == [f"v{index}" for index in range(1, 1201)]
    flat = daf.get_matrix("gene", "cell", "dense", relayout=False)  # the flat relayout copy
    np.testing.assert_array_equal(daf.get_matrix("cell", "gene", "dense", relayout=False), flat.T)


@needs_fixtures
def test_writing_example_cells_gives_julias_files(tmp_path):
    from .julia_examples import example_daf

    written = example_daf("c", pydaf.FilesDaf(tmp_path / "cells", "w", name="cells!"))
    written.set_scalar("organism", "human").set_scalar("reference", "test")
    expected = JULIA / "example-cells.files"
    compared = 0
    for folder, _, files in os.walk(expected):
        for file in files:
            relative = os.path.relpath(os.path.join(folder, file), expected)
            if relative in ("daf.json", "metadata.json") or relative.startswith("scalars"):
                continue  # written by an older Julia: version 1.0, scalar JSON keys in the older order
            assert filecmp.cmp(expected / relative, tmp_path / "cells" / relative, shallow=False), relative
            compared += 1
    assert compared >= 15
