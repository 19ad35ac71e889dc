"""A hostile campaign (issue 25, round 2) on the surfaces added since the first one: ZarrDaf directories and
``.daf.zarr.zip`` archives, ZipDaf archives, persistent chains, the H5df undo journal, conversions (``convert``,
``repack``, ``copy_all``) and the command line.

Each probe is a small JSON spec (surface, kind, seed): a child process rebuilds it from the same pristine data set
(``tests/hostile.py``'s), damages it, runs the surface's entry points on it and classifies the probe:

- ``correct``: every value read equals the known value (the pristine data, or, where the damage changed stored bytes,
  what an independent reader reads from them: zarr-python for Zarr, Python's ``zipfile`` plus FilesDaf for ZipDaf);
- ``DafError``: a typed refusal (with its message);
- a failure: ``crash`` (an untyped exception, a traceback, a signal), ``hang`` (the probe's alarm or the batch's
  timeout), ``escape`` (a file outside the probe's data set changed, or appeared), ``loss`` (data that was there
  before a write, or a destination that existed before a failed conversion, reads differently), ``allocation``
  (``MemoryError`` under the child's ``RLIMIT_AS``), ``wrong`` (a value neither known nor what the stored bytes say).

An archive cut short (a killed writer) must read as its last complete commit (or the one being written, if all its
entries are there); reading an earlier commit, or any earlier commit after other damage, is a ``loss``.

The probes, per surface (each kind drawn with a weight, its parameters from the probe's seed):

- ``zarr_dir``: byte flips and truncations of ``zarr.json`` files and chunks; FIFOs, links (out, dangling, loops),
  folders, ``/dev/zero`` or nothing planted at a file or at a whole node; lying consolidated metadata (huge or
  negative shapes, elided chunks, other data types, codecs, fill values, node types); no consolidated metadata;
  planted hidden nodes, a killed overwrite's backup, long and odd names, links out, a huge sparse chunk; mode
  ``w``/``w+`` over somebody's folder or through links planted at the temporaries' names. A quarter of the probes
  then open the damaged data set ``r+``, write, and read everything back (a ``loss`` if anything readable changed).
- ``zarr_zip`` and ``zipdaf`` (root or ``#/g`` group): flips (in the central directory, local headers, data),
  several flips, truncations, appended entries (``..``, absolute, NUL, duplicate, 64 KB names, deflated), lying
  sizes, offsets, methods and entry counts, a huge sparse tail, hostile files at the archive's path, mode ``w``.
- ``chains``: hostile ``base_daf_repository`` (NUL, huge, deep, devices, ``/proc/self/mem``, FIFOs, loops, garbage,
  itself), ``base_daf_view`` and ``base_daf_fingerprint`` (invalid, deeply nested JSON), a base replaced by another
  format, a folder, garbage, a FIFO or a link, chains of records up to 400 deep, cycles, and API misuse.
- ``journal``: a writer killed before its k-th write leaves a real torn file and journal; the journal flipped,
  truncated, extended, beside another file, stale (the file rewritten by h5py since), huge and sparse, random, a
  FIFO/link/folder, read through a hard link; opened ``r`` and ``r+`` (every value from one committed state), then
  written.
- ``convert``: ``convert``/``repack``/``copy_all`` from damaged sources of every format into every destination
  format, new or existing (``overwrite`` or not): the old destination intact after a refusal, the new one equal to
  what the source reads, nothing left beside it.
- ``cli``: every subcommand with hostile paths, destinations (its own source, ``/dev/null``, ``/dev/full``, a folder,
  somebody's file), numbers, queries (random token soups), chains' leaves, and real processes whose standard output
  is ``/dev/full`` or closed.

Probes run many to a child; a child that dies or times out is re-run probe by probe, so each failure is attributed.

``python -m tests.campaign --surface S --count N --seed K`` prints the counts per surface and outcome as JSON
(``--surface all`` runs every surface; ``--failures`` also lists each failing probe with its repro spec).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SURFACES = ("zarr_dir", "zarr_zip", "zipdaf", "chains", "journal", "convert", "cli")
FAILURES = ("crash", "hang", "escape", "loss", "allocation", "wrong")
MEMORY_LIMIT = 3 << 30  # RLIMIT_AS of a child: an allocation beyond the data's size fails as MemoryError
PROBE_SECONDS = 30  # the alarm of one probe (a hang)

#: The suffix of each format's data set path.
SUFFIXES = {"h5df": "x.h5df", "files": "x.daf", "zarr": "x.daf.zarr", "zarrzip": "x.daf.zarr.zip",
            "zip": "x.daf.zip", "h5dfs": "x.h5dfs#/g", "zarrzipg": "x.dafs.zarr.zip#/g", "zipg": "x.dafs.zip#/g"}


class ProbeHang(BaseException):
    """Raised by the alarm of a probe that blocks (a BaseException, so no ``except Exception`` swallows it)."""


# --------------------------------------------------------------------------------------------------------------------
# The data and how its values are read (in the child).


def _pydaf():
    import pydaf
    return pydaf


def _build_steps() -> list[Callable[[Any], Any]]:
    """The writes of the data set of ``tests/hostile.py`` (axes, dense and sparse vectors and matrices, strings), one
    committed operation each."""
    import numpy as np

    from . import hostile
    pydaf = _pydaf()
    note = np.full(hostile.N_CELLS, "", dtype=object)
    note[3] = "x"
    labels = np.full((hostile.N_CELLS, hostile.N_GENES), "", dtype=object)
    labels[1, 1], labels[6, 4] = "a", "b"
    umis = pydaf.SparseMatrixCSC((hostile.N_CELLS, hostile.N_GENES), hostile.COLPTR, hostile.ROWVAL, hostile.NZVAL)
    return [
        lambda daf: daf.set_scalar("organism", "human"),
        lambda daf: daf.add_axis("cell", [f"c{index}" for index in range(hostile.N_CELLS)]),
        lambda daf: daf.add_axis("gene", [f"g{index}" for index in range(hostile.N_GENES)]),
        lambda daf: daf.set_vector("cell", "age", np.arange(hostile.N_CELLS, dtype=np.int64)),
        lambda daf: daf.set_vector("cell", "score", pydaf.SparseVector(hostile.N_CELLS, hostile.NZIND,
                                                                       np.array([0.5, 1.5, 2.5]))),
        lambda daf: daf.set_vector("cell", "note", note),
        lambda daf: daf.set_matrix("cell", "gene", "UMIs", umis, relayout=False),
        lambda daf: daf.set_matrix("gene", "cell", "dense", np.arange(5.0 * hostile.N_CELLS).reshape(
            5, hostile.N_CELLS), relayout=False),
        lambda daf: daf.set_matrix("cell", "gene", "labels", labels, relayout=False),
    ]


def build_into(daf: Any) -> None:
    """Write the campaign's data set into ``daf``."""
    for step in _build_steps():
        step(daf)


#: For the archives: (where the entries of each commit end, the state then) (built with the templates).
_COMMITS: dict[str, list[tuple[int, dict[str, tuple[str, str]]]]] = {}


def build(path: str, kind: str | None = None) -> None:
    """Write the pristine data set at ``path`` (any format) and close it (recording each commit of an archive)."""
    pydaf = _pydaf()
    daf = pydaf.open_daf(path, "w+" if "#" in path else "w", name="campaign!")
    if kind in ("zip", "zarrzip", "zipg", "zarrzipg"):
        memory = pydaf.MemoryDaf(name="known!")
        commits = []
        for step in _build_steps():
            step(daf)
            step(memory)
            with zipfile.ZipFile(file_of(path)) as handle:
                commits.append((handle.start_dir, read_all(lambda: memory, close=False)))
        _COMMITS[kind] = commits
    else:
        build_into(daf)
    daf.format.format_close()
    del daf
    gc.collect()


def canon(value: Any) -> str:
    """A value as comparable text (exact: JSON of the dense list form, NaN as NaN)."""
    import numpy as np
    if hasattr(value, "toarray"):
        value = value.toarray()
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    return json.dumps(value, default=str, allow_nan=True)


def _entries(open_it: Callable[[], Any]) -> dict[str, Callable[[Any], Any]]:
    return {
        "scalar": lambda daf: daf.get_scalar("organism"),
        "axes": lambda daf: sorted(daf.axes_set()),
        "cell": lambda daf: daf.axis_vector("cell"),
        "gene": lambda daf: daf.axis_vector("gene"),
        "age": lambda daf: daf.get_vector("cell", "age"),
        "score": lambda daf: daf.get_vector("cell", "score"),
        "note": lambda daf: daf.get_vector("cell", "note"),
        "UMIs": lambda daf: daf.get_matrix("cell", "gene", "UMIs", relayout=False),
        "UMIs_T": lambda daf: daf.get_matrix("gene", "cell", "UMIs"),
        "dense": lambda daf: daf.get_matrix("gene", "cell", "dense", relayout=False),
        "labels": lambda daf: daf.get_matrix("cell", "gene", "labels", relayout=False),
        "sums": lambda daf: daf.get_np_query("@ cell @ gene :: UMIs >| Sum", cache=False),
    }


VALUE_ENTRIES = tuple(_entries(lambda: None))
#: Entry points whose result is only checked for not crashing (text derived from the values).
TEXT_ENTRIES = ("description", "check")


def read_all(open_it: Callable[[], Any], *, close: bool = True) -> dict[str, tuple[str, str]]:
    """Every entry point of the data set ``open_it()`` opens: ``{entry: ("ok", canon) | ("DafError", message) |
    (failure class, detail)}``."""
    pydaf = _pydaf()
    results: dict[str, tuple[str, str]] = {}
    try:
        daf = open_it()
    except BaseException as error:
        outcome = classify_exception(error)
        return {entry: outcome for entry in (*VALUE_ENTRIES, *TEXT_ENTRIES)}
    for entry, read in _entries(open_it).items():
        try:
            daf.empty_cache()
            results[entry] = ("ok", canon(read(daf)))
        except BaseException as error:
            results[entry] = classify_exception(error)
    for entry in TEXT_ENTRIES:
        try:
            daf.empty_cache()
            text = daf.description() if entry == "description" else pydaf.check_daf(daf)
            results[entry] = ("ok", "text" if isinstance(text, (str, list)) else f"not text: {type(text)}")
        except BaseException as error:
            results[entry] = classify_exception(error)
    if close:
        with contextlib.suppress(Exception):
            daf.format.format_close()
    del daf
    gc.collect()
    return results


def classify_exception(error: BaseException) -> tuple[str, str]:
    pydaf = _pydaf()
    if isinstance(error, ProbeHang):
        raise error
    if isinstance(error, pydaf.DafError):
        return ("DafError", f"{type(error).__name__}: {str(error)[:300]}")
    if isinstance(error, MemoryError):
        return ("allocation", f"{type(error).__name__}: {str(error)[:300]}")
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        raise error
    return ("crash", f"{type(error).__name__}: {str(error)[:300]} @ {_where(error)}")


def _where(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    return " < ".join(f"{Path(frame.filename).name}:{frame.lineno}" for frame in reversed(frames[-3:]))


_EXPECTED: dict[str, str] = {}


def expected() -> dict[str, str]:
    """The known values (a MemoryDaf holding the same data: no storage involved), checked once against numpy."""
    if not _EXPECTED:
        import numpy as np
        pydaf = _pydaf()
        from . import hostile
        memory = pydaf.MemoryDaf(name="known!")
        build_into(memory)
        read = read_all(lambda: memory)
        assert all(outcome == "ok" for outcome, _ in read.values()), read
        _EXPECTED.update({entry: value for entry, (_, value) in read.items()})
        umis = np.zeros((hostile.N_CELLS, hostile.N_GENES), np.float32)
        for column in range(hostile.N_GENES):
            for at in range(hostile.COLPTR[column] - 1, hostile.COLPTR[column + 1] - 1):
                umis[hostile.ROWVAL[at] - 1, column] = hostile.NZVAL[at]
        assert _EXPECTED["UMIs"] == canon(umis) and _EXPECTED["age"] == canon(np.arange(hostile.N_CELLS))
        assert _EXPECTED["sums"] in (canon(umis.sum(axis=0)), canon(umis.sum(axis=1)))
    return _EXPECTED


# --------------------------------------------------------------------------------------------------------------------
# Independent readers of damaged bytes (the oracles of a changed value).


def _sums_axis() -> int:
    import numpy as np
    matrix = np.array(json.loads(expected()["UMIs"]), dtype=np.float64)
    return 0 if canon(matrix.sum(axis=0).astype(np.float32)) == expected()["sums"] else 1


def _oracle_from_arrays(get: Callable[[str], Any], is_group: Callable[[str], bool],
                        axes: Callable[[], list[str]]) -> dict[str, str]:
    """Daf values from the arrays of the Zarr layout (``get(key)``: a numpy array; ``axes()``: the axis names)."""
    import numpy as np
    values: dict[str, str] = {}

    def attempt(entry: str, compute: Callable[[], Any]) -> None:
        try:
            values[entry] = canon(compute())
        except Exception as error:
            values[entry] = f"oracle failed: {error}"

    attempt("axes", lambda: sorted(axes()))
    attempt("scalar", lambda: get("scalars/organism")[()].reshape(-1)[0])
    attempt("cell", lambda: get("axes/cell"))
    attempt("gene", lambda: get("axes/gene"))
    from . import hostile
    try:
        n_cells = len(get("axes/cell"))
    except Exception:
        n_cells = hostile.N_CELLS
    try:
        n_genes = len(get("axes/gene"))
    except Exception:
        n_genes = hostile.N_GENES

    def vector(name: str) -> Any:
        key = f"vectors/cell/{name}"
        if is_group(key):
            nzind, nzval = get(f"{key}/nzind"), get(f"{key}/nzval")
            dense = np.zeros(n_cells, dtype=nzval.dtype)
            dense[nzind.astype(np.int64) - 1] = nzval
            return dense
        return get(key)

    attempt("age", lambda: vector("age"))
    attempt("score", lambda: vector("score"))
    attempt("note", lambda: vector("note"))

    def umis() -> Any:
        key = "matrices/cell/gene/UMIs"
        colptr, rowval = (get(f"{key}/{part}").astype(np.int64) for part in ("colptr", "rowval"))
        nzval = get(f"{key}/nzval")
        dense = np.zeros((n_cells, n_genes), dtype=nzval.dtype)
        for column in range(n_genes):
            for at in range(colptr[column] - 1, colptr[column + 1] - 1):
                dense[rowval[at] - 1, column] = nzval[at]
        return dense

    attempt("UMIs", umis)
    attempt("UMIs_T", lambda: umis().T)
    attempt("sums", lambda: umis().sum(axis=_sums_axis()))
    attempt("dense", lambda: get("matrices/gene/cell/dense").T)
    attempt("labels", lambda: get("matrices/cell/gene/labels").T)
    return values


def zarr_oracle(folder: str) -> dict[str, str]:
    """What zarr-python reads from a ZarrDaf directory, in Daf terms."""
    import zarr
    from zarr.storage import LocalStore
    try:
        group = zarr.open_group(LocalStore(folder, read_only=True), mode="r")
    except Exception as error:
        return {entry: f"oracle failed: {error}" for entry in VALUE_ENTRIES}

    def is_group(key: str) -> bool:
        return isinstance(group[key], zarr.Group)

    try:
        return _oracle_from_arrays(lambda key: group[key][...], is_group,
                                   lambda: [name for name, _ in group["axes"].members()])
    except Exception as error:
        return {entry: f"oracle failed: {error}" for entry in VALUE_ENTRIES}


def _entries_by_central_directory(archive: str) -> list[tuple[str, int, int, int]] | None:
    """(name, data offset, size, method) of each entry, by Python's ``zipfile`` (None if it can't parse it)."""
    try:
        with zipfile.ZipFile(archive) as handle:
            infos = handle.infolist()
    except Exception:
        return None
    data = Path(archive).read_bytes()
    entries = []
    for info in infos:
        start = info.header_offset
        if data[start:start + 4] != b"PK\x03\x04":
            return None
        name_length, extra_length = struct.unpack_from("<HH", data, start + 26)
        entries.append((info.filename, start + 30 + name_length + extra_length, info.compress_size,
                        info.compress_type))
    return entries


def _entries_by_local_headers(archive: str) -> list[tuple[str, int, int, int]]:
    """The same, walking the local headers from the start (as an append-only archive is written), up to the first
    that does not parse."""
    data = Path(archive).read_bytes()
    entries: list[tuple[str, int, int, int]] = []
    try:
        _walk_local_headers(data, entries)
    except struct.error:
        pass
    return entries


def _walk_local_headers(data: bytes, entries: list[tuple[str, int, int, int]]) -> None:
    """Every local header found by its signature (a damaged one is skipped, the scan goes on)."""
    position = data.find(b"PK\x03\x04")
    while position != -1 and position + 30 <= len(data):
        (_, _, _, method, _, _, _, size, _, name_length, extra_length) = struct.unpack_from("<IHHHHHIIIHH", data,
                                                                                          position)
        name = data[position + 30:position + 30 + name_length].decode("utf-8", "replace")
        extra = data[position + 30 + name_length:position + 30 + name_length + extra_length]
        at = 0
        while at + 4 <= len(extra):  # a ZIP64 extra field holds the real sizes
            field, length = struct.unpack_from("<HH", extra, at)
            if field == 1 and size == 0xFFFFFFFF and length >= 16 and at + 20 <= len(extra):
                size = struct.unpack_from("<Q", extra, at + 12)[0]
            at += 4 + length
        start = position + 30 + name_length + extra_length
        if start + size <= len(data):
            entries.append((name, start, size, method))
        position = data.find(b"PK\x03\x04", position + 4)


def raw_extract(archive: str, folder: str, prefix: str = "", *, walk: bool = False) -> bool:
    """Extract a (damaged) archive: its entries by Python's ``zipfile`` (or, with ``walk`` or if that can't parse
    the central directory, by walking the local headers), their data read without CRC checks (pydaf maps entries,
    it does not check their CRCs); later copies of a name win (append-only archives). False if nothing can be made
    of it."""
    entries = None if walk else _entries_by_central_directory(archive)
    if entries is None:
        entries = _entries_by_local_headers(archive)
        if not entries:
            return False
    data = Path(archive).read_bytes()
    written = 0
    for name, start, size, method in entries:
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        relative = name[len(prefix):]
        if ".." in relative.split("/") or relative.startswith("/") or "\0" in relative or not relative:
            continue
        body = data[start:start + size]
        if method == zipfile.ZIP_DEFLATED:
            try:
                body = zlib.decompress(body, -15)
            except zlib.error:
                continue
        elif method != zipfile.ZIP_STORED:
            continue
        target = Path(folder, relative)
        try:  # (an entry whose damaged name can't be a file is skipped)
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir():
                continue
            target.write_bytes(body)
            written += 1
        except OSError:
            continue
    return written > 0


def files_oracle(folder: str) -> dict[str, str]:
    """A FilesDaf directory read by pydaf's FilesDaf (hardened by the first campaign): the oracle of ZipDaf's
    container layer."""
    pydaf = _pydaf()
    outcomes = read_all(lambda: pydaf.FilesDaf(folder, "r"))
    return {entry: value if outcome == "ok" else f"oracle failed: {value}" for entry, (outcome, value)
            in outcomes.items()}


# --------------------------------------------------------------------------------------------------------------------
# Templates (pristine data sets, built once per child).

_TEMPLATES: dict[str, str] = {}
_TEMPLATE_ROOT: list[str] = []


def template(kind: str) -> str:
    """The path of a pristine data set of format ``kind`` (built once per child)."""
    if kind not in _TEMPLATES:
        if not _TEMPLATE_ROOT:
            _TEMPLATE_ROOT.append(tempfile.mkdtemp(prefix="campaign-templates-"))
        folder = os.path.join(_TEMPLATE_ROOT[0], kind)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        path = os.path.join(folder, SUFFIXES[kind])
        build(path, kind)
        _TEMPLATES[kind] = path
    return _TEMPLATES[kind]


def file_of(path: str) -> str:
    """The file or directory holding a data set path (without ``#/group``)."""
    return path.split("#", 1)[0]


def copy_template(kind: str, work: str, name: str | None = None) -> str:
    """A copy of the pristine data set of ``kind`` in ``work``: its path."""
    source = template(kind)
    target = os.path.join(work, name or SUFFIXES[kind])
    if os.path.isdir(file_of(source)):
        shutil.copytree(file_of(source), file_of(target), symlinks=True)
    else:
        shutil.copyfile(file_of(source), file_of(target))
    return target


def listing(folder: str) -> list[str]:
    """The files under ``folder`` (relative, sorted), directories marked with a slash."""
    found = []
    for parent, folders, files in os.walk(folder):
        for name in folders:
            found.append(os.path.relpath(os.path.join(parent, name), folder) + "/")
        for name in files:
            found.append(os.path.relpath(os.path.join(parent, name), folder))
    return sorted(found)


# --------------------------------------------------------------------------------------------------------------------
# Damage.


def flip(path: str, offset: int, xor: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ xor]))


def truncate(path: str, length: int) -> None:
    os.truncate(path, length)


def replace_with(path: str, what: str, outside: str) -> None:
    """Put something hostile where the file ``path`` was: a FIFO, a symbolic link to a sentinel outside, a
    folder, a dangling link, a link loop, nothing."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    if what == "fifo":
        os.mkfifo(path)
    elif what == "symlink-outside":
        os.symlink(os.path.join(outside, "sentinel"), path)
    elif what == "symlink-dangling":
        os.symlink(os.path.join(outside, "no-such-file"), path)
    elif what == "symlink-loop":
        os.symlink(path, path)
    elif what == "folder":
        os.mkdir(path)
    elif what == "missing":
        pass
    elif what == "devnull":
        os.symlink("/dev/zero", path)
    else:
        raise ValueError(what)


HOSTILE_FILES = ("fifo", "symlink-outside", "symlink-dangling", "symlink-loop", "folder", "missing", "devnull")


def _files_in(folder: str) -> list[str]:
    return [name for name in listing(folder) if not name.endswith("/")]


def _set_json(path: str, edit: Callable[[Any], Any]) -> None:
    with open(path) as handle:
        content = json.load(handle)
    with open(path, "w") as handle:
        json.dump(edit(content), handle)


def _lie_in_zarr_metadata(folder: str, rng: random.Random) -> tuple[str, str]:
    """Edit one array's metadata, in the root's consolidated metadata and in its own ``zarr.json``: (its key, what was
    edited)."""
    key, edit, what = _zarr_metadata_edits(rng)

    def change(meta: Any) -> Any:
        inner = meta["consolidated_metadata"]["metadata"]
        inner[key] = edit(inner[key])
        return meta
    _set_json(os.path.join(folder, "zarr.json"), change)
    with contextlib.suppress(FileNotFoundError, KeyError, TypeError):
        _set_json(os.path.join(folder, key, "zarr.json"), edit)
    return key, what


def _zarr_metadata_edits(rng: random.Random) -> tuple[str, Callable[[Any], Any], str]:
    """A lying but well-formed edit of a ZarrDaf array's metadata: (array key, edit, description)."""
    arrays = ["axes/cell", "axes/gene", "vectors/cell/age", "vectors/cell/score/nzind", "vectors/cell/score/nzval",
              "vectors/cell/note", "matrices/cell/gene/UMIs/colptr", "matrices/cell/gene/UMIs/rowval",
              "matrices/cell/gene/UMIs/nzval", "matrices/gene/cell/dense", "matrices/cell/gene/labels",
              "scalars/organism"]
    key = rng.choice(arrays)
    huge = rng.choice([2**31, 2**32 + 3, 2**40, 2**62, 10**15, 3 * 10**9])
    choice = rng.randrange(12)

    def shape(edit: Callable[[list[int]], list[int]]) -> Callable[[Any], Any]:
        def change(meta: Any) -> Any:
            meta["shape"] = edit(list(meta["shape"]))
            return meta
        return change

    def chunk(edit: Callable[[list[int]], list[int]]) -> Callable[[Any], Any]:
        def change(meta: Any) -> Any:
            meta["chunk_grid"]["configuration"]["chunk_shape"] = edit(list(meta["chunk_grid"]["configuration"]
                                                                            ["chunk_shape"]))
            return meta
        return change

    def field(name: str, value: Any) -> Callable[[Any], Any]:
        def change(meta: Any) -> Any:
            meta[name] = value
            return meta
        return change

    edits: list[tuple[Callable[[Any], Any], str]] = [
        (shape(lambda old: [huge, *old[1:]]), f"shape[0]={huge}"),
        (shape(lambda old: [*old, huge]), f"an extra dimension of {huge}"),
        (shape(lambda old: [huge] * len(old)), f"every dimension {huge}"),
        (lambda meta: chunk(lambda old: [huge] * len(old))(shape(lambda old: [huge] * len(old))(meta)),
         f"shape and chunks {huge} (one elided chunk)"),
        (chunk(lambda old: [1] * len(old)), "chunks of 1 (elided chunks)"),
        (shape(lambda old: [-1, *old[1:]]), "negative shape"),
        (field("data_type", rng.choice(["int8", "float16", "complex128", "bool", "uint64", "string", "r64",
                                        "datetime64"])), "another data type"),
        (field("fill_value", rng.choice([1e308, "NaN", -1, "x", None, [1, 2]])), "another fill value"),
        (field("codecs", rng.choice([[{"name": "gzip", "configuration": {"level": 1}}], [],
                                     [{"name": "bytes", "configuration": {"endian": "big"}}],
                                     [{"name": "nosuchcodec"}]])), "other codecs"),
        (field("node_type", "group"), "an array that says it is a group"),
        (field("zarr_format", rng.choice([2, 4, "3"])), "another zarr_format"),
        (shape(lambda old: [0] * len(old)), "shape of zeros"),
    ]
    edit, what = edits[choice]
    return key, edit, what


def damage_zarr_folder(folder: str, rng: random.Random, outside: str, kind: str) -> str:
    """Damage a ZarrDaf directory; a description of the damage."""
    files = _files_in(folder)
    metadata = [name for name in files if name.endswith("zarr.json")]
    chunks = [name for name in files if not name.endswith("zarr.json")]
    if kind == "flip":
        name = rng.choice(metadata if rng.random() < 0.5 else chunks)
        size = os.path.getsize(os.path.join(folder, name))
        offset, xor = rng.randrange(size), rng.randrange(1, 256)
        flip(os.path.join(folder, name), offset, xor)
        return f"flip {name}[{offset}] ^= {xor}"
    if kind == "truncate":
        name = rng.choice(metadata if rng.random() < 0.5 else chunks)
        size = os.path.getsize(os.path.join(folder, name))
        length = rng.randrange(size)
        truncate(os.path.join(folder, name), length)
        return f"truncate {name} to {length}"
    if kind == "plant":
        what = rng.choice(HOSTILE_FILES)
        name = rng.choice(files)
        replace_with(os.path.join(folder, name), what, outside)
        return f"{what} at {name}"
    if kind == "plant-dir":  # a whole node replaced
        nodes = sorted({name.rsplit("/", 2)[0] for name in chunks if name.count("/") >= 2})
        name = rng.choice(nodes)
        what = rng.choice(("fifo", "symlink-outside", "symlink-loop", "missing"))
        replace_with(os.path.join(folder, name), what, outside)
        return f"{what} at the node {name}"
    if kind == "consolidated":  # lie in the consolidated metadata of the root (what pydaf and zarr-python read)
        key, what = _lie_in_zarr_metadata(folder, rng)
        return f"{what} in the metadata of {key}"
    if kind == "elide":  # a lying array with its chunk removed: nothing to read, a declared size to allocate
        key, what = _lie_in_zarr_metadata(folder, rng)
        shutil.rmtree(os.path.join(folder, key, "c"), ignore_errors=True)
        return f"{what} in {key}, its chunks removed"
    if kind == "unconsolidated":  # drop the consolidated metadata: every node's own zarr.json is read
        _set_json(os.path.join(folder, "zarr.json"), lambda meta: {k: v for k, v in meta.items()
                                                                  if k != "consolidated_metadata"})
        rest = rng.choice(["flip", "truncate", "plant"])
        return "no consolidated metadata; " + damage_zarr_folder(folder, rng, outside, rest)
    if kind == "extra":  # planted nodes, hostile names, a killed overwrite's backup
        choice = rng.randrange(8)
        if choice == 0:
            name = rng.choice(["vectors/cell/zarr.json.pydaf-backup", "vectors/cell/.age.pydaf-backup",
                               "vectors/cell/.age.pydaf-tmp-1-1", "axes/.cell.pydaf-backup"])
            shutil.copytree(os.path.join(folder, "vectors/cell/age"), os.path.join(folder, name))
            return f"a planted hidden node {name}"
        if choice == 1:  # a killed overwrite of age: the node renamed to its backup, the new one not there
            os.rename(os.path.join(folder, "vectors/cell/age"), os.path.join(folder, "vectors/cell/.age.pydaf-backup"))
            return "age moved to its backup (a killed overwrite)"
        if choice == 2:
            name = "x" * rng.choice([200, 255, 256, 1000, 5000])
            os.makedirs(os.path.join(folder, "vectors/cell", name[:255]), exist_ok=True)
            return f"a planted vector node of {len(name[:255])} characters"
        if choice == 3:
            name = rng.choice(["a\nb", "a\\b", "..", ".", " ", "zarr.json", "c", "é", "\udcff".encode(
                "utf-8", "surrogateescape").decode("latin-1")])
            with contextlib.suppress(OSError):
                os.makedirs(os.path.join(folder, "vectors/cell", name), exist_ok=True)
            return f"a planted vector node named {name!r}"
        if choice == 4:
            os.symlink(outside, os.path.join(folder, "vectors/cell/outside"))
            return "a planted link to a folder outside"
        if choice == 5:
            os.mkfifo(os.path.join(folder, "vectors/cell/fifo"))
            return "a planted FIFO vector node"
        if choice == 6:
            Path(folder, "vectors/cell/age/c/1").write_bytes(os.urandom(rng.randrange(1, 400)))
            return "an extra chunk past the shape"
        os.truncate(os.path.join(folder, "vectors/cell/age/c/0"), rng.choice([10**10, 2**40]))
        return "a chunk file made huge (sparse)"
    raise ValueError(kind)


def archive_regions(path: str) -> list[tuple[int, int, str]]:
    """The regions of an archive: (start, end, what) for each local header, data and the central directory."""
    regions = []
    with zipfile.ZipFile(path) as handle:
        infos = handle.infolist()
        data = Path(path).read_bytes()
        for info in infos:
            start = info.header_offset
            name_length, extra_length = struct.unpack_from("<HH", data, start + 26)
            body = start + 30 + name_length + extra_length
            regions.append((start, body, f"local header of {info.filename}"))
            regions.append((body, body + info.compress_size, f"data of {info.filename}"))
    end = max(region[1] for region in regions)
    regions.append((end, os.path.getsize(path), "central directory and end records"))
    return regions


def damage_archive(path: str, rng: random.Random, outside: str, kind: str, inner: str) -> str:
    """Damage a ZIP archive (``inner``: "zarr" or "files", the layout inside)."""
    size = os.path.getsize(path)
    regions = archive_regions(path)
    if kind == "flip":
        choice = rng.random()
        if choice < 0.4:
            start, end, what = regions[-1]
        elif choice < 0.7:
            start, end, what = rng.choice([region for region in regions if region[2].startswith("local")])
        else:
            start, end, what = rng.choice(regions)
        if end <= start:
            start, end, what = 0, size, "anywhere"
        offset, xor = rng.randrange(start, end), rng.randrange(1, 256)
        flip(path, offset, xor)
        return f"flip [{offset}] ^= {xor} ({what})"
    if kind == "flips":
        done = []
        for _ in range(rng.randrange(2, 6)):
            offset, xor = rng.randrange(size), rng.randrange(1, 256)
            flip(path, offset, xor)
            done.append(offset)
        return f"{len(done)} flips at {done}"
    if kind == "truncate":
        length = rng.randrange(size) if rng.random() < 0.5 else rng.randrange(max(0, size - 200), size)
        truncate(path, length)
        return f"truncate to {length} of {size}"
    if kind == "plant":
        what = rng.choice(HOSTILE_FILES)
        replace_with(path, what, outside)
        return f"{what} at the archive"
    if kind == "append":  # an appended hostile entry (written by Python's zipfile: a new central directory)
        choice = rng.randrange(9)
        names = {
            0: "../../outside/sentinel", 1: "/etc/passwd", 2: "vectors/cell/age\0.data", 3: "daf.json",
            4: "axes/cell.txt" if inner == "files" else "axes/cell/c/0",
            5: "vectors/cell/age.data" if inner == "files" else "vectors/cell/age/c/0",
            6: "scalars/organism.json" if inner == "files" else "scalars/organism/zarr.json",
            7: "x" * rng.choice([300, 5000, 65535]), 8: "vectors/cell/../../../escape.data",
        }
        name = names[choice]
        body = os.urandom(rng.randrange(0, 500)) if rng.random() < 0.5 else b'{"type":"String","value":"mouse"}'
        method = zipfile.ZIP_DEFLATED if rng.random() < 0.3 else zipfile.ZIP_STORED
        try:
            with zipfile.ZipFile(path, "a", compression=method) as handle:
                handle.writestr(zipfile.ZipInfo(name), body)
        except Exception as error:
            return f"(zipfile refused {name!r}: {error})"
        return f"an appended entry {name[:60]!r} ({len(body)} bytes, method {method})"
    if kind == "lie":  # a well-formed archive whose records lie: sizes, counts, offsets, methods
        data = bytearray(Path(path).read_bytes())
        central = data.rfind(b"PK\x01\x02")
        records = []
        position = data.find(b"PK\x01\x02")
        while position != -1:
            records.append(position)
            position = data.find(b"PK\x01\x02", position + 4)
        choice = rng.randrange(8)
        target = rng.choice(records) if records else central
        value = rng.choice([0, 1, 0xFFFFFFFE, 0x7FFFFFFF, size, size * 2, 2**31])
        if choice == 0:
            struct.pack_into("<I", data, target + 20, value)  # compressed size
            what = f"central compressed size {value}"
        elif choice == 1:
            struct.pack_into("<I", data, target + 24, value)  # uncompressed size
            what = f"central uncompressed size {value}"
        elif choice == 2:
            struct.pack_into("<I", data, target + 42, value)  # local header offset
            what = f"central local header offset {value}"
        elif choice == 3:
            struct.pack_into("<H", data, target + 10, rng.choice([8, 12, 14, 99]))  # method
            what = "central compression method"
        elif choice == 4:
            eocd = data.rfind(b"PK\x05\x06")
            count = rng.choice([0, 1, 0xFFFF, 0xFFFE])
            struct.pack_into("<HH", data, eocd + 8, count, count)
            what = f"end record entry count {count}"
        elif choice == 5:
            eocd64 = data.rfind(b"PK\x06\x06")
            if eocd64 == -1:
                return "no ZIP64 end record"
            count = rng.choice([0, 2**40, 2**63, 1])
            struct.pack_into("<QQ", data, eocd64 + 24, count, count)
            what = f"ZIP64 end record entry count {count}"
        elif choice == 6:
            eocd64 = data.rfind(b"PK\x06\x06")
            if eocd64 == -1:
                return "no ZIP64 end record"
            struct.pack_into("<Q", data, eocd64 + 40, rng.choice([0, 2**40, 2**63, size]))
            what = "ZIP64 central directory size"
        else:
            struct.pack_into("<H", data, target + 28, rng.choice([0, 1, 0xFFFF, 300]))  # name length
            what = "central name length"
        Path(path).write_bytes(bytes(data))
        return what
    if kind == "sparse-huge":  # the archive made huge (a sparse tail), or a huge declared comment
        os.truncate(path, size + rng.choice([2**32, 2**40]))
        return "a huge sparse tail"
    raise ValueError(kind)


# --------------------------------------------------------------------------------------------------------------------
# Surfaces: each builds its probes (specs) and runs one (in the child).

READ_KINDS = {
    "zarr_dir": [("mode-w", 8), ("flip", 30), ("truncate", 12), ("plant", 8), ("plant-dir", 4), ("consolidated", 12),
                 ("elide", 10), ("unconsolidated", 12), ("extra", 8)],
    "zarr_zip": [("mode-w", 8), ("flip", 40), ("flips", 8), ("truncate", 15), ("plant", 4), ("append", 12), ("lie", 15),
                 ("sparse-huge", 2)],
    "zipdaf": [("mode-w", 8), ("flip", 40), ("flips", 8), ("truncate", 15), ("plant", 4), ("append", 12), ("lie", 15),
               ("sparse-huge", 2)],
}


def _weighted(rng: random.Random, kinds: list[tuple[str, int]]) -> str:
    return rng.choices([kind for kind, _ in kinds], weights=[weight for _, weight in kinds])[0]


def make_probes(surface: str, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` probe specs of ``surface`` (deterministic in ``seed``)."""
    rng = random.Random(f"{surface}-{seed}")
    probes = []
    for index in range(count):
        spec: dict[str, Any] = {"surface": surface, "index": index, "seed": rng.randrange(2**32)}
        if surface in READ_KINDS:
            spec["kind"] = _weighted(rng, READ_KINDS[surface])
            spec["write"] = rng.random() < 0.25  # then also open for writing, write, and read everything back
            spec["group"] = surface != "zarr_dir" and rng.random() < 0.3  # x.dafs.zip#/g: one of several
        elif surface == "chains":
            spec["kind"] = rng.choice(CHAIN_KINDS)
        elif surface == "journal":
            spec["kind"] = _weighted(rng, JOURNAL_KINDS)
        elif surface == "convert":
            spec["kind"] = rng.choice(("convert", "convert", "repack", "copy_all"))
        elif surface == "cli":
            spec["kind"] = rng.choice(CLI_KINDS)
        probes.append(spec)
    return probes


def run_probe(spec: dict[str, Any], scratch: str) -> dict[str, Any]:
    """Run one probe in a fresh folder under ``scratch``: ``{"outcome", "name", "detail"}``."""
    probe_root = os.path.join(scratch, f"probe{spec['surface']}{spec['index']}")
    work, outside = os.path.join(probe_root, "work"), os.path.join(probe_root, "outside")
    os.makedirs(work)
    os.makedirs(outside)
    Path(outside, "sentinel").write_text("sentinel")
    rng = random.Random(spec["seed"])
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _alarm)
    seconds = spec.get("seconds", PROBE_SECONDS)
    signal.alarm(seconds)
    try:
        name, outcome, detail = RUNNERS[spec["surface"]](spec, rng, work, outside)
    except ProbeHang:
        name, outcome, detail = "?", "hang", f"no answer in {seconds} s"
    except BaseException as error:
        name, outcome, detail = "?", "crash", f"{type(error).__name__}: {error} @ {_where(error)}"
    finally:
        signal.alarm(0)
    if listing(outside) != ["sentinel"] or Path(outside, "sentinel").read_text() != "sentinel":
        outcome, detail = "escape", f"outside now holds {listing(outside)[:5]}; {detail}"
    extra = sorted(set(os.listdir(probe_root)) - {"work", "outside"})
    extra += sorted(set(os.listdir(scratch)) - {os.path.basename(probe_root)})
    if extra:
        outcome, detail = "escape", f"written beside the data set's folder: {extra[:5]}; {detail}"
    _remove_tree(probe_root)
    return {"surface": spec["surface"], "index": spec["index"], "name": name, "outcome": outcome,
            "detail": detail[:600], "seconds": round(time.monotonic() - started, 3)}


def _alarm(signum: int, frame: Any) -> None:
    raise ProbeHang()


def _remove_tree(folder: str) -> None:
    for parent, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(parent, name)
            with contextlib.suppress(OSError):
                if not os.path.islink(path):
                    os.chmod(path, 0o755 if os.path.isdir(path) else 0o644)
    shutil.rmtree(folder, ignore_errors=True)


def judge(outcomes: dict[str, tuple[str, str]], oracle: Callable[[], dict[str, str]] | None,
          known: dict[str, str] | None = None) -> tuple[str, str]:
    """The outcome of a probe from its entry points' outcomes: the worst failure, else DafError if any entry raised
    one, else correct. A value that differs from the known one is checked against the ``oracle``."""
    known = known or expected()
    failures: list[str] = []
    read = {entry: value for entry, (outcome, value) in outcomes.items() if outcome == "ok"
            and entry not in TEXT_ENTRIES}
    if read and all(known[entry] == value for entry, value in read.items()):
        oracle = None  # (every value read is the known one)
    errors: list[str] = []
    oracle_values: dict[str, str] | None = None
    for entry, (outcome, value) in outcomes.items():
        if outcome == "ok":
            if entry in TEXT_ENTRIES:
                if value != "text":
                    failures.append(f"crash: {entry}: {value}")
                continue
            if value == known[entry] or (entry == "sums" and _close(value, known[entry])):
                continue
            if oracle is not None and oracle_values is None:
                oracle_values = oracle()
            if oracle_values is not None and any(
                    value == said or (entry == "sums" and _close(value, said))
                    for said in (oracle_values.get(entry), oracle_values.get(entry + "/walk")) if said is not None):
                continue
            seen = oracle_values.get(entry, "no oracle")[:120] if oracle_values else "no oracle"
            failures.append(f"wrong: {entry}: read {value[:120]} (known {known[entry][:80]}; the stored bytes say "
                            f"{seen})")
        elif outcome == "DafError":
            errors.append(f"{entry}: {value}")
        else:
            failures.append(f"{outcome}: {entry}: {value}")
    if failures:
        worst = next(kind for kind in ("allocation", "hang", "crash", "escape", "loss", "wrong")
                     if any(failure.startswith(kind) for failure in failures))
        return worst, "; ".join(failures)[:600]
    if errors:
        return "DafError", errors[0][:300]
    return "correct", ""


def _judge_commits(outcomes: dict[str, tuple[str, str]], commits: list[tuple[int, dict[str, tuple[str, str]]]],
                   damage: str, judged: tuple[str, str]) -> tuple[str, str]:
    """An archive that reads as one of its earlier commits: right after a truncation that cut off the later
    commits (a killed writer), a silent loss of committed data after any other damage."""
    read = {entry: value for entry, (outcome, value) in outcomes.items()
            if outcome == "ok" and entry not in TEXT_ENTRIES}
    matching = [index for index, (_, state) in enumerate(commits)
                if all(state[entry] == ("ok", value) for entry, value in read.items())]
    final = len(commits) - 1
    if not read or not matching or final in matching:
        return judged
    if "truncate to " in damage:
        length = int(damage.split("truncate to ")[1].split()[0])
        complete = max((index for index, (end, _) in enumerate(commits) if end <= length), default=-1)
        if complete in matching or complete + 1 in matching:  # (the cut batch's entries may all be there)
            errors = [f"{entry}: {value}" for entry, (outcome, value) in outcomes.items() if outcome == "DafError"]
            return ("DafError", errors[0][:300]) if errors else ("correct", "")
        return "loss", (f"truncated at {length}: reads as commit {matching[-1]} of {final} (commit {complete} is "
                        f"complete in the file)")
    return "loss", (f"damaged (not truncated): reads silently as the earlier commit {matching[-1]} of {final} "
                    f"(values read: {', '.join(sorted(read))})")


def _close(value: str, other: str) -> bool:
    """Whether two sums agree but for the rounding of a different order of addition."""
    import numpy as np
    try:
        left, right = np.array(json.loads(value), dtype=np.float64), np.array(json.loads(other), dtype=np.float64)
        return left.shape == right.shape and bool(np.allclose(left, right, rtol=1e-5, equal_nan=True))
    except (ValueError, TypeError):
        return False


def _open_any(path: str, mode: str = "r") -> Callable[[], Any]:
    return lambda: _pydaf().open_daf(path, mode)


def run_read_surface(spec: dict[str, Any], rng: random.Random, work: str, outside: str) -> tuple[str, str, str]:
    """ZarrDaf directory, ``.daf.zarr.zip`` and ZipDaf: damage, read everything, maybe write and read again."""
    surface, kind = spec["surface"], spec["kind"]
    fmt = {"zarr_dir": "zarr", "zarr_zip": "zarrzip", "zipdaf": "zip"}[surface]
    if kind == "mode-w":
        return run_mode_w(fmt, rng, work, outside)
    if spec.get("group"):
        fmt += "g"
    path = copy_template(fmt, work)
    prefix = "g/" if spec.get("group") else ""
    if surface == "zarr_dir":
        name = damage_zarr_folder(path, rng, outside, kind)
    else:
        name = damage_archive(file_of(path), rng, outside, kind, "zarr" if surface == "zarr_zip" else "files")
    name = f"{kind}{' (a group)' if prefix else ''}: {name}"

    def oracle() -> dict[str, str]:
        """What the stored bytes say: zarr-python on the folder, or the archive extracted (by its central directory
        and by its local headers: an entry agreeing with either is what the bytes say)."""
        if surface == "zarr_dir":
            return zarr_oracle(path)
        merged: dict[str, str] = {}
        for walk in (False, True):
            folder = os.path.join(tempfile.mkdtemp(prefix="campaign-oracle-"), "x")
            try:
                archive = file_of(path)
                if not (os.path.isfile(archive) and not os.path.islink(archive)
                        and raw_extract(archive, folder, prefix, walk=walk)):
                    continue
                values = zarr_oracle(folder) if surface == "zarr_zip" else files_oracle(folder)
            finally:
                shutil.rmtree(os.path.dirname(folder), ignore_errors=True)
            for entry, value in values.items():
                if entry not in merged or merged[entry].startswith("oracle failed"):
                    merged[entry] = value
                elif not value.startswith("oracle failed") and value != merged[entry]:
                    merged[entry + "/walk"] = value
        return merged

    outcomes = read_all(_open_any(path))
    outcome, detail = judge(outcomes, oracle)
    if fmt in _COMMITS:
        outcome, detail = _judge_commits(outcomes, _COMMITS[fmt], name, (outcome, detail))
    if "a killed overwrite" in name and outcome not in FAILURES and outcomes["age"] != ("ok", expected()["age"]):
        # The overwrite never committed: the value in the backup is the committed one, and must be what reads.
        outcome, detail = "loss", f"the committed age held in the backup does not read: {outcomes['age'][1][:200]}"
    if outcome in FAILURES or not spec.get("write"):
        return name, outcome, detail
    # A write into the damaged data set: refused, or done without changing what was readable before.
    before = outcomes
    try:
        daf = _pydaf().open_daf(path, "r+")
        import numpy as np
        daf.set_vector("cell", "written", np.arange(40, dtype=np.float32) / 2)
        daf.set_scalar("organism", "mouse", overwrite=True) if not fmt.startswith("zip") else daf.set_scalar("added", 7)
        daf.format.format_close()
        del daf
        gc.collect()
        wrote = True
    except BaseException as error:
        result = classify_exception(error)
        if result[0] != "DafError":
            return name + " + write", result[0], f"write: {result[1]}"
        wrote = False
    after = read_all(_open_any(path))
    lost = []
    for entry, (was, value) in before.items():
        now = after[entry]
        if entry == "scalar" and wrote and not fmt.startswith("zip"):
            if now[0] == "ok" and now[1] != canon("mouse"):
                lost.append(f"scalar: {now[1]} after writing mouse")
            continue
        if was == "ok" and now[0] in FAILURES:
            return name + " + write", now[0], f"after the write: {entry}: {now[1]}"
        if was == "ok" and entry not in TEXT_ENTRIES and (now[0] != "ok" or now[1] != value):
            lost.append(f"{entry}: was {value[:60]}, now {now[1][:100]}")
    if lost:
        return name + " + write", "loss", "; ".join(lost)[:600]
    if wrote:
        try:
            daf = _pydaf().open_daf(path, "r")
            written = canon(daf.get_vector("cell", "written"))
            import numpy as np
            if written != canon(np.arange(40, dtype=np.float32) / 2):
                return name + " + write", "loss", f"the written vector reads {written[:100]}"
        except BaseException as error:
            result = classify_exception(error)
            if result[0] != "DafError":
                return name + " + write", result[0], f"reading the written vector: {result[1]}"
            return name + " + write", "loss", f"a committed write can't be read back: {result[1]}"
    if not wrote:
        return name + " + write (refused)", outcome if outcome != "correct" else "DafError", detail or "write refused"
    return name + " + write", outcome, detail


def run_mode_w(fmt: str, rng: random.Random, work: str, outside: str) -> tuple[str, str, str]:
    """Mode "w" (and "w+") where something is planted: a folder or file that is not a Daf data set, links at the
    names of its temporaries, the path itself a link to outside; nothing that is not the data set's may change."""
    pydaf = _pydaf()
    path = os.path.join(work, SUFFIXES[fmt])
    choice = rng.randrange(7)
    mode = rng.choice(("w", "w", "w+"))
    keep: dict[str, bytes] = {}
    if choice == 0:  # a folder (or file) of somebody's files under the data set's name
        if fmt == "zarr":
            os.mkdir(path)
            for index in range(rng.randrange(1, 4)):
                Path(path, f"notes{index}.txt").write_bytes(os.urandom(50))
                keep[os.path.join(path, f"notes{index}.txt")] = Path(path, f"notes{index}.txt").read_bytes()
            if rng.random() < 0.5:  # (mode w+ may make a plain Zarr group a Daf one: only the other files are kept)
                Path(path, "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
                if mode == "w":
                    keep[os.path.join(path, "zarr.json")] = Path(path, "zarr.json").read_bytes()
            what = "a folder of somebody's files (a plain Zarr group maybe) under the name"
        else:
            Path(path).write_bytes(os.urandom(rng.randrange(0, 3000)))
            keep[path] = Path(path).read_bytes()
            what = "somebody's non-ZIP file under the name"
    elif choice == 1:  # a ZIP that is not a Daf data set
        if fmt == "zarr":
            return run_mode_w(fmt, random.Random(rng.random()), work, outside)
        with zipfile.ZipFile(path, "w") as handle:
            handle.writestr("report.txt", "somebody's report")
        keep[path] = Path(path).read_bytes()
        what = "somebody's ZIP archive (not Daf) under the name"
    elif choice == 2:  # links at the temporaries' names (this process's id: the names a writer would pick)
        pid = os.getpid()
        names = [f".{SUFFIXES[fmt]}.pydaf-new-{pid}", f".{SUFFIXES[fmt]}.pydaf-tmp-{pid}-1",
                 f".{SUFFIXES[fmt]}.pydaf-tmp-{pid}-0", f".{SUFFIXES[fmt]}.pydaf-backup",
                 f"{SUFFIXES[fmt]}.tmp", f".{SUFFIXES[fmt]}.tmp-{pid}"]
        for name in names:
            os.symlink(os.path.join(outside, "sentinel"), os.path.join(work, name))
        if rng.random() < 0.5:
            copy_template(fmt, work)
        what = "links to a file outside at the names of temporaries"
    elif choice == 3:  # the data set's path a link to a folder or file outside
        target = outside if fmt == "zarr" else os.path.join(outside, "sentinel")
        os.symlink(target, path)
        what = "the path a link to outside"
    elif choice == 4:  # an existing data set (replaced: allowed), checked to read as the new one
        copy_template(fmt, work)
        what = "an existing data set (w replaces it)"
    elif choice == 5:  # a FIFO or a folder under an archive's name
        if fmt == "zarr":
            Path(path).write_bytes(b"not a folder")
            keep[path] = b"not a folder"
            what = "a file under a Zarr folder's name"
        else:
            os.mkfifo(path) if rng.random() < 0.5 else os.mkdir(path)
            what = "a FIFO or folder under an archive's name"
    else:  # inside a Zarr folder: links planted in the data set's own nodes
        copy_template(fmt, work)
        if fmt == "zarr":
            os.symlink(outside, os.path.join(path, "vectors", "cell", "planted"))
            shutil.rmtree(os.path.join(path, "axes"))
            os.symlink(outside, os.path.join(path, "axes"))
            what = "links to outside in place of the data set's nodes"
        else:
            what = "an existing archive"
    name = f"mode-w ({mode}): {what}"
    try:
        daf = pydaf.open_daf(path, mode)
        import numpy as np
        if not daf.has_axis("cell"):
            daf.add_axis("cell", ["A", "B"])
        daf.set_vector("cell", "fresh", np.array([1.5, 2.5]) if daf.axis_length("cell") == 2 else
                       np.arange(daf.axis_length("cell"), dtype=np.float64), overwrite=True)
        daf.format.format_close()
        del daf
        gc.collect()
    except BaseException as error:
        gc.collect()
        result = classify_exception(error)
        if result[0] != "DafError":
            return name, result[0], result[1]
        for kept, content in keep.items():
            if not os.path.isfile(kept) or Path(kept).read_bytes() != content:
                return name, "loss", f"refused ({result[1][:100]}) but {kept} changed"
        return name, "DafError", result[1]
    for kept, content in keep.items():
        if mode == "w+" and content.startswith(b"PK") and os.path.isfile(kept):
            try:  # (w+ may add a data set to somebody's archive; what was in it must still be there)
                with zipfile.ZipFile(kept) as handle:
                    if handle.read("report.txt") == b"somebody's report":
                        continue
            except Exception as error:
                return name, "loss", f"mode w+ went through and somebody's archive lost its entry: {error}"
        if not os.path.isfile(kept) or Path(kept).read_bytes() != content:
            return name, "loss", f"mode {mode} went through and {os.path.relpath(kept, work)} is gone or changed"
    try:
        daf = pydaf.open_daf(path, "r")
        if "fresh" not in daf.vectors_set("cell"):
            return name, "loss", "the vector written is not there"
    except BaseException as error:
        result = classify_exception(error)
        return name, result[0] if result[0] != "DafError" else "loss", f"reading back: {result[1]}"
    return name, "correct", ""


# --------------------------------------------------------------------------------------------------------------------
# Chains.

CHAIN_FORMATS = ("h5df", "files", "zarr", "zarrzip", "zip")
CHAIN_KINDS = ("repository", "repository", "repository", "view", "view", "fingerprint", "base-replaced", "deep",
               "cycle", "api")
HOSTILE_REPOSITORIES: list[Callable[[random.Random, str, str], Any]] = [
    lambda rng, work, outside: "base\0.h5df",
    lambda rng, work, outside: "\0",
    lambda rng, work, outside: "",
    lambda rng, work, outside: "x" * rng.choice([5000, 100_000, 1_000_000]),
    lambda rng, work, outside: "a/" * rng.choice([3000, 20000]) + "x.h5df",
    lambda rng, work, outside: ".",
    lambda rng, work, outside: "..",
    lambda rng, work, outside: "/",
    lambda rng, work, outside: "/dev/null",
    lambda rng, work, outside: "/dev/zero",
    lambda rng, work, outside: "/proc/self/mem",
    lambda rng, work, outside: os.path.join(outside, "sentinel"),
    lambda rng, work, outside: "../outside/sentinel",
    lambda rng, work, outside: "../outside",
    lambda rng, work, outside: "no-such-base.h5df",
    lambda rng, work, outside: "base.h5dfs#/../../x",
    lambda rng, work, outside: "base.h5df#/",
    lambda rng, work, outside: "base.h5df#",
    lambda rng, work, outside: "base\n.h5df",
    lambda rng, work, outside: "\udcff.h5df",
    lambda rng, work, outside: rng.choice([17, 3.5, True, float("nan")]),
    lambda rng, work, outside: "fifo.h5df",
    lambda rng, work, outside: "loop.h5df",
    lambda rng, work, outside: "garbage.h5df",
    lambda rng, work, outside: "garbage.daf.zip",
    lambda rng, work, outside: "folder.h5df",
    lambda rng, work, outside: "leaf-self",
    lambda rng, work, outside: "~/base.h5df",
    lambda rng, work, outside: "base.h5df" + " " * 10,
    lambda rng, work, outside: "file:///etc/passwd",
]
HOSTILE_VIEWS: list[Callable[[random.Random], Any]] = [
    lambda rng: "[" * rng.choice([1000, 100_000]) + "]" * 10,
    lambda rng: "{" + '"a":{' * 50_000,
    lambda rng: "not json",
    lambda rng: "",
    lambda rng: "\0",
    lambda rng: "null",
    lambda rng: "[]",
    lambda rng: '{"axes": 7}',
    lambda rng: '{"axes": [["cell", "@ cell [ age > 3 ]"]], "data": [[["cell", "age"], ": age"]]}',
    lambda rng: '{"axes": [["cell", "@ cell [ a{1000000000} ]"]]}',
    lambda rng: '{"axes": [["cell", "' + "@ cell " * 20000 + '"]]}',
    lambda rng: '{"axes": [[null, null]], "data": [[1, 2, 3]]}',
    lambda rng: '{"axes": [["*", "="]], "data": [["*", "="]]}',
    lambda rng: '{"data": [[["cell", "cell", "x"], "@ cell @ cell :: x"]]}',
    lambda rng: '{"axes": [["cell", "@ nosuch"]]}',
    lambda rng: '{"data": [[["cell", "age"], ": age % Abs % Log base 0"]]}',
    lambda rng: '{"axes": NaN}',
    lambda rng: '{"axes": [["cell", "@ cell"]], "data": [[["(\\"cell\\", \\"age\\")", ": age"]]]}',
    lambda rng: json.dumps({"axes": [["cell", "@ cell"]] * 5000}),
    lambda rng: json.dumps({"data": [[[rng.choice(["cell", "gene"]), "".join(rng.choice("age:%@[]") for _ in
                                                                            range(rng.randrange(1, 30)))],
                                      "".join(rng.choice(" @:%>-|[]<=!~age cell") for _ in range(40))]]}),
    lambda rng: 12345,
]


def _set_scalar_raw(leaf: str, fmt: str, name: str, value: Any) -> str:
    """Write a scalar into the leaf as another program would (around pydaf's checks where possible); "refused" if
    the format's writer refused the value with a DafError."""
    pydaf = _pydaf()
    if fmt == "files":
        Path(leaf, "scalars", f"{name}.json").write_text(json.dumps({"type": "String" if isinstance(value, str) else
                                                                      "Int64", "value": value}, allow_nan=True))
        return "written"
    if fmt == "h5df":
        import h5py
        with h5py.File(leaf, "r+") as handle:
            if name in handle["scalars"]:
                del handle["scalars"][name]
            try:
                if isinstance(value, str):
                    handle["scalars"].create_dataset(name, data=value.encode("utf-8", "surrogateescape"))
                else:
                    handle["scalars"].create_dataset(name, data=value)
            except (ValueError, TypeError):  # (h5py refuses embedded NULs in variable-length strings)
                import numpy as np
                if name in handle["scalars"]:
                    del handle["scalars"][name]
                encoded = str(value).encode("utf-8", "surrogateescape")
                handle["scalars"].create_dataset(name, data=np.array(encoded, dtype=f"S{max(1, len(encoded))}"))
        return "written"
    try:
        daf = pydaf.open_daf(leaf, "r+")
        daf.set_scalar(name, value, overwrite=True)
        daf.format.format_close()
        del daf
        gc.collect()
    except pydaf.DafError:
        return "refused"
    return "written"


def _make_chain(work: str, base_fmt: str, leaf_fmt: str, base_name: str = "base", leaf_name: str = "leaf") -> str:
    """A base (pristine copy) and a leaf made by complete_chain holding the vector ``extra``: the leaf's path."""
    pydaf = _pydaf()
    base = os.path.join(work, SUFFIXES[base_fmt].replace("x.", f"{base_name}.", 1))
    if not os.path.lexists(file_of(base)):
        copy_template(base_fmt, work, os.path.basename(base))
    leaf = os.path.join(work, SUFFIXES[leaf_fmt].replace("x.", f"{leaf_name}.", 1))
    chain = pydaf.complete_chain(base_daf=pydaf.open_daf(base, "r"), new_daf=pydaf.open_daf(leaf, "w"))
    import numpy as np
    chain.set_vector("cell", "extra", np.arange(40, dtype=np.int32) * 3)
    chain.format.format_close() if hasattr(chain.format, "format_close") else None
    del chain
    gc.collect()
    return leaf


def _chain_known() -> dict[str, str]:
    import numpy as np
    known = dict(expected())
    known["extra"] = canon(np.arange(40, dtype=np.int32) * 3)
    return known


def _read_chain(open_it: Callable[[], Any]) -> dict[str, tuple[str, str]]:
    outcomes = read_all(open_it)
    try:
        daf = open_it()
        outcomes["extra"] = ("ok", canon(daf.get_vector("cell", "extra")))
    except BaseException as error:
        outcomes["extra"] = classify_exception(error)
    return outcomes


def run_chains(spec: dict[str, Any], rng: random.Random, work: str, outside: str) -> tuple[str, str, str]:
    pydaf = _pydaf()
    kind = spec["kind"]
    base_fmt, leaf_fmt = rng.choice(CHAIN_FORMATS), rng.choice(("h5df", "files", "zarr", "zip", "zarrzip"))
    name = f"{kind} (base {base_fmt}, leaf {leaf_fmt})"
    known = _chain_known()
    if kind == "api":
        choice = rng.randrange(6)
        base = copy_template(base_fmt, work, SUFFIXES[base_fmt].replace("x.", "base.", 1))
        try:
            if choice == 0:
                daf = pydaf.open_daf(base, "r+")
                pydaf.complete_chain(base_daf=daf, new_daf=daf)
                name += ": base_daf is new_daf"
            elif choice == 1:
                leaf = os.path.join(work, SUFFIXES[leaf_fmt].replace("x.", "leaf.", 1))
                reader = pydaf.open_daf(base, "r")
                pydaf.complete_chain(base_daf=reader, new_daf=pydaf.open_daf(base, "r+"))
                name += ": new_daf is base_daf's file"
            elif choice == 2:
                leaf = _make_chain(work, base_fmt, leaf_fmt)
                pydaf.complete_chain(base_daf=pydaf.complete_daf(leaf, "r"), new_daf=pydaf.open_daf(base, "r+"))
                name += ": a chain onto its own base (a cycle)"
            elif choice == 3:
                pydaf.complete_chain(base_daf=pydaf.MemoryDaf(name="memory!"),
                                     new_daf=pydaf.open_daf(os.path.join(work, "leaf.h5df"), "w"))
                name += ": a base with no path"
            elif choice == 4:
                leaf = os.path.join(work, SUFFIXES[leaf_fmt].replace("x.", "leaf.", 1))
                pydaf.complete_chain(base_daf=pydaf.open_daf(base, "r"), new_daf=pydaf.open_daf(leaf, "w"),
                                     axes=[("cell", rng.choice(["@ cell [ nosuch > 1 ]", "@ nosuch", "@ cell [ "]))])
                name += ": a bad view"
            else:
                leaf = os.path.join(work, SUFFIXES[leaf_fmt].replace("x.", "leaf.", 1))
                new = pydaf.open_daf(leaf, "w")
                new.add_axis("cell", ["other"])
                pydaf.complete_chain(base_daf=pydaf.open_daf(base, "r"), new_daf=new)
                name += ": a new data set with a conflicting axis"
        except BaseException as error:
            result = classify_exception(error)
            if result[0] != "DafError":
                return name, result[0], result[1]
            # Refused: the base must be intact.
            return name, *_base_intact(base, judge_error=result[1])
        if choice in (0, 1, 2):
            gc.collect()
            outcomes = _read_chain(lambda: pydaf.complete_daf(base, "r"))
            outcome, detail = judge({k: v for k, v in outcomes.items() if k != "extra"}, None)
            if outcome == "correct":
                return name, "wrong", "a cycle was accepted and the chain reads as if it were none"
            return name, outcome, detail
        return name, *_base_intact(base, judge_error="accepted")
    leaf = _make_chain(work, base_fmt, leaf_fmt)
    base = os.path.join(work, SUFFIXES[base_fmt].replace("x.", "base.", 1))
    if kind == "repository":
        index = rng.randrange(len(HOSTILE_REPOSITORIES))
        value = HOSTILE_REPOSITORIES[index](rng, work, outside)
        if value == "fifo.h5df":
            os.mkfifo(os.path.join(work, value))
        elif value == "loop.h5df":
            os.symlink(os.path.join(work, value), os.path.join(work, value))
        elif value in ("garbage.h5df", "garbage.daf.zip"):
            Path(work, value).write_bytes(os.urandom(rng.randrange(0, 5000)))
        elif value == "folder.h5df":
            os.mkdir(os.path.join(work, value))
        elif value == "leaf-self":
            value = os.path.basename(file_of(leaf)) + (leaf[len(file_of(leaf)):] if "#" in leaf else "")
        name += f": base_daf_repository = {str(value)[:40]!r}"
        if _set_scalar_raw(file_of(leaf) if leaf_fmt in ("files", "h5df") else leaf, leaf_fmt,
                           "base_daf_repository", value) == "refused":
            return name, "DafError", "the writer refused the value"
    elif kind == "view":
        value = HOSTILE_VIEWS[rng.randrange(len(HOSTILE_VIEWS))](rng)
        name += f": base_daf_view = {str(value)[:40]!r}"
        if _set_scalar_raw(leaf, leaf_fmt, "base_daf_view", value) == "refused":
            return name, "DafError", "the writer refused the value"
    elif kind == "fingerprint":
        value = rng.choice(["", "{", "[]", '{"base_daf_repository": 7}', '{"axes": {"cell": 7}}', "\0" * 10,
                            '{"base_daf_repository": "base.h5df", "axes": {"cell": "0" }}',
                            "[" * 100_000, '{"axes": ' + "[" * 5000 + "]" * 5000 + "}"])
        name += f": base_daf_fingerprint = {str(value)[:40]!r}"
        if _set_scalar_raw(leaf, leaf_fmt, "base_daf_fingerprint", value) == "refused":
            return name, "DafError", "the writer refused the value"
    elif kind == "base-replaced":
        choice = rng.randrange(5)
        target = file_of(base)
        if os.path.isdir(target):
            shutil.rmtree(target)
        else:
            os.remove(target)
        if choice == 0:
            os.mkdir(target)
            name += ": the base is now an empty folder"
        elif choice == 1:
            Path(target).write_bytes(os.urandom(rng.randrange(0, 3000)))
            name += ": the base is now garbage"
        elif choice == 2:
            os.mkfifo(target)
            name += ": the base is now a FIFO"
        elif choice == 3:
            os.symlink(os.path.join(outside, "sentinel"), target)
            name += ": the base is a link to a file outside"
        else:
            other = rng.choice([fmt for fmt in CHAIN_FORMATS if fmt != base_fmt])
            built = copy_template(other, work, "other-" + SUFFIXES[other])
            os.rename(file_of(built), target)
            name += f": the base is now a {other} data set under the old name"
    elif kind == "deep":  # a chain of records written as another program (Julia) would: no depth check on the way
        depth = rng.choice([20, 60, 61, 62, 63, 64, 150, 400])
        name = f"deep chain of {depth} FilesDaf records"
        previous = leaf
        for level in range(depth):
            nxt = os.path.join(work, f"level{level}.daf")
            pydaf.FilesDaf(nxt, "w", name=f"level{level}").format.format_close()
            _set_scalar_raw(nxt, "files", "base_daf_repository", os.path.relpath(previous, work) if "#" not in
                            previous else os.path.relpath(file_of(previous), work) + previous[len(file_of(previous)):])
            previous = nxt
        gc.collect()
        leaf = previous
    elif kind == "cycle":
        other = os.path.join(work, "other.daf")
        chain = pydaf.complete_chain(base_daf=pydaf.open_daf(file_of(leaf) if "#" not in leaf else leaf, "r"),
                                     new_daf=pydaf.FilesDaf(other, "w"))
        del chain
        gc.collect()
        relative = os.path.relpath(other, work)
        name += ": the base's record points to a leaf above it (a cycle of 3)"
        if _set_scalar_raw(file_of(base) if base_fmt in ("files", "h5df") else base, base_fmt,
                           "base_daf_repository", relative) == "refused":
            return name, "DafError", "the writer refused the value"
        leaf = other
    gc.collect()
    outcomes = _read_chain(lambda: pydaf.complete_daf(leaf, "r"))
    if kind == "deep" and outcomes["age"][0] == "ok":
        return name, *judge(outcomes, None, known)
    return name, *judge(outcomes, None, known)


def _base_intact(base: str, *, judge_error: str) -> tuple[str, str]:
    outcomes = read_all(_open_any(base))
    outcome, detail = judge(outcomes, None)
    if outcome in ("correct",):
        return ("DafError", judge_error) if judge_error != "accepted" else ("correct", "")
    if outcome == "DafError":
        return "loss", f"the base no longer reads: {detail}"
    return outcome, detail


# --------------------------------------------------------------------------------------------------------------------
# The H5df undo journal.

JOURNAL_KINDS = [("torn-flip", 20), ("torn-truncate", 12), ("torn-extend", 4), ("foreign", 8), ("garbage", 10),
                 ("huge", 6), ("planted", 8), ("stale", 8), ("hardlink", 5), ("torn-clean", 6)]
_TORN: dict[int, tuple[str, str]] = {}  # kill point -> (the torn file, its journal) in the template folder


def _journal_path(path: str) -> str:
    from pydaf.formats.h5df.undo_journal import journal_path
    return journal_path(path)


def _write_operation(path: str) -> None:
    """The write whose journal the probes damage: overwrite age and organism, add a vector."""
    import numpy as np
    pydaf = _pydaf()
    daf = pydaf.H5df(path, "r+")
    daf.set_vector("cell", "age", np.arange(40, dtype=np.int64) + 1000, overwrite=True)
    daf.set_scalar("organism", "mouse", overwrite=True)
    daf.set_vector("cell", "new", np.arange(40, dtype=np.float64) * 0.25)
    daf.format.format_close()
    del daf
    gc.collect()


def _after_writes() -> list[dict[str, str]]:
    """The states after each committed operation of :func:`_write_operation` (age, then organism)."""
    import numpy as np
    first = dict(expected())
    first["age"] = canon(np.arange(40, dtype=np.int64) + 1000)
    second = dict(first)
    second["scalar"] = canon("mouse")
    return [first, second]


def _some_torn(rng: random.Random) -> tuple[str, str] | None:
    """A torn template (see :func:`torn`) at a random kill point, trying 20 points (None if none tore)."""
    for _ in range(20):
        point = torn(rng.randrange(1, 40))
        if point is not None:
            return point
    return None


def torn(kill_after: int) -> tuple[str, str] | None:
    """A template H5df left by a writer killed (``os._exit``, no clean-up) before its ``kill_after``-th write to the
    file, and the journal it left (None if the operation does fewer writes)."""
    if kill_after in _TORN:
        return _TORN[kill_after]
    folder = os.path.join(os.path.dirname(os.path.dirname(template("h5df"))), f"torn{kill_after}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "x.h5df")
    shutil.copyfile(template("h5df"), path)
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from pydaf.formats.h5df import undo_journal\n"
            "from tests import campaign\n"
            "original = undo_journal.JournaledFile.write\n"
            "count = [0]\n"
            "def write(self, data):\n"
            f"    count[0] += 1\n    if count[0] >= {kill_after}:\n        os._exit(0)\n"
            "    return original(self, data)\n"
            "undo_journal.JournaledFile.write = write\n"
            f"campaign._write_operation({path!r})\n"
            "os._exit(3)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    journal = _journal_path(path)
    if result.returncode == 3 or not os.path.exists(journal):
        _TORN[kill_after] = None  # type: ignore[assignment]
        return None
    _TORN[kill_after] = (path, journal)
    return _TORN[kill_after]


def _consistent(outcomes: dict[str, tuple[str, str]], states: list[dict[str, str]]) -> tuple[str, str]:
    """A read of a journaled file: every value read from one committed state, or DafErrors; a mix is a loss."""
    read = {entry: value for entry, (outcome, value) in outcomes.items()
            if outcome == "ok" and entry not in TEXT_ENTRIES}
    failures = [(entry, outcome, value) for entry, (outcome, value) in outcomes.items()
                if outcome in FAILURES or (entry in TEXT_ENTRIES and outcome == "ok" and value != "text")]
    if failures:
        entry, outcome, value = failures[0]
        return outcome, f"{entry}: {value}"
    matching = [state for state in states if all(state[entry] == value for entry, value in read.items())]
    if not matching:
        nearest = min(states, key=lambda state: sum(state[entry] != value for entry, value in read.items()))
        differ = [f"{entry}: {value[:60]} (a state has {nearest[entry][:40]})" for entry, value in read.items()
                  if nearest[entry] != value]
        return "loss", "no committed state reads like this: " + "; ".join(differ)[:500]
    errors = [f"{entry}: {value}" for entry, (outcome, value) in outcomes.items() if outcome == "DafError"]
    if errors:
        return "DafError", errors[0][:300]
    return "correct", ""


def _file_digest(path: str) -> str:
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run_journal(spec: dict[str, Any], rng: random.Random, work: str, outside: str) -> tuple[str, str, str]:
    pydaf = _pydaf()
    kind = spec["kind"]
    path = os.path.join(work, "x.h5df")
    journal = _journal_path(path)
    old = expected()
    mode = rng.choice(("r", "r+", "r+"))
    name = f"{kind} ({mode})"
    states = [old, *_after_writes()]
    clean = False
    if kind.startswith("torn"):
        point = _some_torn(rng)
        if point is None:
            return name, "correct", "no torn template"
        shutil.copyfile(point[0], path)
        shutil.copyfile(point[1], journal)
        size = os.path.getsize(journal)
        if kind == "torn-flip":
            offset, xor = rng.randrange(size), rng.randrange(1, 256)
            flip(journal, offset, xor)
            name += f": kill point {point[0].split('torn')[-1]}, journal flip [{offset}] ^= {xor} of {size}"
        elif kind == "torn-truncate":
            length = rng.randrange(size)
            truncate(journal, length)
            name += f": journal truncated to {length} of {size}"
        elif kind == "torn-extend":
            with open(journal, "ab") as handle:
                handle.write(os.urandom(rng.randrange(1, 300)))
            name += ": random bytes appended to the journal"
        else:
            name += ": an intact journal"
    else:
        shutil.copyfile(template("h5df"), path)
        clean = True
        if kind == "foreign":
            point = _some_torn(rng)
            if point is None:
                return name, "correct", "no torn template"
            shutil.copyfile(point[1], journal)
            name += ": the journal of another (torn) copy beside a clean file"
        elif kind == "garbage":
            from pydaf.formats.h5df import undo_journal
            magic = getattr(undo_journal, "MAGIC", b"")
            body = os.urandom(rng.randrange(0, 2000))
            if rng.random() < 0.6:
                body = magic + body
            Path(journal).write_bytes(body)
            name += f": a journal of {len(body)} random bytes"
        elif kind == "huge":
            from pydaf.formats.h5df import undo_journal
            magic = getattr(undo_journal, "MAGIC", b"")
            header = magic + struct.pack("<QI", rng.choice([2**33, 2**62, 1]), 0)
            header += struct.pack("<QQI", 0, rng.choice([2**33, 2**40, 2**63 - 1]), 0)
            with open(journal, "wb") as handle:
                handle.write(header)
            os.truncate(journal, rng.choice([2**33, 8 << 30, 2**40]))
            name += ": a huge sparse journal declaring huge records"
        elif kind == "planted":
            what = rng.choice(("fifo", "symlink-outside", "folder", "symlink-loop", "devnull", "symlink-dangling"))
            replace_with(journal, what, outside)
            name += f": {what} at the journal's name"
        elif kind == "stale":
            point = _some_torn(rng)
            if point is None:
                return name, "correct", "no torn template"
            # The torn file was then repaired and rewritten by another program (h5py), leaving the old journal.
            shutil.copyfile(point[1], journal + ".keep")
            import h5py
            with h5py.File(path, "r+") as handle:
                del handle["scalars/organism"]
                handle["scalars"].create_dataset("organism", data=b"rat")
            os.rename(journal + ".keep", journal)
            old = dict(old)
            old["scalar"] = canon("rat")
            states = [old]
            name += ": a stale journal beside a file rewritten by h5py since"
        elif kind == "hardlink":
            point = _some_torn(rng)
            if point is None:
                return name, "correct", "no torn template"
            shutil.copyfile(point[0], path)
            shutil.copyfile(point[1], journal)
            clean = False
            link = os.path.join(work, "link.h5df")
            os.link(path, link)
            path = link
            name += ": a torn file opened through a hard link"
        elif kind == "torn-clean":
            name += ": no journal at all (the control)"
    digest = _file_digest(path)
    outcomes = read_all(lambda: pydaf.H5df(path, mode))
    outcome, detail = _consistent(outcomes, states)
    if outcome in FAILURES:
        return name, outcome, detail
    if clean and kind not in ("torn-clean",) and _file_digest(path) != digest and mode == "r":
        return name, "loss", "a read-only open changed the file"
    if clean and outcome == "correct":
        # A clean file must read as itself (the foreign/garbage journal not applied).
        if judge(outcomes, None, states[0])[0] != "correct":
            return name, "loss", "the clean file reads as another state"
    if mode == "r" and outcome == "DafError" and not clean:
        # Then the repair (r+) must lead to one state too.
        again = read_all(lambda: pydaf.H5df(path, "r+"))
        outcome2, detail2 = _consistent(again, states)
        if outcome2 in FAILURES:
            return name + " then r+", outcome2, detail2
    if outcome == "correct" and rng.random() < 0.5:
        # A write after the open: committed, and nothing that read before changes.
        import numpy as np
        try:
            daf = pydaf.H5df(path, "r+")
            daf.set_vector("cell", "post", np.arange(40, dtype=np.uint16), overwrite=True)
            daf.format.format_close()
            del daf
            gc.collect()
            reader = pydaf.H5df(path, "r")
            post = canon(reader.get_vector("cell", "post"))
            del reader
            gc.collect()
        except BaseException as error:
            result = classify_exception(error)
            return name + " then a write", result[0] if result[0] != "DafError" else "loss", result[1]
        if post != canon(np.arange(40, dtype=np.uint16)):
            return name + " then a write", "loss", f"the vector written reads {post[:100]}"
        after = read_all(lambda: pydaf.H5df(path, "r"))
        if after != outcomes:
            changed = [entry for entry in outcomes if after.get(entry) != outcomes[entry]]
            return name + " then a write", "loss", f"a write changed what read before: {changed}"
        name += " then a write"
    return name, outcome, detail


# --------------------------------------------------------------------------------------------------------------------
# Conversions.

CONVERT_DESTINATIONS = ("h5df", "h5dfs", "files", "zarr", "zarrzip", "zarrzipg", "zip", "zipg")


def _damaged_source(rng: random.Random, work: str, outside: str) -> tuple[str, str]:
    """A source data set, pristine or damaged (by the damage of the read surfaces): (path, what)."""
    fmt = rng.choice(("h5df", "files", "zarr", "zarrzip", "zip"))
    path = copy_template(fmt, work, "src-" + SUFFIXES[fmt])
    if rng.random() < 0.25:
        return path, f"pristine {fmt}"
    if fmt == "zarr":
        kind = _weighted(rng, [item for item in READ_KINDS["zarr_dir"] if item[0] != "mode-w"])
        return path, f"zarr {kind}: " + damage_zarr_folder(path, rng, outside, kind)
    if fmt in ("zarrzip", "zip"):
        kind = _weighted(rng, [item for item in READ_KINDS["zipdaf"] if item[0] != "mode-w"])
        return path, f"{fmt} {kind}: " + damage_archive(path, rng, outside, kind, "zarr" if fmt == "zarrzip"
                                                         else "files")
    if fmt == "files":
        from . import hostile
        what = rng.choice(sorted(hostile.FILES_CORRUPTIONS))
        if rng.random() < 0.3:
            files = _files_in(path)
            name = rng.choice(files)
            replace_with(os.path.join(path, name), rng.choice(HOSTILE_FILES), outside)
            return path, f"files: hostile file at {name}"
        hostile.FILES_CORRUPTIONS[what](path)
        return path, f"files: {what}"
    size = os.path.getsize(path)
    choice = rng.random()
    if choice < 0.4:
        from . import hostile
        what = rng.choice(sorted(hostile.H5DF_CORRUPTIONS))
        hostile.H5DF_CORRUPTIONS[what](path)
        return path, f"h5df: {what}"
    if choice < 0.8:
        offset, xor = rng.randrange(size), rng.randrange(1, 256)
        flip(path, offset, xor)
        return path, f"h5df: flip [{offset}] ^= {xor}"
    length = rng.randrange(size)
    truncate(path, length)
    return path, f"h5df: truncated to {length}"


def _old_destination(kind: str, work: str, *, axis: str = "cell") -> str:
    """An existing destination data set holding other data (the "old" one)."""
    pydaf = _pydaf()
    path = os.path.join(work, SUFFIXES[kind].replace("x.", "dst.", 1))
    if kind in ("h5dfs", "zarrzipg", "zipg"):  # another data set in the same file, to keep too
        neighbour = pydaf.open_daf(path.replace("#/g", "#/neighbour"), "w+")
        neighbour.set_scalar("keep", "me")
        neighbour.format.format_close()
        del neighbour
    daf = pydaf.open_daf(path, "w+" if "#" in path else "w", name="old!")
    daf.set_scalar("version", 1).add_axis(axis, ["A", "B"])
    daf.set_vector(axis, "age", [10, 20])
    daf.format.format_close()
    del daf
    gc.collect()
    return path


def _old_intact(path: str, axis: str = "cell") -> str | None:
    """Why the old destination no longer reads as itself (None if it does)."""
    pydaf = _pydaf()
    try:
        daf = pydaf.open_daf(path, "r")
        found = (daf.get_scalar("version"), daf.axis_vector(axis).tolist(), daf.get_vector(axis, "age").tolist())
        if found != (1, ["A", "B"], [10, 20]):
            return f"reads {found}"
        if "#/g" in path:
            neighbour = pydaf.open_daf(path.replace("#/g", "#/neighbour"), "r")
            if neighbour.get_scalar("keep") != "me":
                return "its neighbour changed"
    except BaseException as error:
        return f"{type(error).__name__}: {str(error)[:200]}"
    return None


def run_convert(spec: dict[str, Any], rng: random.Random, work: str, outside: str) -> tuple[str, str, str]:
    pydaf = _pydaf()
    from pydaf.interop.convert import convert
    kind = spec["kind"]
    source, what = _damaged_source(rng, work, outside)
    if kind == "repack":
        source = copy_template("h5df", work, "rsrc.h5df") if rng.random() < 0.3 else source
        destination_kind = rng.choice(("h5df", "h5dfs"))
    else:
        destination_kind = rng.choice(CONVERT_DESTINATIONS)
    existing = rng.random() < 0.5
    overwrite = rng.random() < 0.6
    old_axis = "donor" if kind == "copy_all" else "cell"  # (copy_all adds to an old data set: no axis conflict)
    destination = (_old_destination(destination_kind, work, axis=old_axis) if existing else
                   os.path.join(work, SUFFIXES[destination_kind].replace("x.", "dst.", 1)))
    name = f"{kind} {what} -> {'existing ' if existing else ''}{destination_kind}{' overwrite' if overwrite else ''}"
    source_read = read_all(_open_any(source))
    before = sorted(set(os.listdir(work)))
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if kind == "convert":
                convert(source, destination, overwrite=overwrite, progress=False)
            elif kind == "repack":
                pydaf.repack(source, destination, overwrite=overwrite, progress=False)
            else:
                target = pydaf.open_daf(destination, "r+" if existing else "w")
                pydaf.copy_all(target, pydaf.open_daf(source, "r"), overwrite=overwrite, progress=False)
                target.format.format_close()
                del target
        gc.collect()
        converted = True
    except BaseException as error:
        gc.collect()
        result = classify_exception(error)
        if result[0] != "DafError":
            return name, result[0], result[1]
        converted, message = False, result[1]
    leftovers = sorted(set(os.listdir(work)) - set(before) - {os.path.basename(file_of(destination))})
    if leftovers:
        return name, "escape", f"left beside the destination: {leftovers[:4]}"
    if not converted:
        if existing:
            why = _old_intact(destination, old_axis)
            if why is not None:
                return name, "loss", f"refused ({message[:150]}) but the old destination {why}"
        elif os.path.lexists(file_of(destination)) and "#" not in destination and kind != "copy_all":
            after = read_all(_open_any(destination))
            if any(outcome == "ok" for outcome, _ in after.values()):
                return name, "loss", f"refused ({message[:150]}) yet a destination that opens was left"
        return name, "DafError", message
    if existing and not overwrite and kind != "copy_all":
        return name, "loss", "an existing destination was replaced without overwrite"
    if existing and kind == "copy_all":
        why = _old_intact(destination, old_axis)
        if why is not None:
            return name, "loss", f"copy_all into an old data set: its own data {why}"
    # Converted: the destination holds what the source reads as (every value the source could read).
    target_read = read_all(_open_any(destination))
    wrong = []
    for entry in VALUE_ENTRIES:
        source_outcome, source_value = source_read[entry]
        target_outcome, target_value = target_read[entry]
        if target_outcome in FAILURES:
            return name, target_outcome, f"reading the converted {entry}: {target_value}"
        if source_outcome == "ok" and (target_outcome != "ok" or target_value != source_value):
            if kind == "copy_all" and existing and entry == "axes":
                continue  # (the old data set's own axis is there too)
            wrong.append(f"{entry}: source {source_value[:60]} destination {target_value[:80]}")
        if source_outcome != "ok" and target_outcome == "ok":
            wrong.append(f"{entry}: unreadable in the source ({source_value[:80]}) but converted")
    if wrong:
        return name, "loss", "; ".join(wrong)[:600]
    return name, "correct", ""


# --------------------------------------------------------------------------------------------------------------------
# The command line.

CLI_KINDS = ("describe", "query", "check", "manifest", "convert", "convert", "repack", "demo", "parse", "describe",
             "query", "check", "stdout")
HOSTILE_QUERIES = [
    "@ cell @ gene :: UMIs >| Sum", ": age", ". organism", "@ cell : age", "@ cell [ age > 3 ] : age",
    "@ cell [ note ~ a{1000000000} ] : age", "@ cell [ note ~ (a+)+$ ] : age", "@ " * 5000, "[" * 5000,
    "@ cell : age % Log base -1", "@ cell : age % Clamp min 5 max 1", "@ cell : score >> Quantile p 7",
    "@ cell @ gene :: UMIs -/ note >- Sum", "@ cell : nosuch", "\0", "", " ", "@ cell : age ?? 1e999",
    "@ cell : age % Round", "@ cell @ gene :: dense >| Var", "@ cell : age >> Mode", "@ cell : age % Fraction",
    ". organism ?? " + "x" * 100000, "@ cell [ ! age ] : age", "@ cell / note : age", "@ cell : age =@ note",
    "@ cell @ gene :: labels", "@ gene : ?", "? ? ?", "@ cell : age % Abs % Abs % Abs % Abs % Abs",
]


def _cli_paths(rng: random.Random, work: str, outside: str) -> tuple[str, str]:
    """A hostile path argument for a data set: (path, what)."""
    choice = rng.randrange(23)
    if choice < 5:
        fmt = rng.choice(("h5df", "files", "zarr", "zarrzip", "zip"))
        return copy_template(fmt, work), f"pristine {fmt}"
    if choice >= 20:  # the leaf of a chain (its base record maybe hostile)
        leaf = _make_chain(work, rng.choice(CHAIN_FORMATS), "files")
        if choice == 20:
            return leaf, "a chain's leaf"
        value = HOSTILE_REPOSITORIES[rng.randrange(len(HOSTILE_REPOSITORIES))](rng, work, outside)
        _set_scalar_raw(leaf, "files", "base_daf_repository", value)
        return leaf, f"a chain's leaf whose base_daf_repository is {str(value)[:30]!r}"
    if choice < 8:
        source, what = _damaged_source(rng, work, outside)
        return source, what
    hostile_paths = {
        8: ("/no/such/x.h5df", "a missing file"), 9: ("/dev/null", "/dev/null"), 10: ("/dev/full", "/dev/full"),
        11: (os.path.join(work, "d.h5df"), "a folder named .h5df"), 12: (os.path.join(work, "f.h5df"), "a FIFO"),
        13: (os.path.join(work, "l.h5df"), "a link loop"), 14: ("x" * 5000 + ".h5df", "a 5000-character name"),
        15: (os.path.join(work, "a\nb.daf"), "a name with a newline"), 16: ("", "an empty path"),
        17: (os.path.join(work, "g.h5dfs#/../../etc"), "a group with .."), 18: (os.path.join(work, "z.h5df"),
                                                                                "garbage named .h5df"),
        19: (os.path.join(work, "e.daf.zarr"), "an empty folder named .daf.zarr"),
    }
    path, what = hostile_paths[choice]
    if choice in (11, 19):
        os.mkdir(path)
    elif choice == 12:
        os.mkfifo(path)
    elif choice == 13:
        os.symlink(path, path)
    elif choice == 18:
        Path(path).write_bytes(os.urandom(rng.randrange(0, 3000)))
    elif choice == 17:
        copy_template("h5dfs", work, "g.h5dfs#/g")
    return path, what


def _cli_destination(rng: random.Random, work: str, outside: str, source: str) -> tuple[str, str]:
    choice = rng.randrange(17)
    if choice == 14:
        target = os.path.join(work, "out.h5df")
        Path(target).write_bytes(b"somebody's notes, not HDF5")
        return target, "somebody's non-Daf file named out.h5df"
    if choice == 15:
        kind = rng.choice(CONVERT_DESTINATIONS)
        return _old_destination(kind, work), f"an existing {kind} data set"
    if choice == 16:
        target = os.path.join(work, "out.daf")
        os.mkdir(target)
        Path(target, "thesis.tex").write_text("somebody's thesis")
        return target, "somebody's folder named out.daf"
    if choice < 6:
        kind = rng.choice(CONVERT_DESTINATIONS)
        return os.path.join(work, SUFFIXES[kind].replace("x.", "out.", 1)), f"new {kind}"
    options = {
        6: (source, "its own source"), 7: ("/dev/null", "/dev/null"), 8: ("/dev/full", "/dev/full"),
        9: (work, "a folder"), 10: (os.path.join(work, "missing", "out.h5df"), "in a missing folder"),
        11: (os.path.join(work, "out.h5"), "a name that says no format"),
        12: (os.path.join(outside, "..", "outside", "sentinel"), "a file outside (without --overwrite)"),
        13: (os.path.join(work, "out.h5dfs#/a/../../b"), "a group path with .."),
    }
    return options[choice]


def run_cli(spec: dict[str, Any], rng: random.Random, work: str, outside: str) -> tuple[str, str, str]:
    from pydaf import cli
    kind = spec["kind"]
    argv: list[str]
    source, what = _cli_paths(rng, work, outside)
    extra: list[str] = []
    if kind == "describe":
        argv = ["describe", source] + (["--deep"] if rng.random() < 0.3 else [])
    elif kind == "query":
        query = rng.choice(HOSTILE_QUERIES)
        if rng.random() < 0.3:
            tokens = ["@", "cell", "gene", ":", "::", "age", "UMIs", "[", "]", ">|", ">-", "Sum", "%", "Abs", "?",
                      "-/", "note", "=", "!", "~", ">", "1", "''", "\\", "&", "|", "^", "??", "=@", "/", "<", ".",
                      "organism", ";", "*", "Max", "Log", "base", "e"]
            query = " ".join(rng.choice(tokens) for _ in range(rng.randrange(1, 15)))
        argv = ["query", source, query]
        what += f", query {query[:40]!r}"
    elif kind == "check":
        argv = ["check", source]
    elif kind == "manifest":
        output, where = _cli_destination(rng, work, outside, source)
        argv = ["manifest", source] + (["--output", output] if rng.random() < 0.7 else [])
        extra = ["--overwrite"] if rng.random() < 0.3 else []
        what += f", manifest to {where}"
    elif kind in ("convert", "repack"):
        if kind == "repack" and rng.random() < 0.6:
            source, what = copy_template("h5df", work, "rp.h5df"), "pristine h5df"
        output, where = _cli_destination(rng, work, outside, source)
        argv = [kind, source, output]
        extra = ["--overwrite"] if rng.random() < 0.3 else []
        extra += ["--no-progress"]
        if kind == "convert" and rng.random() < 0.2:
            extra += ["--format", rng.choice(["h5df", "H5df", "nosuch", "", "zarr", "files"])]
        what += f", {kind} to {where}"
    elif kind == "demo":
        cells = rng.choice(["-1", "0", "1", "-99999999999", "99999999999999999", "nan", "1e3", "x", "2"])
        genes = rng.choice(["-1", "0", "1", "3", "99999999999999999"])
        output, where = _cli_destination(rng, work, outside, source)
        argv = ["demo", "--cells", cells, "--genes", genes, "--no-progress", "--output", output]
        extra = ["--overwrite"] if rng.random() < 0.3 else []
        what = f"--cells {cells} --genes {genes}, output {where}"
    elif kind == "stdout":  # a real process whose output can't be written
        command = rng.choice([["describe", source], ["query", source, ". organism"], ["manifest", source],
                              ["check", source], ["--version"], ["query", source, "@ cell : age"]])
        sink = rng.choice(["/dev/full", "closed"])
        name = f"stdout {sink}: pydaf {command[0]} ({what})"
        environment = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        result = subprocess.run([sys.executable, "-m", "pydaf", *command], capture_output=False, text=True,
                                stdout=subprocess.DEVNULL if sink == "closed" else open("/dev/full", "w"),
                                stderr=subprocess.PIPE, timeout=120, env=environment, cwd=work,
                                stdin=subprocess.DEVNULL) if sink != "closed" else subprocess.run(
            [sys.executable, "-c", "import os, sys; os.close(1); from pydaf.cli import main; "
             f"sys.exit(main({command!r}))"], stderr=subprocess.PIPE, text=True, timeout=120, env=environment,
            cwd=work)
        if result.returncode < 0:
            return name, "crash", f"killed by signal {-result.returncode}"
        if "Traceback" in result.stderr:
            return name, "crash", result.stderr[-400:]
        if result.returncode == 0:
            return name, "wrong", "reported success though its output could not be written"
        return name, "DafError", result.stderr.strip()[:300]
    else:
        argv = rng.choice([["--version"], [], ["nosuch"], ["describe"], ["query", source], ["convert", source],
                           ["--help"], ["describe", "--deep", "--deep", source], ["check", source, source]])
        what = f"argv {argv[:2]}"
    if "a file outside" in what:
        extra = [argument for argument in extra if argument != "--overwrite"]  # (replacing it would be asked for)
    argv = argv + extra
    name = f"{kind}: {what}"
    # Only files under work (or explicit devices) may change.
    outside_before = listing(outside)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(argv)
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 2
        if status not in (0, 2):
            return name, "crash", f"SystemExit {exit_.code}"
        if status == 0:  # --help, --version
            return name, "correct", ""
        return name, "DafError", f"usage: {err.getvalue().strip().splitlines()[-1][:200] if err.getvalue() else ''}"
    except BaseException as error:
        result = classify_exception(error)
        return name, result[0] if result[0] != "DafError" else "crash", f"escaped main: {result[1]}"
    finally:
        gc.collect()
    stderr = err.getvalue()
    if "Traceback" in stderr:
        return name, "crash", stderr[-400:]
    if listing(outside) != outside_before:
        return name, "escape", f"outside changed: {listing(outside)}"
    if status != 0 and kind == "check" and what.startswith("pristine"):
        return name, "wrong", f"check finds problems in an undamaged data set: {stderr.strip()[:200]}"
    if status != 0:
        message = stderr.strip()
        if kind == "check" and status == 1 and not message:
            return name, "DafError", "check found problems"
        if not message.startswith("pydaf"):
            return name, "crash", f"status {status} without a message: {stderr[-200:]!r} {out.getvalue()[-200:]!r}"
        return name, "DafError", message[:300]
    return (name, *_cli_correct(kind, argv, out.getvalue(), source, what))


def _cli_correct(kind: str, argv: list[str], output: str, source: str, what: str) -> tuple[str, str]:
    """A command that succeeded: its output (or the file it wrote) must hold the known values."""
    pydaf = _pydaf()
    pristine = what.startswith("pristine")
    if kind == "describe":
        if not output.strip():
            return "wrong", "describe printed nothing"
        if pristine and ("cell: 40 entries" not in output or "gene: 5 entries" not in output):
            return "wrong", f"describe of the known data: {output[:300]}"
        return "correct", ""
    if kind == "check":
        return "correct", ""  # (exit status 0: no problem found; a pristine data set's problems are caught above)
    if kind == "query":
        query = argv[2]
        import pandas as pd
        try:
            memory = pydaf.MemoryDaf(name="known!")
            build_into(memory)
            result = memory[query]
        except pydaf.DafError as error:
            if pristine:
                return "wrong", f"the known data refuses the query ({str(error)[:100]}) but the stored data answered"
            return "correct", ""
        known_out = io.StringIO()
        with contextlib.redirect_stdout(known_out), pd.option_context("display.max_rows", 20,
                                                                      "display.max_columns", 10,
                                                                      "display.width", 120):
            print(sorted(result) if isinstance(result, set) else result)
        if pristine and output != known_out.getvalue():
            return "wrong", f"printed {output[:150]!r}, the known data gives {known_out.getvalue()[:150]!r}"
        return "correct", ""
    if kind in ("convert", "repack", "demo"):
        destination = argv[2] if kind != "demo" else argv[argv.index("--output") + 1]
        if destination in ("/dev/null", "/dev/full"):
            return "wrong", f"{kind} reported success writing to {destination}"
        if kind == "demo":
            try:
                daf = pydaf.open_daf(destination, "r")
                cells = int(argv[argv.index("--cells") + 1])
                if daf.axis_length("cell") != cells:
                    return "wrong", f"the demo has {daf.axis_length('cell')} cells, asked {cells}"
            except BaseException as error:
                return "wrong", f"the demo it wrote doesn't open: {error}"
            return "correct", ""
        outcomes = read_all(_open_any(destination))
        source_read = read_all(_open_any(source))
        for entry in VALUE_ENTRIES:
            if source_read[entry][0] == "ok" and outcomes[entry] != source_read[entry]:
                return "loss", f"{kind} wrote {entry} as {outcomes[entry][1][:100]}"
        return "correct", ""
    if kind == "manifest":
        if "--output" in argv:
            target = argv[argv.index("--output") + 1]
            if target in ("/dev/full",):
                return "wrong", "manifest reported success writing to /dev/full"
            if os.path.abspath(target) == os.path.abspath(file_of(source)):
                return "loss", "the manifest was written onto its own source"
            if target == "/dev/null":
                return "correct", ""
            try:
                json.loads(Path(target).read_text())
            except Exception as error:
                return "wrong", f"the manifest written is not JSON: {error}"
            return "correct", ""
        try:
            json.loads(output)
        except Exception as error:
            return "wrong", f"the manifest printed is not JSON: {error}"
        return "correct", ""
    return "correct", ""


def run_selftest(spec: dict[str, Any], rng: random.Random, work: str, outside: str) -> tuple[str, str, str]:
    """Probes of the runner itself: a child killed by a signal, a probe that blocks."""
    if spec["kind"] == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    fifo = os.path.join(work, "fifo")
    os.mkfifo(fifo)
    with open(fifo, "rb"):  # blocks: no writer
        pass
    return "selftest", "correct", ""


RUNNERS: dict[str, Callable[[dict[str, Any], random.Random, str, str], tuple[str, str, str]]] = {
    "selftest": run_selftest, "zarr_dir": run_read_surface, "zarr_zip": run_read_surface,
    "zipdaf": run_read_surface, "chains": run_chains, "journal": run_journal, "convert": run_convert, "cli": run_cli,
}


# --------------------------------------------------------------------------------------------------------------------
# The runner (parent) and the child.


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setsid()


def _run_child(specs: list[dict[str, Any]], timeout: float) -> tuple[list[dict[str, Any]], str, int | None]:
    """Run probes in one child: (results reported, the end of its stderr, its status or None on a timeout)."""
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                   "NUMBA_NUM_THREADS": "1", "PYDAF_THREADS": "1"}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(specs, handle)
        spec_file = handle.name
    process = subprocess.Popen([sys.executable, "-m", "tests.campaign", "--child", spec_file], cwd=ROOT,
                               env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_limit_child)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        status: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        status = None
    finally:
        os.remove(spec_file)
    results = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                results.append(json.loads(line))
    return results, stderr[-2000:], status


def run_probes(specs: list[dict[str, Any]], *, batch: int = 40, jobs: int = 1, retries: int = 0,
               progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Every probe's result: batches of probes per child; probes a dead or stuck child did not report are re-run one
    per child, so a crash or hang is attributed to its probe."""
    from concurrent.futures import ThreadPoolExecutor
    batches = [specs[start:start + batch] for start in range(0, len(specs), batch)]
    results: list[dict[str, Any]] = []

    def one_batch(chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for _ in range(retries + 1):
            reported, stderr, status = _run_child(chunk, timeout=60 + PROBE_SECONDS * 2 + 4 * len(chunk))
            if reported or status == 0 or "\nprobe " in "\n" + stderr:
                break
            # The child died before its first probe (pydaf itself does not import: a tree being edited).
            if progress is not None:
                progress(f"a child could not start (retrying): {stderr.strip().splitlines()[-1:]}")
            time.sleep(20)
        done = {(result["surface"], result["index"]) for result in reported}
        missing = [spec for spec in chunk if (spec["surface"], spec["index"]) not in done]
        for spec in missing:
            alone, stderr, status = _run_child([spec], timeout=60 + PROBE_SECONDS * 2)
            if alone:
                reported.extend(alone)
                continue
            outcome = "hang" if status is None else "crash"
            detail = "the child timed out" if status is None else f"the child died (status {status})"
            reported.append({"surface": spec["surface"], "index": spec["index"], "name": "?", "outcome": outcome,
                             "detail": f"{detail}: {stderr[-400:]}", "seconds": 0})
        if progress is not None:
            progress(f"{len(reported)} probes: {dict(Counter(result['outcome'] for result in reported))}")
        return reported

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for reported in pool.map(one_batch, batches):
            results.extend(reported)
    for result in results:
        spec = next(spec for spec in specs if (spec["surface"], spec["index"]) == (result["surface"],
                                                                                     result["index"]))
        result["spec"] = spec
    return results


def summary(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for result in results:
        surface = counts.setdefault(result["surface"], {"probes": 0})
        surface["probes"] += 1
        surface[result["outcome"]] = surface.get(result["outcome"], 0) + 1
    return counts


def child_main(spec_file: str) -> None:
    specs = json.loads(Path(spec_file).read_text())
    import pydaf._os.locks
    pydaf._os.locks.LOCK_WAIT_SECONDS = 0.2
    expected()
    scratch = tempfile.mkdtemp(prefix="campaign-")
    try:
        for spec in specs:
            print(f"probe {spec['surface']} {spec['index']}", file=sys.stderr, flush=True)
            result = run_probe(spec, scratch)
            print(json.dumps(result), flush=True)
    finally:
        with contextlib.suppress(OSError):
            peak = [line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmPeak")]
            print(f"child {peak[0] if peak else ''}", file=sys.stderr, flush=True)
        shutil.rmtree(scratch, ignore_errors=True)
        if _TEMPLATE_ROOT:
            shutil.rmtree(_TEMPLATE_ROOT[0], ignore_errors=True)


def main(arguments: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.campaign", description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--surface", default="all", help=f"one of {', '.join(SURFACES)}, or all")
    parser.add_argument("--count", type=int, default=100, help="probes per surface")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--failures", action="store_true", help="also list every failing probe")
    parser.add_argument("--retries", type=int, default=0,
                        help="retry a child that dies before its first probe (a tree being edited) this many times")
    parser.add_argument("--results", help="write every probe's result (JSON lines) to this file")
    options = parser.parse_args(arguments)
    if options.child:
        child_main(options.child)
        return
    surfaces = SURFACES if options.surface == "all" else tuple(options.surface.split(","))
    specs = [spec for surface in surfaces for spec in make_probes(surface, options.count, options.seed)]
    started = time.monotonic()
    results = run_probes(specs, batch=options.batch, jobs=options.jobs, retries=options.retries,
                         progress=lambda text: print(text, file=sys.stderr, flush=True))
    report: dict[str, Any] = {"seconds": round(time.monotonic() - started, 1), "surfaces": summary(results)}
    if options.failures:
        report["failures"] = [result for result in results if result["outcome"] in FAILURES]
    if options.results:
        with open(options.results, "w") as handle:
            for result in results:
                handle.write(json.dumps(result) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
