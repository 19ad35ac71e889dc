"""Hostile ``.h5ad`` files for the AnnData import tests: a valid file written by the real anndata package, then damaged
with h5py (indices out of range, broken ``indptr``, wrong shapes, bad encodings, category codes, masks, undecodable
text, truncation), and a child-process runner that imports each one (a crash fails a test, not the runner).

``python -m tests.hostile_h5ad HANDLER PATH...`` imports each file into a new MemoryDaf (with that
``unsupported_handler``) and prints one JSON line per file:
``{"path": ..., "outcome": "ok: <X as a dense list>" or "<ErrorType>: <message>"}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np

from .hostile import ROOT

N_OBS, N_VAR = 6, 4


def write_base(path: str) -> None:
    """A valid h5ad: CSR X, a CSC layer, square CSR and CSC obsp, a categorical and a nullable obs column, uns."""
    import anndata
    import pandas as pd
    import scipy.sparse as sp

    X = sp.random(N_OBS, N_VAR, density=0.5, format="csr", random_state=1, dtype=np.float32)
    obs = pd.DataFrame({"type": pd.Categorical(["a", "b", "a", "c", "b", "a"]),
                        "n": pd.array([1, 2, 3, 4, 5, 6], dtype="Int64")},
                       index=[f"c{index}" for index in range(N_OBS)])
    adata = anndata.AnnData(X=X, obs=obs, var=pd.DataFrame(index=[f"g{index}" for index in range(N_VAR)]))
    adata.layers["counts"] = sp.csc_matrix(X)
    adata.obsp["distances"] = sp.random(N_OBS, N_OBS, density=0.4, format="csr", random_state=2)
    adata.obsp["connectivities"] = sp.random(N_OBS, N_OBS, density=0.4, format="csc", random_state=3)
    adata.uns["title"] = "hostile"
    adata.write_h5ad(path)


def _edit(edit: Callable[[h5py.File], None]) -> Callable[[str], None]:
    def corrupt(path: str) -> None:
        with h5py.File(path, "r+") as file:
            edit(file)
    return corrupt


def _set(dataset: str, index: int, value: float) -> Callable[[str], None]:
    def edit(file: h5py.File) -> None:
        values = file[dataset][()]
        values[index] = value
        file[dataset][...] = values
    return _edit(edit)


def _replace(dataset: str, make: Callable[[np.ndarray], np.ndarray], **options: object) -> Callable[[str], None]:
    def edit(file: h5py.File) -> None:
        old = file[dataset][()]
        attributes = dict(file[dataset].attrs)
        del file[dataset]
        new = file.create_dataset(dataset, data=make(old), **options)
        new.attrs.update(attributes)
    return _edit(edit)


def _attribute(element: str, name: str, value: object) -> Callable[[str], None]:
    def edit(file: h5py.File) -> None:
        file[element].attrs[name] = value
    return _edit(edit)


def _delete(element: str) -> Callable[[str], None]:
    return _edit(lambda file: file.__delitem__(element))


def _truncate(fraction: float) -> Callable[[str], None]:
    def corrupt(path: str) -> None:
        os.truncate(path, int(os.path.getsize(path) * fraction))
    return corrupt


def _invalid_utf8(file: h5py.File) -> None:
    attributes = dict(file["obs/_index"].attrs)
    del file["obs/_index"]
    file.create_dataset("obs/_index", data=np.array([b"c0", b"\xff\xfe", b"c2", b"c3", b"c4", b"c5"]))
    file["obs/_index"].attrs.update(attributes)


def _uns_dataset(file: h5py.File) -> None:
    del file["uns"]
    file.create_dataset("uns", data=np.arange(3))


def _dense_x(shape: tuple[int, ...]) -> Callable[[str], None]:
    def edit(file: h5py.File) -> None:
        del file["X"]
        file.create_dataset("X", data=np.ones(shape, dtype=np.float32))
        file["X"].attrs.update({"encoding-type": "array", "encoding-version": "0.2.0"})
    return _edit(edit)


def _unsorted_x(duplicate: bool) -> Callable[[str], None]:
    """Reverse the entries of each row of X (valid for AnnData and scipy, out of order for Daf); with ``duplicate``,
    also repeat a column within a row (invalid)."""
    def edit(file: h5py.File) -> None:
        indptr, indices, data = file["X/indptr"][()], file["X/indices"][()], file["X/data"][()]
        for row in range(N_OBS):
            entries = slice(indptr[row], indptr[row + 1])
            indices[entries], data[entries] = indices[entries][::-1].copy(), data[entries][::-1].copy()
        if duplicate:
            row = int(np.argmax(np.diff(indptr) >= 2))
            indices[indptr[row] + 1] = indices[indptr[row]]
        file["X/indices"][...] = indices
        file["X/data"][...] = data
    return _edit(edit)


HOSTILE: dict[str, Callable[[str], None]] = {
    "X indices negative": _set("X/indices", 0, -1),
    "X indices past the columns": _set("X/indices", 3, N_VAR),
    "X indices huge": _set("X/indices", 5, 2**31 - 1),
    "X indices of floats": _replace("X/indices", lambda old: old.astype(np.float64) + 0.5),
    "X indptr decreasing": _set("X/indptr", 2, 0),
    "X indptr not ending at nnz": _set("X/indptr", -1, 5),
    "X indptr too short": _replace("X/indptr", lambda old: old[:-1]),
    "X indptr 2-D": _replace("X/indptr", lambda old: old.reshape(1, -1)),
    "X data shorter than indices": _replace("X/data", lambda old: old[:-1]),
    "X shape of 3 values": _attribute("X", "shape", np.array([6, 4, 1])),
    "X shape negative": _attribute("X", "shape", np.array([-6, 4])),
    "X shape a string": _attribute("X", "shape", "6x4"),
    "X shape not obs x var": _attribute("X", "shape", np.array([4, 6])),
    "X encoding an integer": _attribute("X", "encoding-type", 7),
    "X encoding an array": _attribute("X", "encoding-type", np.array(["csr_matrix", "x"], dtype=object)),
    "X dense of the wrong shape": _dense_x((N_OBS, N_VAR - 1)),
    "X dense 3-D": _dense_x((N_OBS, N_VAR, 2)),
    "X without indices": _delete("X/indices"),
    "X with duplicate entries": _unsorted_x(duplicate=True),
    "layer CSC indices past the rows": _set("layers/counts/indices", 1, N_OBS + 3),
    "layer CSC indptr too long": _replace("layers/counts/indptr", lambda old: np.append(old, old[-1])),
    "obsp CSR indices past the columns": _set("obsp/distances/indices", 0, N_OBS),
    "obsp CSC indices negative": _set("obsp/connectivities/indices", 2, -3),
    "obsp CSC indptr decreasing": _set("obsp/connectivities/indptr", 3, 0),
    "category codes past the categories": _set("obs/type/codes", 1, 7),
    "category codes below -1": _set("obs/type/codes", 1, -5),
    "category codes of floats": _replace("obs/type/codes", lambda old: old.astype(np.float32)),
    "nullable mask too short": _replace("obs/n/mask", lambda old: old[:-2]),
    "nullable without mask": _delete("obs/n/mask"),
    "obs column too long": _replace("obs/n/values", lambda old: np.append(old, 7)),
    "obs names missing": _delete("obs/_index"),
    "obs column-order names a missing column": _attribute("obs", "column-order", np.array(["type", "gone"],
                                                                                          dtype=object)),
    "obs names not UTF-8": _edit(_invalid_utf8),
    "obs a dataset": _edit(lambda file: (file.__delitem__("obs"), file.create_dataset("obs", data=np.arange(6)))),
    "var missing": _delete("var"),
    "file truncated to 60%": _truncate(0.6),
    "file truncated to 95%": _truncate(0.95),
}

#: Damaged only in ways the import repairs or reports to the unsupported handler: imported, with the right values.
READABLE: dict[str, Callable[[str], None]] = {
    "X rows out of order": _unsorted_x(duplicate=False),
    "uns a dataset": _edit(_uns_dataset),
}


def damaged(folder: Path, cases: dict[str, Callable[[str], None]]) -> list[tuple[str, str]]:
    made = []
    for index, (what, corrupt) in enumerate(cases.items()):
        path = str(folder / f"case{index}.h5ad")
        write_base(path)
        corrupt(path)
        made.append((what, path))
    return made


def import_one(path: str, handler: str) -> str:
    import warnings

    import pydaf
    from pydaf.interop import h5ad_as_daf

    print(path, file=sys.stderr, flush=True)  # the last line tells where a crash happened
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            daf = h5ad_as_daf(path, progress=False, unsupported_handler=handler)
        X = daf.get_matrix("obs", "var", "X")
        dense = np.asarray(X.todense() if hasattr(X, "todense") else X)
        return f"ok: {dense.tolist()}"
    except pydaf.DafError as error:
        return f"{type(error).__name__}: {error}"
    except Exception as error:  # reported as a failure by the test
        return f"UNTYPED {type(error).__name__}: {error}"


def run_child(paths: list[str], handler: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """Import each file (with this ``unsupported_handler``) in a child process: the outcome per path."""
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "tests.hostile_h5ad", handler, *paths], capture_output=True,
                            text=True, env=environment, cwd=ROOT, timeout=600)
    outcomes = {}
    for line in result.stdout.splitlines():
        record = json.loads(line)
        outcomes[record["path"]] = record["outcome"]
    return result, outcomes


if __name__ == "__main__":
    for argument in sys.argv[2:]:
        print(json.dumps({"path": argument, "outcome": import_one(argument, sys.argv[1])}), flush=True)
