"""Inputs a data set does not own, as hostile input (issue 25, classes 4, 5 and 11): a FIFO, socket, device or folder
planted where an ``.h5ad``, a MuData ``.h5mu`` or a 10x ``.h5`` is expected never blocks; an AnnData or 10x file whose
declared sizes (a sparse matrix's nnz, categorical codes, a 10x shape) its storage can't hold is refused before
anything of that size is allocated; malformed encodings and FilesDaf files, and pathological query patterns, give
typed :class:`pydaf.DafError`\\ s.

Probes that could hang or allocate run in child processes, with a timeout and an address-space limit (``RLIMIT_AS``,
3 GB: an attempted ~12 GB allocation fails there instead of swapping the machine).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

import pydaf
import pydaf.interop

from .hostile_h5ad import write_base

REPOSITORY = Path(__file__).resolve().parent.parent
TIMEOUT = 60
ADDRESS_SPACE = 3 << 30

# The child prints one JSON line: the outcome of `probe()` (its result's repr, or the error's type and message).
_PRELUDE = textwrap.dedent("""
    import json, sys, traceback
    import pydaf, pydaf.interop
    def report(probe):
        try:
            outcome = {"kind": "ok", "value": repr(probe())}
        except pydaf.DafError as error:
            outcome = {"kind": "daf", "type": type(error).__name__, "message": str(error),
                       "classes": [cls.__name__ for cls in type(error).__mro__]}
        except BaseException as error:
            outcome = {"kind": "untyped", "type": type(error).__name__, "message": traceback.format_exc()}
        print(json.dumps(outcome), flush=True)
""")


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_probe(body: str, *arguments: str, limit_memory: bool = False) -> dict:
    """Run ``body`` (which calls ``report(lambda: ...)``, with ``sys.argv[1:]`` = ``arguments``) in a child process:
    its outcome, or ``{"kind": "hang"}`` if it did not end within the timeout (the child is killed)."""
    code = _PRELUDE + textwrap.dedent(body)
    try:
        result = subprocess.run([sys.executable, "-c", code, *arguments], capture_output=True, text=True,
                                timeout=TIMEOUT, cwd=REPOSITORY, env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
                                preexec_fn=_limit_address_space if limit_memory else None)
    except subprocess.TimeoutExpired:
        return {"kind": "hang"}
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"kind": "crash", "returncode": result.returncode, "stderr": result.stderr[-3000:]}
    return json.loads(lines[-1])


def _plant(kind: str, path: Path) -> object:
    """A non-regular file of ``kind`` at ``path`` (what keeps it alive is returned)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        return server
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        path.symlink_to("/dev/zero")
    return None


# Class 4: a non-regular file where an AnnData, MuData or 10x file is expected.

_IMPORTS = {
    "h5ad": ("cells.h5ad", "pydaf.interop.h5ad_as_daf(sys.argv[1], progress=False)"),
    "h5mu": ("cells.h5mu", "pydaf.interop.h5ad_as_daf(sys.argv[1], modality='rna', progress=False)"),
    "tenx": ("filtered_feature_bc_matrix.h5", "pydaf.interop.tenx_as_daf(sys.argv[1], progress=False)"),
}


@pytest.mark.parametrize("kind", ["fifo", "socket", "device", "directory"])
@pytest.mark.parametrize("source", sorted(_IMPORTS))
def test_a_non_regular_input_file_is_refused_without_blocking(tmp_path, source, kind):
    name, call = _IMPORTS[source]
    path = tmp_path / name
    keep = _plant(kind, path)
    outcome = run_probe(f"report(lambda: {call})", str(path))
    del keep
    assert outcome["kind"] == "daf", outcome
    assert outcome["type"] == "DafFormatError" or "DafFormatError" in outcome["classes"], outcome
    assert str(path) in outcome["message"], outcome
    if kind != "directory":  # (h5py itself refuses a folder, in its own words)
        assert "not a regular file" in outcome["message"], outcome


# Class 4: an element referring to another file (which HDF5 would open: a FIFO there blocks, a device is read).


def _external_link(target: str):
    def edit(file: h5py.File) -> None:
        del file["X"]
        file["X"] = h5py.ExternalLink(target, "/X")
    return edit


def _external_storage(target: str):
    def edit(file: h5py.File) -> None:
        del file["obs/n/values"]
        file["obs/n"].create_dataset("values", shape=(6,), dtype="i8", external=[(target, 0, 48)])
    return edit


def _virtual(target: str):
    def edit(file: h5py.File) -> None:
        layout = h5py.VirtualLayout(shape=(6,), dtype="i8")
        layout[:] = h5py.VirtualSource(target, "/values", shape=(6,))
        del file["obs/n/values"]
        file["obs/n"].create_virtual_dataset("values", layout, fillvalue=0)
    return edit


@pytest.mark.parametrize("target", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("refer", [_external_link, _external_storage, _virtual], ids=lambda refer: refer.__name__)
def test_an_h5ad_referring_to_another_file_is_refused_without_opening_it(tmp_path, refer, target):
    if target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    path = _copy_base(tmp_path)
    with h5py.File(path, "r+") as file:
        refer(target)(file)
    outcome = run_probe("report(lambda: pydaf.interop.h5ad_as_daf(sys.argv[1], progress=False, "
                        "unsupported_handler='ignore'))", str(path))
    assert outcome["kind"] == "daf" and outcome["type"] == "DafFormatError", outcome
    assert "refers to another file" in outcome["message"] and target in outcome["message"], outcome


def test_a_tenx_file_linking_to_a_fifo_is_neither_sniffed_nor_read(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    path = tmp_path / "filtered_feature_bc_matrix.h5"
    with h5py.File(path, "w") as file:
        file["matrix"] = h5py.ExternalLink(str(tmp_path / "fifo"), "/matrix")
    for call in ("pydaf.interop.tenx_as_daf(sys.argv[1], progress=False)", "pydaf.open_daf(sys.argv[1])"):
        outcome = run_probe(f"report(lambda: {call})", str(path))
        assert outcome["kind"] == "daf", (call, outcome)


# Class 5: declared sizes the storage can't hold.

HUGE = 3_000_000_000  # elements: ~12 GB of 4-byte values, declared by a file of a few KB


def _copy_base(tmp_path: Path, name: str = "cells.h5ad") -> Path:
    base = tmp_path / "base.h5ad"
    if not base.exists():
        write_base(str(base))
    path = tmp_path / name
    shutil.copy(base, path)
    return path


def _huge_dataset(group: h5py.Group, name: str, dtype: str) -> None:
    """A chunked dataset of ``HUGE`` elements with nothing stored (its file stays small)."""
    attributes = dict(group[name].attrs) if name in group else {}
    if name in group:
        del group[name]
    group.create_dataset(name, shape=(HUGE,), dtype=dtype, chunks=(1 << 16,)).attrs.update(attributes)


def _huge_nnz(file: h5py.File, member: str, major: int) -> None:
    """A sparse matrix whose data and indices declare HUGE entries, with an indptr consistent with that nnz."""
    group = file[member]
    _huge_dataset(group, "data", "f4")
    _huge_dataset(group, "indices", "i4")
    del group["indptr"]
    group["indptr"] = np.linspace(0, HUGE, major + 1).astype(np.int64)


def _huge_codes(file: h5py.File) -> None:
    _huge_dataset(file["obs/type"], "codes", "i4")


def _huge_index(file: h5py.File) -> None:
    _huge_dataset(file["var"], "_index", h5py.string_dtype())


def _huge_uns(file: h5py.File) -> None:
    dataset = file["uns"].create_dataset("big", shape=(HUGE,), dtype="f4", chunks=(1 << 16,))
    dataset.attrs["encoding-type"], dataset.attrs["encoding-version"] = "array", "0.2.0"


_HUGE_H5AD = {
    "X nnz": (lambda file: _huge_nnz(file, "X", 6), "/X/data"),
    "layer nnz": (lambda file: _huge_nnz(file, "layers/counts", 4), "/layers/counts/data"),
    "categorical codes": (_huge_codes, "/obs/type/codes"),
    "index": (_huge_index, "/var/_index"),
    "uns array": (_huge_uns, "/uns/big"),
}


@pytest.mark.parametrize("case", sorted(_HUGE_H5AD))
def test_an_h5ad_declaring_huge_sizes_is_refused_before_allocating(tmp_path, case):
    edit, element = _HUGE_H5AD[case]
    path = _copy_base(tmp_path)
    with h5py.File(path, "r+") as file:
        edit(file)
    assert path.stat().st_size < 10 << 20
    outcome = run_probe("report(lambda: pydaf.interop.h5ad_as_daf(sys.argv[1], progress=False, "
                        "unsupported_handler='ignore'))", str(path), limit_memory=True)
    assert outcome["kind"] == "daf" and outcome["type"] == "DafFormatError", outcome
    assert "MemoryError" not in outcome["message"], outcome
    assert element in outcome["message"] and str(path) in outcome["message"], outcome
    assert "declares" in outcome["message"], outcome


def _write_tenx(path: Path, n_features: int = 3, n_cells: int = 2) -> None:
    with h5py.File(path, "w") as file:
        matrix = file.create_group("matrix")
        matrix["barcodes"] = np.array([f"AAC{index}-1".encode() for index in range(n_cells)])
        matrix["shape"] = np.array([n_features, n_cells], dtype=np.int64)
        matrix["data"] = np.array([3, 1, 2], dtype=np.int32)
        matrix["indices"] = np.array([0, 1, 2], dtype=np.int64)
        matrix["indptr"] = np.array([0, 2, 3], dtype=np.int64)
        features = matrix.create_group("features")
        features["id"] = np.array([f"ENSG{index}".encode() for index in range(n_features)])
        features["name"] = np.array([f"G{index}".encode() for index in range(n_features)])
        features["feature_type"] = np.array([b"Gene Expression"] * n_features)


def _tenx_huge_shape(file: h5py.File) -> None:
    file["matrix/shape"][...] = np.array([4 * HUGE, 2])


def _tenx_huge_nnz(file: h5py.File) -> None:
    _huge_nnz(file, "matrix", 2)


def _tenx_huge_barcodes(file: h5py.File) -> None:
    _huge_dataset(file["matrix"], "barcodes", "S16")


_HUGE_TENX = {
    "shape": (_tenx_huge_shape, "/matrix/features/name"),
    "nnz": (_tenx_huge_nnz, "/matrix/data"),
    "barcodes": (_tenx_huge_barcodes, "/matrix/barcodes"),
}


@pytest.mark.parametrize("case", sorted(_HUGE_TENX))
def test_a_tenx_file_declaring_huge_sizes_is_refused_before_allocating(tmp_path, case):
    edit, element = _HUGE_TENX[case]
    path = tmp_path / "filtered_feature_bc_matrix.h5"
    _write_tenx(path)
    with h5py.File(path, "r+") as file:
        edit(file)
    outcome = run_probe("report(lambda: pydaf.interop.tenx_as_daf(sys.argv[1], progress=False))", str(path),
                        limit_memory=True)
    assert outcome["kind"] == "daf" and outcome["type"] == "DafFormatError", outcome
    assert "MemoryError" not in outcome["message"], outcome
    assert element in outcome["message"] and str(path) in outcome["message"], outcome


def test_a_tenx_file_of_ordinary_sizes_still_imports(tmp_path):
    path = tmp_path / "filtered_feature_bc_matrix.h5"
    _write_tenx(path)
    daf = pydaf.interop.tenx_as_daf(path, progress=False)
    assert daf.get_matrix("cell", "gene", "UMIs").toarray().tolist() == [[3, 1, 0], [0, 0, 2]]


# Class 11: malformed AnnData encodings.


def _index_a_group(file: h5py.File) -> None:
    del file["obs/_index"]
    file["obs"].create_group("_index")


def _index_a_matrix(file: h5py.File) -> None:
    del file["var/_index"]
    file["var"]["_index"] = np.zeros((4, 2))


def _index_complex(file: h5py.File) -> None:
    del file["var/_index"]
    file["var"]["_index"] = np.zeros(4, dtype=np.complex64)


def _index_unsupported_encoding(file: h5py.File) -> None:
    file["obs/_index"].attrs["encoding-type"] = "awkward-array"


@pytest.mark.parametrize("edit", [_index_a_group, _index_a_matrix, _index_complex, _index_unsupported_encoding],
                         ids=lambda edit: edit.__name__)
def test_an_h5ad_whose_index_is_not_a_vector_gives_a_format_error(tmp_path, edit):
    path = _copy_base(tmp_path)
    with h5py.File(path, "r+") as file:
        edit(file)
    with pytest.raises(pydaf.DafFormatError) as caught:
        pydaf.interop.h5ad_as_daf(path, progress=False, unsupported_handler="ignore")
    message = str(caught.value)
    assert "names (index)" in message and str(path) in message


# Class 11: FilesDaf axis files and scalar descriptors.


def _files_daf(folder: Path) -> Path:
    path = folder / "cells"
    daf = pydaf.FilesDaf(path, "w", name="cells!")
    daf.set_scalar("version", 1.5).add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", [1, 2, 3])
    daf.close()
    return path


_FILES_FILES = ["daf.json", "metadata.json", "scalars/version.json", "axes/cell.txt", "vectors/cell/age.json",
                 "vectors/cell/age.data", "vectors/cell/donor.json", "vectors/cell/donor.txt",
                 "matrices/cell/gene/UMIs.colptr", "matrices/cell/gene/UMIs.rowval", "matrices/cell/gene/UMIs.nzval"]


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_a_non_regular_file_in_a_files_daf_never_blocks(tmp_path, kind):
    """Each file FilesDaf reads, replaced by a FIFO, socket or device: every read is a DafError (or the data, where
    the file is not needed), never a hang, in one child process."""
    import scipy.sparse as sp

    for index, relative in enumerate(_FILES_FILES):
        path = tmp_path / str(index)
        daf = pydaf.FilesDaf(path, "w", name="plant!")
        daf.set_scalar("version", 1.5).add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
        daf.set_vector("cell", "age", [1, 2, 3]).set_vector("cell", "donor", ["d", "e", "f"])
        daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0, 1], [2, 0], [0, 0]])), relayout=False)
        daf.close()
        target = path / relative
        if target.exists():
            target.unlink()
        _plant(kind, target)
    body = """
        import os
        for index in range(int(sys.argv[2])):
            def read(path=os.path.join(sys.argv[1], str(index))):
                daf = pydaf.FilesDaf(path, "r")
                return (daf.get_scalar("version"), daf.axis_vector("cell").tolist(), daf.get_vector("cell", "age"),
                        daf.get_vector("cell", "donor"),
                        daf.get_matrix("cell", "gene", "UMIs", relayout=False), daf.description())
            report(read)
    """
    code = _PRELUDE + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(len(_FILES_FILES))], capture_output=True,
                            text=True, timeout=TIMEOUT, cwd=REPOSITORY)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == len(_FILES_FILES), result.stderr[-2000:]
    outcomes = dict(zip(_FILES_FILES, lines, strict=True))
    for relative, outcome in outcomes.items():
        assert outcome["kind"] in ("daf", "ok"), (relative, outcome)
        if relative != "metadata.json":  # (an index Julia rebuilds; not needed to read)
            assert outcome["kind"] == "daf", (relative, outcome)


@pytest.mark.parametrize("text", [b"A\nB\nA\n", b"A\nA\n", b"A\nB\nC\nC\n"])
def test_a_files_axis_with_duplicate_entries_gives_a_format_error_naming_it(tmp_path, text):
    path = _files_daf(tmp_path)
    (path / "axes" / "cell.txt").write_bytes(text)
    daf = pydaf.FilesDaf(path, "r")
    repeated = "A" if text.count(b"A") > 1 else "C"
    for read in (lambda: daf.axis_vector("cell"), lambda: daf.axis_dict("cell"), lambda: daf.get_query("@ cell")):
        with pytest.raises(pydaf.DafFormatError) as caught:
            read()
        message = str(caught.value)
        assert "cell" in message
        if "duplicate entry" in message:
            assert f"duplicate entry: {repeated!r}" in message
    with pytest.raises(pydaf.DafFormatError, match=f"duplicate entry: '{repeated}'"):
        pydaf.FilesDaf(path, "r").axis_vector("cell")


def test_a_files_axis_with_crlf_line_ends_reads_as_julia_reads_it(tmp_path):
    # Julia's mmap_file_lines splits on "\n" only: "\r" stays part of each entry; pydaf reads the same entries, and a
    # copy writes the same bytes back.
    path = _files_daf(tmp_path)
    (path / "axes" / "cell.txt").write_bytes(b"A\r\nB\r\nC\r\n")
    daf = pydaf.FilesDaf(path, "r")
    assert daf.axis_vector("cell").tolist() == ["A\r", "B\r", "C\r"]
    assert daf.get_vector("cell", "age").tolist() == [1, 2, 3]
    assert daf.get_query("@ cell : age").to_dict() == {"A\r": 1, "B\r": 2, "C\r": 3}
    copy = pydaf.FilesDaf(tmp_path / "copy", "w")
    pydaf.copy_all(source=daf, destination=copy)
    copy.close()
    assert (tmp_path / "copy" / "axes" / "cell.txt").read_bytes() == b"A\r\nB\r\nC\r\n"


@pytest.mark.parametrize("value", [b"NaN", b"-NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999",
                                   b"9" * 5000, b"[" * 100_000, b'{"a":' * 50_000])
@pytest.mark.parametrize("eltype", ["Float64", "Float32", "Int64"])
def test_a_files_scalar_descriptor_outside_json_gives_a_format_error(tmp_path, value, eltype):
    path = _files_daf(tmp_path)
    (path / "scalars" / "version.json").write_bytes(b'{"type":"' + eltype.encode() + b'","value":' + value + b"}\n")
    with pytest.raises(pydaf.DafFormatError) as caught:
        pydaf.FilesDaf(path, "r").get_scalar("version")
    assert "the scalar: version" in str(caught.value)


def test_finite_files_scalars_still_read_exactly(tmp_path):
    path = _files_daf(tmp_path)
    for text, expected in ((b"1e308", 1e308), (b"-2.5e-300", -2.5e-300), (b"0", 0.0)):
        (path / "scalars" / "version.json").write_bytes(b'{"type":"Float64","value":' + text + b"}\n")
        assert pydaf.FilesDaf(path, "r").get_scalar("version") == expected


# Class 11: pathological query patterns.

_PATTERNS = ["a{1000000000}", "a{65536}", "x{0,4294967296}", "(a{1000}){1000}", "((a{100}){100}){100}",
             "(?:a{1000}|b{1000}){1000}", "(" * 20_000 + "a" + ")" * 20_000, "(?:" * 5_000 + "a" + ")" * 5_000,
             "\\", "[", "a{2,1}", "(?P<x", "x" * 200_000, "\\q", "\\p{Nope}", "\\N{NOPE}", "\\g<9>", "\\U0011FFFF",
             "a**", "(?i", "(?(1)a|b)", "(){65535}", "(()){4000}"]


@pytest.mark.parametrize("pattern", _PATTERNS, ids=lambda pattern: pattern[:24])
def test_a_pathological_regex_gives_a_query_error_naming_it(tmp_path, pattern):
    body = """
        from pydaf.queries.tokens import escape_value
        with open(sys.argv[1], encoding="utf-8") as file:
            pattern = file.read()
        daf = pydaf.MemoryDaf(name="regex!").add_axis("cell", ["A", "B", "aaab"])
        report(lambda: daf.get_query("@ cell [ name ~ " + escape_value(pattern) + " ]"))
    """
    (tmp_path / "pattern").write_text(pattern, encoding="utf-8")
    outcome = run_probe(body, str(tmp_path / "pattern"), limit_memory=True)
    assert outcome["kind"] == "daf" and outcome["type"] == "DafQueryError", outcome
    assert f"invalid regular expression: {pattern}" in outcome["message"], outcome


def test_ordinary_regexes_still_match():
    daf = pydaf.MemoryDaf(name="regex!").add_axis("cell", ["A", "B", "aaab", "x{3}"])
    for pattern, expected in (("a{3}b", ["aaab"]), ("[AB]", ["A", "B"]), ("(?:a{1,3}){1}b", ["aaab"]),
                              (r"x\{3\}", ["x{3}"]), (r"\p{Lu}", ["A", "B"]), ("[{]?.", ["A", "B"]), ("a{65535}", [])):
        from pydaf.queries.tokens import escape_value

        result = daf.get_query(f"@ cell [ name ~ {escape_value(pattern)} ]")
        assert list(result.index) == expected, pattern


# Class 9: names and string values on MemoryDaf, FilesDaf and H5df.

FORMATS = ("memory", "files", "h5df")


def _new_daf(kind: str, folder: Path) -> pydaf.DafWriter:
    daf = {"memory": lambda: pydaf.MemoryDaf(name="names!"), "files": lambda: pydaf.FilesDaf(folder / "d", "w"),
           "h5df": lambda: pydaf.H5df(folder / "d.h5df", "w")}[kind]()
    return daf.add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])


def _creators(name: str) -> dict:
    return {
        "scalar": lambda daf: daf.set_scalar(name, 1),
        "axis": lambda daf: daf.add_axis(name, ["A"]),
        "vector": lambda daf: daf.set_vector("cell", name, [1, 2]),
        "matrix": lambda daf: daf.set_matrix("cell", "gene", name, np.ones((2, 1))),
        "empty vector": lambda daf: daf.empty_dense_vector("cell", name, np.float64).__enter__(),
    }


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize("name", ["a\udc80b", "\ud800", "x\udfff" * 10])
def test_a_name_with_a_lone_surrogate_is_a_name_error_before_anything_is_written(tmp_path, kind, name):
    daf = _new_daf(kind, tmp_path)
    before = daf.description()
    for what, create in _creators(name).items():
        with pytest.raises(pydaf.DafNameError, match="lone surrogate"):
            create(daf)
        with pytest.raises(pydaf.DafNameError):
            daf.has_scalar(name)
        assert daf.description() == before, what


@pytest.mark.parametrize("length", [252, 300, 10_000, 70_000])
def test_files_names_are_checked_against_file_name_limits_before_writing(tmp_path, length):
    daf = _new_daf("files", tmp_path)
    files = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*"))
    for what, create in _creators("n" * length).items():
        with pytest.raises(pydaf.DafNameError, match="too long"):
            create(daf)
        assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == files, what


def test_files_axis_names_fill_a_file_name(tmp_path):
    daf = _new_daf("files", tmp_path)
    name = "é" * 125 + "x"  # 251 bytes: axes/<name>.txt is 255 bytes
    daf.add_axis(name, ["A"])
    assert pydaf.FilesDaf(tmp_path / "d", "r").axis_vector(name).tolist() == ["A"]


def test_h5df_holds_long_names_exactly(tmp_path):
    daf = _new_daf("h5df", tmp_path)
    name = "n" * 70_000
    for what, create in _creators(name).items():
        if what != "empty vector":
            create(daf)
    daf.close()
    back = pydaf.H5df(tmp_path / "d.h5df", "r")
    assert back.get_scalar(name) == 1 and back.axis_vector(name).tolist() == ["A"]
    assert back.get_vector("cell", name).tolist() == [1, 2]


_NUL_VALUES = ["a\0b", "ab\0", "\0", "\0\0x"]


def _setters(value: str) -> dict:
    return {
        "scalar": (lambda daf: daf.set_scalar("s", value, overwrite=True), lambda daf: daf.get_scalar("s")),
        "vector": (lambda daf: daf.set_vector("cell", "v", [value, "x"], overwrite=True),
                   lambda daf: daf.get_vector("cell", "v").tolist()[0]),
        "matrix": (lambda daf: daf.set_matrix("cell", "gene", "m", [[value], ["x"]], relayout=False),
                   lambda daf: np.asarray(daf.get_matrix("cell", "gene", "m", relayout=False)).ravel().tolist()[0]),
        "axis": (lambda daf: daf.add_axis("z", [value, "x"]), lambda daf: daf.axis_vector("z").tolist()[0]),
    }


@pytest.mark.parametrize("kind", ["memory", "files"])
@pytest.mark.parametrize("value", _NUL_VALUES, ids=ascii)
def test_strings_with_nul_bytes_are_stored_exactly_where_the_format_can(tmp_path, kind, value):
    daf = _new_daf(kind, tmp_path)
    for what, (write, read) in _setters(value).items():
        write(daf)
        assert read(daf) == value, what
        if kind == "files":
            assert read(pydaf.FilesDaf(tmp_path / "d", "r")) == value, what


@pytest.mark.parametrize("value", [*_NUL_VALUES, "a\udc80"], ids=ascii)
def test_h5df_refuses_strings_it_cant_store_exactly_before_writing(tmp_path, value):
    daf = _new_daf("h5df", tmp_path)
    daf.set_scalar("s", "old").set_vector("cell", "v", ["p", "q"])
    for what, (write, _read) in _setters(value).items():
        before = daf.description(deep=True)
        with pytest.raises(pydaf.DafValueError) as caught:
            write(daf)
        assert repr(value) in str(caught.value), what
        assert daf.description(deep=True) == before, what
    assert daf.get_scalar("s") == "old" and daf.get_vector("cell", "v").tolist() == ["p", "q"]
    daf.close()
    assert pydaf.H5df(tmp_path / "d.h5df", "r").get_scalar("s") == "old"
