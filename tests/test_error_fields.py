"""Errors carry structured fields (the data set, the property, what it was for) from which Julia's text is built, and
no code recognises an error by its text (issue 24, deliver 4)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import pydaf
from pydaf.check import check_daf
from pydaf.core.storage import CheckedReads


def _raised(call, error_class=pydaf.DafError):
    with pytest.raises(error_class) as info:
        call()
    return info.value


def test_missing_properties_name_the_data_set_and_the_property() -> None:
    daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
    daf.set_vector("cell", "age", [1, 2])
    scalar = _raised(lambda: daf.get_scalar("version"), pydaf.DafMissingError)
    assert (scalar.daf_name, scalar.what) == (daf.name, ("scalar", "version"))
    assert scalar.problem == "missing scalar: version"
    assert str(scalar) == f"missing scalar: version\nin the daf data: {daf.name}\n(its scalars: none)"
    assert scalar.hint == "(its scalars: none)"
    vector = _raised(lambda: daf.get_vector("cell", "agee"), pydaf.DafMissingError)
    assert (vector.daf_name, vector.what) == (daf.name, ("vector", "cell", "agee"))
    assert str(vector).startswith(f"missing vector: agee\nfor the axis: cell\nin the daf data: {daf.name}\n")
    assert "did you mean: age?" in vector.hint
    matrix = _raised(lambda: daf.get_matrix("cell", "gene", "UMIs"), pydaf.DafMissingError)
    assert (matrix.daf_name, matrix.what) == (daf.name, ("matrix", "cell", "gene", "UMIs"))
    axis = _raised(lambda: daf.axis_length("donor"), pydaf.DafMissingError)
    assert (axis.daf_name, axis.daf_preposition, axis.what) == (daf.name, "of", ("axis", "donor"))
    assert str(axis).startswith(f"missing axis: donor\nfor: axis_length\nof the daf data: {daf.name}\n")


def test_write_errors_name_the_data_set_and_the_property() -> None:
    daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"]).set_scalar("version", 1)
    existing = _raised(lambda: daf.set_scalar("version", 2), pydaf.DafExistsError)
    assert (existing.daf_name, existing.what, str(existing)) == (
        daf.name, ("scalar", "version"), f"existing scalar: version\nin the daf data: {daf.name}")
    axis = _raised(lambda: daf.add_axis("cell", ["C"]), pydaf.DafExistsError)
    assert (axis.daf_name, axis.what) == (daf.name, ("axis", "cell"))
    name = _raised(lambda: daf.set_scalar("a/b", 1), pydaf.DafNameError)
    assert name.daf_name == daf.name and str(name).endswith(f"\nin the daf data: {daf.name}")
    inexact = _raised(lambda: daf.set_vector("cell", "age", [1.0, -1.0], eltype="UInt16"), pydaf.DafInexactError)
    assert (inexact.daf_name, inexact.value, inexact.position) == (daf.name, -1.0, (1,))
    assert str(inexact).endswith(f"\nin the daf data: {daf.name}")


def test_read_only_closed_and_query_errors_carry_the_data_set() -> None:
    daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"])
    read_only = _raised(lambda: daf.read_only().set_scalar("x", 1), pydaf.DafReadOnlyError)
    assert read_only.daf_name == f"{daf.name}.read_only"
    query = _raised(lambda: daf["@ cell : age"], pydaf.DafError)
    assert query.daf_name == daf.name
    assert str(query).endswith(f"\nin the daf data: {daf.name}\n(its vectors for the axis cell: none)")
    daf.close()
    closed = _raised(lambda: daf.axis_length("cell"), pydaf.DafClosedError)
    assert closed.daf_name == daf.name
    assert str(closed) == (f"the daf data: {daf.name}\nwas closed\n(a closed data set that is not stored can't be "
                           "reopened)")
    assert (closed.problem, closed.daf_preposition) == (f"the daf data: {daf.name}\nwas closed", None)


def test_fields_survive_pickling_and_args_is_the_message() -> None:
    error = pydaf.DafMissingError("missing scalar: x", daf_name="cells!", what=("scalar", "x"), hint="(none)")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is pydaf.DafMissingError and str(copy) == str(error) == error.args[0]
    assert (copy.daf_name, copy.what, copy.hint) == ("cells!", ("scalar", "x"), "(none)")
    storage = pickle.loads(pickle.dumps(pydaf.DafStorageError("disk full", daf_name="cells!")))
    assert isinstance(storage, OSError) and storage.daf_name == "cells!"
    assert str(storage) == "disk full\nin the daf data: cells!"


def test_completed_keeps_the_class_and_its_own_fields() -> None:
    error = pydaf.DafInexactError("can't convert exactly the value: -1", value=-1, position=(3,))
    completed = error.completed(daf_name="cells!", what=("vector", "cell", "age"),
                                for_="vector: age\nof the axis: cell")
    assert type(completed) is pydaf.DafInexactError and (completed.value, completed.position) == (-1, (3,))
    assert str(completed) == ("can't convert exactly the value: -1\nfor the vector: age\nof the axis: cell\n"
                              "in the daf data: cells!")
    assert error.daf_name is None and str(error) == "can't convert exactly the value: -1"


def test_completed_leaves_the_original_alone_where_tblib_pickles_exceptions() -> None:
    # distributed installs tblib's pickling support on import, under which ``copy.copy`` of an exception shares its
    # fields with the original (a real case: pydaf.dask in the same process).
    tblib = pytest.importorskip("tblib.pickling_support", reason="tblib (a dependency of distributed) is not here")
    tblib.install()
    error = pydaf.DafInexactError("can't convert exactly the value: -1", value=-1, position=(3,))
    completed = error.completed(daf_name="cells!", for_="vector: age\nof the axis: cell")
    assert error.daf_name is None and str(error) == "can't convert exactly the value: -1"
    assert completed.daf_name == "cells!" and (completed.value, completed.position) == (-1, (3,))


def _truncated_files_daf(folder: str) -> str:
    """A FilesDaf whose directory (so its name, and the backend's messages) contains ``in the daf data: ``, with a
    vector data file cut short."""
    path = os.path.join(folder, "in the daf data: evil.daf")
    with pydaf.FilesDaf(path, "w") as daf:
        daf.add_axis("cell", ["A", "B"]).set_vector("cell", "age", np.array([1, 2], np.int64))
    with open(os.path.join(path, "vectors", "cell", "age.data"), "r+b") as file:
        file.truncate(12)
    return path


def test_checked_reads_complete_an_error_whose_text_looks_complete(tmp_path) -> None:
    # The backend's message names the directory, which contains "in the daf data: ": sniffing the text took it for
    # an error that already names its data set, and left out the property and the data set.
    daf = pydaf.open_daf(_truncated_files_daf(str(tmp_path)))
    error = _raised(lambda: daf.get_vector("cell", "age"), pydaf.DafFormatError)
    assert error.daf_name == daf.name and error.what == ("vector", "cell", "age")
    assert str(error).endswith(f"has 12 bytes instead of 16\nfor the vector: age\nof the axis: cell\n"
                               f"in the daf data: {daf.name}")
    reads = CheckedReads(daf.format, "checked!")
    direct = _raised(lambda: reads.format_get_vector("cell", "age"), pydaf.DafFormatError)
    assert direct.daf_name == "checked!" and str(direct).endswith("\nin the daf data: checked!")


def test_checked_reads_pass_an_error_that_names_its_data_set_unchanged() -> None:
    base = pydaf.MemoryDaf(name="base!").add_axis("cell", ["A"])
    chain = pydaf.chain_reader([base, pydaf.MemoryDaf(name="top!").add_axis("cell", ["A"])], name="chain!")
    base.close()
    error = _raised(lambda: chain.get_vector("cell", "age"), pydaf.DafClosedError)
    assert error.daf_name == "base!" and str(error).startswith("the daf data: base!\nwas closed")


def test_check_reads_the_fields_not_the_text(tmp_path) -> None:
    daf = pydaf.open_daf(_truncated_files_daf(str(tmp_path)))
    problems = check_daf(daf)
    assert len(problems) == 1
    assert problems[0].startswith("vector cell/age: the data file: age.data; of the vector: age; ")
    assert problems[0].endswith("has 12 bytes instead of 16; for the vector: age; of the axis: cell")
    assert f"the daf data: {daf.name}" not in problems[0].replace("in the daf directory", "")


def test_no_error_class_lives_outside_errors() -> None:
    from pydaf import errors
    from pydaf.julia import errors as julia_errors

    for name in ("DafJuliaError", "DafJuliaUnavailableError", "DafJuliaVersionError"):
        assert getattr(julia_errors, name) is getattr(errors, name)
        assert getattr(errors, name).__module__ == "pydaf.errors"


def test_format_errors_are_told_apart_by_class(tmp_path) -> None:
    import h5py

    from pydaf.formats.zarr import format as zarr_format
    from pydaf.formats.zip import store

    assert store.DafAppendOnlyError is pydaf.DafAppendOnlyError is pydaf.errors.DafAppendOnlyError
    assert zarr_format.DafZarrVersionError is pydaf.errors.DafZarrVersionError
    notes = tmp_path / "notes.txt"
    notes.write_text("not data")
    unknown = _raised(lambda: pydaf.open_daf(str(notes)), pydaf.errors.DafUnknownFormatError)
    assert isinstance(unknown, pydaf.DafFormatError) and str(unknown).startswith("no known Daf format can open")
    plain = str(tmp_path / "plain.h5")
    with h5py.File(plain, "w") as file:
        file["data"] = [1, 2]
    not_daf = _raised(lambda: pydaf.H5df(plain, "r+"), pydaf.errors.DafNotDafError)
    assert isinstance(not_daf, pydaf.DafFormatError) and str(not_daf).startswith("not a daf data set: ")
