"""Hostile stored data for the validation tests: valid data sets written by pydaf, then corrupted inside the H5df with
h5py or inside a FilesDaf's files with plain file writes, and a child-process runner that reads every corrupted data
set through every entry point (so a segfault fails a test instead of killing the test runner).

``python -m tests.hostile MODE PATH...`` reads each data set (``MODE`` is ``numpy`` or ``numba``: which validation
path runs) and prints one JSON line per data set: ``{"path": ..., "outcomes": {"entry point": "DafFormatError: ..." or
"ok"}}``.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np

import pydaf

ROOT = Path(__file__).resolve().parent.parent

N_CELLS, N_GENES = 40, 5  # (enough cells for the strings below to be stored sparse)
# UMIs, stored only as (cell, gene): 1-based CSC, 2-3 entries per gene column.
COLPTR = np.array([1, 3, 6, 7, 9, 11], dtype=np.uint32)
ROWVAL = np.array([2, 5, 1, 3, 7, 4, 1, 6, 2, 7], dtype=np.uint32)
NZVAL = np.arange(1, 11, dtype=np.float32)
NZIND = np.array([2, 4, 7], dtype=np.uint32)  # the sparse vector cell/score


def build(path: str) -> None:
    """Write a valid data set: axes, a dense and a sparse vector, a sparse matrix in one layout, sparse strings, a
    dense matrix (and close it, so its files can be edited)."""
    daf = pydaf.open_daf(path, "w", name="hostile!")
    daf.set_scalar("organism", "human").add_axis("cell", [f"c{index}" for index in range(N_CELLS)])
    daf.add_axis("gene", [f"g{index}" for index in range(N_GENES)])
    daf.set_vector("cell", "age", np.arange(N_CELLS, dtype=np.int64))
    daf.set_vector("cell", "score", pydaf.SparseVector(N_CELLS, NZIND, np.array([0.5, 1.5, 2.5])))
    note = np.full(N_CELLS, "", dtype=object)
    note[3] = "x"
    daf.set_vector("cell", "note", note)  # stored sparse
    daf.set_matrix("cell", "gene", "UMIs", pydaf.SparseMatrixCSC((N_CELLS, N_GENES), COLPTR, ROWVAL, NZVAL),
                   relayout=False)
    daf.set_matrix("gene", "cell", "dense", np.arange(5.0 * N_CELLS).reshape(5, N_CELLS), relayout=False)
    labels = np.full((N_CELLS, N_GENES), "", dtype=object)
    labels[1, 1], labels[6, 4] = "a", "b"
    daf.set_matrix("cell", "gene", "labels", labels, relayout=False)  # stored sparse
    daf.format.format_close()
    del daf
    gc.collect()  # (the HDF5 file closes with its last object)


# Corruptions of an H5df file (the data set at the file's root), with h5py.


def _h5(edit: Callable[[h5py.File], None]) -> Callable[[str], None]:
    def corrupt(path: str) -> None:
        with h5py.File(path, "r+") as file:
            edit(file)
    return corrupt


def _set(dataset: str, index: int | slice, value: int | float) -> Callable[[str], None]:
    def edit(file: h5py.File) -> None:
        values = file[dataset][()]
        values[index] = value
        file[dataset][...] = values
    return _h5(edit)


def _replace(dataset: str, values: Callable[[np.ndarray], np.ndarray]) -> Callable[[str], None]:
    def edit(file: h5py.File) -> None:
        old = file[dataset][()]
        del file[dataset]
        file.create_dataset(dataset, data=values(old))
    return _h5(edit)


UMIS = "matrices/cell/gene/UMIs"
SCORE = "vectors/cell/score"

H5DF_CORRUPTIONS: dict[str, Callable[[str], None]] = {
    "colptr[0] = 0": _set(f"{UMIS}/colptr", 0, 0),
    "colptr[0] = 2": _set(f"{UMIS}/colptr", 0, 2),
    "colptr[-1] = nnz": _set(f"{UMIS}/colptr", -1, 10),
    "colptr[-1] = nnz + 2": _set(f"{UMIS}/colptr", -1, 12),
    "colptr decreasing": _set(f"{UMIS}/colptr", 2, 2),
    "colptr huge in the middle": _set(f"{UMIS}/colptr", 3, 2**31),
    "colptr too short": _replace(f"{UMIS}/colptr", lambda old: old[:-1]),
    "colptr too long": _replace(f"{UMIS}/colptr", lambda old: np.append(old, old[-1])),
    "colptr negative (Int64)": _replace(f"{UMIS}/colptr", lambda old: np.array([1, -5, 6, 7, 9, 11], np.int64)),
    "colptr of floats": _replace(f"{UMIS}/colptr", lambda old: old.astype(np.float64)),
    "rowval 0": _set(f"{UMIS}/rowval", 4, 0),
    "rowval past the rows": _set(f"{UMIS}/rowval", 9, N_CELLS + 1),
    "rowval huge": _set(f"{UMIS}/rowval", 0, 2**32 - 1),
    "rowval decreasing in a column": _set(f"{UMIS}/rowval", 4, 2),
    "rowval repeated in a column": _set(f"{UMIS}/rowval", 1, 2),
    "rowval longer than colptr says": _replace(f"{UMIS}/rowval", lambda old: np.append(old, 3)),
    "rowval of floats": _replace(f"{UMIS}/rowval", lambda old: old.astype(np.float32)),
    "nzval shorter": _replace(f"{UMIS}/nzval", lambda old: old[:-2]),
    "nzind 0": _set(f"{SCORE}/nzind", 0, 0),
    "nzind past the axis": _set(f"{SCORE}/nzind", 2, N_CELLS + 1),
    "nzind decreasing": _set(f"{SCORE}/nzind", 1, 1),
    "nzind longer than the axis": _replace(f"{SCORE}/nzind", lambda old: np.arange(1, N_CELLS + 2, dtype=old.dtype)),
    "nzval of a vector shorter": _replace(f"{SCORE}/nzval", lambda old: old[:1]),
    "dense vector too long": _replace("vectors/cell/age", lambda old: np.append(old, 7)),
    "dense vector 2-D": _replace("vectors/cell/age", lambda old: old.reshape(1, -1)),
    "dense matrix wrong shape": _replace("matrices/gene/cell/dense", lambda old: old[:, :-1]),
    "sparse strings nzind 0": _set("vectors/cell/note/nzind", 0, 0),
    "sparse strings nzind past the axis": _set("vectors/cell/note/nzind", 0, 99),
    "sparse string matrix rowval 0": _set("matrices/cell/gene/labels/rowval", 0, 0),
    "sparse string matrix colptr off": _set("matrices/cell/gene/labels/colptr", -1, 1),
    "axis with repeated entries": _replace("axes/gene", lambda old: np.array([b"g0", b"g1", b"g0", b"g3", b"g4"],
                                                                             dtype=object)),
    "vector is a group without nzind": _h5(lambda file: (file[SCORE].__delitem__("nzind"))),
    "scalar of 3 values": _replace("scalars/organism", lambda old: np.array([1, 2, 3])),
}


# Corruptions of a FilesDaf directory, with plain file writes.


def _raw(relative: str, dtype: type, edit: Callable[[np.ndarray], np.ndarray]) -> Callable[[str], None]:
    def corrupt(path: str) -> None:
        file = os.path.join(path, relative)
        edit(np.fromfile(file, dtype=dtype)).astype(dtype).tofile(file)
    return corrupt


def _poke(relative: str, dtype: type, index: int, value: int) -> Callable[[str], None]:
    def edit(values: np.ndarray) -> np.ndarray:
        values[index] = value
        return values
    return _raw(relative, dtype, edit)


def _text(relative: str, edit: Callable[[str], str]) -> Callable[[str], None]:
    def corrupt(path: str) -> None:
        file = Path(path) / relative
        file.write_text(edit(file.read_text()))
    return corrupt


def _both(*corruptions: Callable[[str], None]) -> Callable[[str], None]:
    def corrupt(path: str) -> None:
        for corruption in corruptions:
            corruption(path)
    return corrupt


def _remove(relative: str) -> Callable[[str], None]:
    return lambda path: os.remove(os.path.join(path, relative))


F_UMIS = "matrices/cell/gene/UMIs"
F_SCORE = "vectors/cell/score"

FILES_CORRUPTIONS: dict[str, Callable[[str], None]] = {
    "colptr[0] = 0": _poke(f"{F_UMIS}.colptr", np.uint32, 0, 0),
    "colptr[-1] = nnz + 2": _poke(f"{F_UMIS}.colptr", np.uint32, -1, 12),
    "colptr decreasing": _poke(f"{F_UMIS}.colptr", np.uint32, 2, 2),
    "colptr huge in the middle": _poke(f"{F_UMIS}.colptr", np.uint32, 3, 2**31),
    "colptr file truncated": _raw(f"{F_UMIS}.colptr", np.uint32, lambda values: values[:-1]),
    "rowval 0": _poke(f"{F_UMIS}.rowval", np.uint32, 4, 0),
    "rowval past the rows": _poke(f"{F_UMIS}.rowval", np.uint32, 9, N_CELLS + 1),
    "rowval huge": _poke(f"{F_UMIS}.rowval", np.uint32, 0, 2**32 - 1),
    "rowval decreasing in a column": _poke(f"{F_UMIS}.rowval", np.uint32, 4, 2),
    "rowval longer (descriptor too)": _both(
        _raw(f"{F_UMIS}.rowval", np.uint32, lambda values: np.append(values, 3)),
        _text(f"{F_UMIS}.json", lambda text: text.replace('"n_elements":10', '"n_elements":11', 1))),
    "nzval file shorter": _raw(f"{F_UMIS}.nzval", np.float32, lambda values: values[:-1]),
    "nzind 0": _poke(f"{F_SCORE}.nzind", np.uint32, 0, 0),
    "nzind past the axis": _poke(f"{F_SCORE}.nzind", np.uint32, 2, N_CELLS + 1),
    "nzind decreasing": _poke(f"{F_SCORE}.nzind", np.uint32, 1, 1),
    "nzind longer than the axis (descriptor too)": _both(
        _raw(f"{F_SCORE}.nzind", np.uint32, lambda values: np.arange(1, N_CELLS + 2)),
        _raw(f"{F_SCORE}.nzval", np.float64, lambda values: np.arange(N_CELLS + 1.0)),
        _text(f"{F_SCORE}.json", lambda text: text.replace('"n_elements":3', f'"n_elements":{N_CELLS + 1}'))),
    "dense vector file too long": _raw("vectors/cell/age.data", np.int64, lambda values: np.append(values, 7)),
    "sparse strings nzind 0": _poke("vectors/cell/note.nzind", np.uint32, 0, 0),
    "sparse string matrix rowval past the rows": _poke("matrices/cell/gene/labels.rowval", np.uint32, 1, 41),
    "axis with repeated entries": _text("axes/gene.txt", lambda text: text.replace("g2", "g0")),
    "descriptor not JSON": _text(f"{F_UMIS}.json", lambda text: text[:5]),
    "descriptor with an unknown type": _text(f"{F_SCORE}.json", lambda text: text.replace("Float64", "Complex")),
    "descriptor of another format": _text("vectors/cell/age.json", lambda text: text.replace("dense", "zarr")),
    "scalar JSON broken": _text("scalars/organism.json", lambda text: '{"type":"Int8","value":"human"}'),
    "scalar out of range": _text("scalars/organism.json", lambda text: '{"type":"Int8","value":300}'),
    "rowval file missing": _remove(f"{F_UMIS}.rowval"),
}

CORRUPTIONS = {"h5df": H5DF_CORRUPTIONS, "files": FILES_CORRUPTIONS}

#: Changes that keep the data readable as it was (H5df reads ``rowval`` in ``colptr``'s type, as Julia's FilesDaf
#: does): they must read correctly, not necessarily fail.
BENIGN = {"rowval of floats"}


def corrupted(folder: Path, kind: str) -> list[tuple[str, str]]:
    """One valid data set per corruption under ``folder``, each corrupted: ``[(corruption, path)]``."""
    made = []
    for index, (what, corrupt) in enumerate(CORRUPTIONS[kind].items()):
        path = str(folder / (f"case{index}.h5df" if kind == "h5df" else f"case{index}.daf"))
        build(path)
        corrupt(path)
        made.append((what, path))
    return made


# Reading everything (in the child).


def _entry_points(path: str) -> dict[str, Callable[[], object]]:
    opened: list[pydaf.DafReader] = []

    def daf() -> pydaf.DafReader:
        """The data set, opened once, with an empty cache (so each entry point reads from storage)."""
        if not opened:
            opened.append(pydaf.open_daf(path, "r"))
        opened[0].empty_cache()
        return opened[0]

    def total(matrix: object) -> float:
        return float(np.asarray(matrix.sum()))  # type: ignore[attr-defined]

    return {
        "description": lambda: daf().description(),
        "scalar": lambda: daf().get_scalar("organism"),
        "axis": lambda: daf().axis_dict("gene"),
        "vectors": lambda: [daf().get_vector("cell", name).tolist() for name in ("age", "score", "note")],
        "stored matrix": lambda: daf().get_stored_matrix("cell", "gene", "UMIs", relayout=False),
        "scipy matrix": lambda: total(daf().get_matrix("cell", "gene", "UMIs")),
        "relayout": lambda: total(daf().get_matrix("gene", "cell", "UMIs")),
        "dense matrix": lambda: total(daf().get_matrix("gene", "cell", "dense", relayout=False)),
        "string matrix": lambda: daf().get_matrix("cell", "gene", "labels", relayout=False).tolist(),
        "row sums query": lambda: daf().get_np_query("@ cell @ gene :: UMIs >- Sum", cache=False).tolist(),
        "column sums query": lambda: daf().get_np_query("@ cell @ gene :: UMIs >| Sum", cache=False).tolist(),
        "grouped query": lambda: daf().get_np_query("@ cell @ gene :: UMIs -/ age >- Max", cache=False).tolist(),
        "check": lambda: pydaf.check_daf(daf()),
    }


def read_everything(path: str) -> dict[str, str]:
    outcomes = {}
    for what, read in _entry_points(path).items():
        print(f"{path}: {what}", file=sys.stderr, flush=True)  # the last line tells where a crash happened
        try:
            result = read()
        except pydaf.DafError as error:
            outcomes[what] = f"{type(error).__name__}: {error}"
        except Exception as error:  # reported as a failure by the test
            outcomes[what] = f"UNTYPED {type(error).__name__}: {error}"
        else:
            outcomes[what] = f"problems: {result}" if what == "check" else f"ok: {_text(result)}"
    return outcomes


def _text(result: object) -> str:
    if isinstance(result, pydaf.SparseMatrixCSC):
        return str([result.shape, result.colptr.tolist(), result.rowval.tolist(), result.nzval.tolist()])
    return str(result)


def run_child(mode: str, paths: list[str]) -> tuple[subprocess.CompletedProcess, dict[str, dict[str, str]]]:
    """Read every data set in a child process; its outcomes per path (those it reported before any crash)."""
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "tests.hostile", mode, *paths], capture_output=True, text=True,
                            env=environment, cwd=ROOT, timeout=600)
    outcomes = {}
    for line in result.stdout.splitlines():
        record = json.loads(line)
        outcomes[record["path"]] = record["outcomes"]
    return result, outcomes


def main(arguments: list[str]) -> None:
    mode, paths = arguments[0], arguments[1:]
    if mode == "numba":  # the numba kernels on these small arrays, in many blocks
        import pydaf.core.validation
        import pydaf.kernels.validation

        pydaf.core.validation.NUMBA_THRESHOLD = 1
        pydaf.kernels.validation.BLOCK_ENTRIES = 2
    for path in paths:
        print(json.dumps({"path": path, "outcomes": read_everything(path)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
