"""The shared ZIP framing (``pydaf/formats/zipstore.py``) on its own: batches (commit, abort, replace, remove, reserved
entries), recovery of what a killed batch left, foreign archives written by Python's ``zipfile``, and the one store
per archive per process. ZarrDaf's use of it is tested in ``test_zarr.py``."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf.formats.zip import store as zipstore
from pydaf.formats.zip.store import acquire_zip_store


def is_json(name: str) -> bool:
    return name.endswith(".json")


@pytest.fixture
def store(tmp_path: Path) -> zipstore.ZipStore:
    return acquire_zip_store(tmp_path / "store.zip", writable=True, create=True, is_commit=is_json)


def check(path: str | Path) -> dict[str, bytes]:
    """Python's zipfile reads the archive: every CRC checks; the entries' bytes."""
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        return {info.filename: archive.read(info) for info in archive.infolist()}


def test_batches_commit_abort_replace_and_remove(store):
    with store.append() as batch:
        batch.add("a/data", np.arange(5, dtype=np.int16))
        region = batch.reserve("a/filled", 24)
        assert not region.any() and region.flags.writeable
        region.view(np.float64)[:] = [1.5, 2.5, 3.5]
        batch.add("a/meta.json", b"{}")
    assert check(store.path) == {"a/data": np.arange(5, dtype=np.int16).tobytes(),
                                 "a/filled": np.array([1.5, 2.5, 3.5]).tobytes(), "a/meta.json": b"{}"}
    assert store.map_array("a/filled", np.dtype(np.float64), 3).tolist() == [1.5, 2.5, 3.5]
    before = Path(store.path).read_bytes()
    with pytest.raises(RuntimeError, match="boom"), store.append() as batch:
        batch.add("b/data", b"x" * 1000)
        batch.reserve("b/more", 4096)[:] = 7
        raise RuntimeError("boom")
    assert Path(store.path).read_bytes() == before  # an aborted batch leaves the archive as it was
    with pytest.raises(pydaf.DafStorageError, match="existing ZIP entry: a/data"), store.append() as batch:
        batch.add("a/data", b"again")
    assert Path(store.path).read_bytes() == before
    with store.append() as batch:
        batch.add("a/data", b"replaced", replace=True)
        batch.remove("a/meta.json")
    assert check(store.path) == {"a/filled": np.array([1.5, 2.5, 3.5]).tobytes(), "a/data": b"replaced"}
    assert store.names() == ["a/filled", "a/data"] and store.children("") == {"a"}


@pytest.mark.parametrize("name", ["", "/a", "a//b", "a/../b", "./a", "a\\b", "a\0"])
def test_entry_names_are_relative_paths(store, name):
    with pytest.raises(pydaf.DafFormatError, match="invalid ZIP entry name"), store.append() as batch:
        batch.add(name, b"x")
    assert store.names() == []


def test_one_batch_at_a_time_per_thread(store):
    with store.append() as batch:
        batch.add("a.json", b"{}")
        with pytest.raises(pydaf.DafStorageError, match="while this thread fills another property"):
            store.append()
    assert store.names() == ["a.json"]


def test_killed_batches_are_recovered_up_to_the_last_commit(tmp_path, store):
    """What a batch killed at any byte leaves: the committed entries, in memory for a read-only open (which writes
    nothing), and rewritten into a valid archive by a writable open."""
    with store.append() as batch:
        batch.add("one/data", b"1" * 100)
        batch.add("one.json", b'{"n":1}')
    committed = Path(store.path).read_bytes()
    with store.append() as batch:
        batch.add("two/data", b"2" * 100)
        batch.add("two/more", b"3" * 50)
        batch.add("two.json", b'{"n":2}')
    full = Path(store.path).read_bytes()
    store.release()
    # A batch writes its entries where the old central directory began, then grows the file to its new size and
    # writes the new directory and end records: a kill leaves a prefix of that over the old directory, a shorter
    # file, or zeros where the file grew.
    start = full.rindex(b"PK\x03\x04", 0, full.index(b"2" * 100))
    states = [full[:cut] + committed[cut:] if cut < len(committed) else full[:cut] for cut in range(start, len(full))]
    states += [full[:cut] + bytes(len(full) - cut) for cut in range(start, len(full) - 98)]
    for number, killed in enumerate(states[::5]):
        path = tmp_path / f"killed{number}.zip"
        path.write_bytes(killed)
        reader = acquire_zip_store(path, writable=False, is_commit=is_json)
        names = set(reader.names())
        # (the entries of the killed batch count only once its commit entry is whole)
        assert names in ({"one/data", "one.json"}, {"one/data", "one.json", "two/data", "two/more", "two.json"}), \
            (number, names)
        if "two.json" in names:
            assert reader.read("two.json") == b'{"n":2}' and reader.read("two/more") == b"3" * 50
        assert reader.read("one.json") == b'{"n":1}' and path.read_bytes() == killed
        reader.release()
        writer = acquire_zip_store(path, writable=True, is_commit=is_json)
        assert set(writer.names()) == names
        with writer.append() as batch:
            batch.add("three.json", b"{}")
        writer.release()
        assert set(check(path)) == names | {"three.json"}


def test_foreign_archives_are_read(tmp_path):
    path = tmp_path / "foreign.zip"
    data = np.arange(1000, dtype=np.float64)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("stored", data.tobytes(), compress_type=zipfile.ZIP_STORED)
        archive.writestr("deflated", data.tobytes(), compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("dir/inside.json", b'{"a":1}', compress_type=zipfile.ZIP_DEFLATED)
    store = acquire_zip_store(path, writable=False)
    assert store.read("deflated") == data.tobytes() and store.read("stored") == data.tobytes()
    mapped = store.map_array("stored", np.dtype(np.float64), 1000)
    assert mapped is None or mapped.tolist() == data.tolist()  # (mapped only if zipfile happened to align it)
    assert store.map_array("deflated", np.dtype(np.float64), 1000) is None
    with pytest.raises(pydaf.DafFormatError, match="has 8000 bytes instead of 800"):
        store.map_array("stored", np.dtype(np.float64), 100)
    assert store.children("dir") == {"inside.json"}
    store.release()
    writer = acquire_zip_store(path, writable=True)  # appending to a foreign archive keeps its entries
    with writer.append() as batch:
        batch.add("added", b"new")
    writer.release()
    assert check(path) == {"stored": data.tobytes(), "deflated": data.tobytes(), "dir/inside.json": b'{"a":1}',
                           "added": b"new"}


def test_corrupt_entries_are_refused(tmp_path):
    path = tmp_path / "crc.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a", b"hello world", compress_type=zipfile.ZIP_STORED)
        archive.writestr("b", b"payload" * 100, compress_type=zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    data[data.index(b"hello")] = ord("j")
    path.write_bytes(bytes(data))
    store = acquire_zip_store(path, writable=False)
    with pytest.raises(pydaf.DafFormatError, match="CRC mismatch of the ZIP entry: a"):
        store.read("a")
    assert store.read("b") == b"payload" * 100
    with pytest.raises(pydaf.DafFormatError, match="missing ZIP entry: c"):
        store.read("c")


def test_data_descriptors_in_foreign_archives(tmp_path):
    """zipfile writing to a stream that can't seek uses data descriptors (sizes after the data): readable."""
    buffer = io.BytesIO()

    class Unseekable(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: bytes) -> int:
            return buffer.write(data)

    with zipfile.ZipFile(Unseekable(), "w") as archive:  # type: ignore[arg-type]
        archive.writestr("streamed", b"abc" * 10, compress_type=zipfile.ZIP_DEFLATED)
    path = tmp_path / "streamed.zip"
    path.write_bytes(buffer.getvalue())
    store = acquire_zip_store(path, writable=False)
    assert store.read("streamed") == b"abc" * 10


def test_one_store_per_archive_per_process(tmp_path):
    path = tmp_path / "shared.zip"
    reader = acquire_zip_store(path, writable=True, create=True)
    reader.release()
    first = acquire_zip_store(path, writable=False)
    os.symlink(path, tmp_path / "link.zip")
    second = acquire_zip_store(tmp_path / "link.zip", writable=True)  # the same file: the same store, made writable
    assert second is first and first.writable
    with second.append() as batch:
        batch.add("x", b"1")
    assert first.read("x") == b"1"
    first.release()
    second.release()
    assert acquire_zip_store(path, writable=False) is not first  # released: read anew
    with pytest.raises(pydaf.DafStorageError, match="was closed"):
        first.read("x")


def test_truncating_replaces_the_file_and_keeps_old_maps(tmp_path):
    path = tmp_path / "old.zip"
    store = acquire_zip_store(path, writable=True, create=True)
    with store.append() as batch:
        batch.add("values", np.arange(4, dtype=np.float64))
    mapped = store.map_array("values", np.dtype(np.float64), 4)
    store.release()
    fresh = acquire_zip_store(path, writable=True, truncate=("values", "test"))  # (it holds the marker entry)
    assert fresh.names() == [] and path.read_bytes() == zipstore.EMPTY_ARCHIVE
    assert mapped.tolist() == [0.0, 1.0, 2.0, 3.0]  # the old file is unlinked, not cut: its map stays valid
    assert sorted(os.listdir(tmp_path)) == ["old.zip"]
