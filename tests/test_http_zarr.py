"""HttpDaf on ZarrDaf directories (issue 28, beyond Julia): directories written by pydaf's ZarrDaf, plain and packed
(really sharded: ``DAF_PACKED_TARGET_CHUNK_KB=1``), served by real servers on 127.0.0.1 (aiohttp's static files,
which honour Range, and Python's ``http.server``, which ignores it), read back exactly as the local read; a few
columns of a packed matrix fetch a few of its bytes; the failures of a hostile server are HttpDaf's errors, naming the
URL and the property; ``pydaf describe/query`` on such a URL; and the conformance suite with every read back from
storage going through HttpDaf on a served ZarrDaf directory."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf import SparseVector
from pydaf.formats.http.zarr import ServedZarrFormat
from pydaf.testing import DafBackend, DafConformance, is_file_map

from .http_servers import ServedRoot, hostile_server, send, truncated
from .test_http_conformance import expect_read_only_failures
from .test_http_format import SERVERS, assert_same_data, served

pytest.importorskip("aiohttp", reason="aiohttp (the test extra) serves the Range-honouring server")

ROOT = Path(__file__).parents[1]
QUERY = "@ cell @ gene :: UMIs >| Sum"


def write_zarr(path: Path, *, packed: bool) -> None:
    """A ZarrDaf holding every kind of property (packed, its numbers and strings vectors are sharded)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAF_PACKED_TARGET_CHUNK_KB", "1")
        daf = pydaf.ZarrDaf(path, "w", name="zarr!", packed=packed)
        daf.set_scalar("name", "served zarr!").set_scalar("count", np.int8(-7)).set_scalar("ratio", 0.25)
        daf.set_scalar("flag", True).set_scalar("note", "naïve ✓")
        n_cells = 700
        daf.add_axis("cell", [f"c{index}" for index in range(n_cells)]).add_axis("gene", ["g1", "g2", "g 3"])
        daf.add_axis("empty", [])
        rng = np.random.default_rng(7)
        for dtype in (np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float32, np.float64):
            daf.set_vector("cell", f"dense_{np.dtype(dtype).name}", rng.integers(0, 3, n_cells).astype(dtype))
        daf.set_vector("cell", "type", np.array(["T", "B", "", "NK"] * (n_cells // 4), dtype=object))
        daf.set_vector("cell", "zeros", np.zeros(n_cells))  # (all the fill value: no chunk stored)
        values = np.array([1.5, -2.0, 7.0])
        daf.set_vector("cell", "sparse", SparseVector(n_cells, np.array([4, 18, 641]), values))
        daf.set_vector("cell", "mask", SparseVector(n_cells, np.array([1, n_cells]), np.array([True, True])))
        daf.set_vector("gene", "with space", [1, 2, 3])
        daf.set_matrix("cell", "gene", "UMIs", rng.integers(0, 5, (n_cells, 3)), relayout=True)
        daf.set_matrix("cell", "gene", "fractions", sp.random(n_cells, 3, density=0.2, random_state=1,
                                                             format="csc"), relayout=True)
        daf.set_matrix("gene", "cell", "labels", np.array([["a", "", "b"] * n_cells]).reshape(3, n_cells,
                                                                                                 order="F"))
        daf.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A served root holding ``plain.daf.zarr`` and ``packed.daf.zarr``."""
    folder = tmp_path_factory.mktemp("http-zarr")
    write_zarr(folder / "plain.daf.zarr", packed=False)
    write_zarr(folder / "packed.daf.zarr", packed=True)
    return folder


def shard_files(path: Path) -> list[Path]:
    """The chunk files of the packed (sharded) arrays of a ZarrDaf directory."""
    found = []
    for metadata in path.rglob("zarr.json"):
        parsed = json.loads(metadata.read_text())
        if parsed.get("node_type") == "array" and parsed["codecs"][0]["name"] == "sharding_indexed":
            found += [file for file in metadata.parent.rglob("*") if file.is_file() and file.name != "zarr.json"]
    return found


def test_the_packed_data_set_is_really_sharded(root):
    shards = shard_files(root / "packed.daf.zarr")
    assert len(shards) >= 10 and not shard_files(root / "plain.daf.zarr")
    assert not (root / "plain.daf.zarr" / "vectors" / "cell" / "zeros" / "c").exists()  # (a chunk Zarr elides)


@pytest.mark.parametrize("layout", ["plain", "packed"])
@pytest.mark.parametrize("kind", SERVERS)
def test_every_property_reads_as_locally(root, kind, layout):
    local = pydaf.ZarrDaf(root / f"{layout}.daf.zarr", "r")
    with served(root, kind) as (url, server):
        daf = pydaf.open_daf(f"{url}/{layout}.daf.zarr")
        assert isinstance(daf, pydaf.HttpDaf) and isinstance(daf.format, ServedZarrFormat)
        assert daf.name == "served zarr!"
        assert_same_data(local, daf)
        assert daf[QUERY].tolist() == local[QUERY].tolist()
        assert daf.get_vector("cell", "zeros").tolist() == [0.0] * 700
        for array in (daf.get_vector("cell", "dense_float64"), daf.get_matrix("cell", "gene", "UMIs")):
            assert not is_file_map(array) and not array.flags.writeable
        if server is not None and layout == "packed":
            assert server.partial > 0  # (the shards were read by Range requests)
        daf.close()


def test_threads_read_at_the_same_time(root):
    from concurrent.futures import ThreadPoolExecutor

    local = pydaf.ZarrDaf(root / "packed.daf.zarr", "r")
    names = sorted(local.vectors_set("cell"))
    with served(root, "range") as (url, _):
        daf = pydaf.HttpDaf(f"{url}/packed.daf.zarr")

        def read(name: str) -> bool:
            expected = local.get_stored_vector("cell", name)
            return all(np.array_equal(np.asarray(daf.get_vector("cell", name)), np.asarray(
                local.get_vector("cell", name))) and type(daf.get_stored_vector("cell", name)) is type(expected)
                for _ in range(3))

        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(read, names * 4))


def test_a_url_without_the_suffix_is_recognised_by_its_zarr_json(root):
    with served(root / "plain.daf.zarr", "range") as (url, _):
        daf = pydaf.open_daf(url)
        assert isinstance(daf.format, ServedZarrFormat) and daf.url == url and daf.complete_path() == url
        # (the root zarr.json, and the name scalar, which names the data set; the daf.json was another client's)
        assert daf.format.client.statistics.requests == 2
        assert daf.description().splitlines()[1:4] == ["type: HttpDaf", f"url: {url}", "format: ZarrDaf"]
        assert_same_data(pydaf.ZarrDaf(root / "plain.daf.zarr", "r"), daf)
        assert not hasattr(daf, "set_scalar")
        with pytest.raises(pydaf.DafReadOnlyError, match="an HttpDaf is read-only"):
            daf.set_scalar("x", 1)
        with pytest.raises(pydaf.DafModeError, match="can't open a data set served over HTTP in mode 'r\\+'"):
            pydaf.open_daf(url + "/", "r+")


def test_metadata_once_then_each_chunk_once(root):
    with served(root, "range") as (url, _):
        daf = pydaf.HttpDaf(f"{url}/plain.daf.zarr")
        statistics = daf.format.client.statistics
        # (the root zarr.json, its consolidated metadata listing every node, and the name scalar)
        assert statistics.requests == 2
        for axis in daf.axes_set():
            daf.vectors_set(axis)
            for other in daf.axes_set():
                daf.matrices_set(axis, other)
            assert daf.has_vector(axis, "sparse") == (axis == "cell")
        assert daf.scalars_set() == {"name", "count", "ratio", "flag", "note"}
        assert statistics.requests == 2
        assert daf.axis_length("cell") == 700
        assert statistics.requests == 3  # (the axis's chunk: its entries are stored, as its shape says)
        daf.get_vector("cell", "dense_float64")
        assert daf.get_scalar("note") == "naïve ✓"
        assert statistics.requests == 5
        daf.empty_cache()
        daf.get_vector("cell", "dense_float64")
        daf.axis_vector("cell")  # (its chunk was fetched whole with its size: a small file)
        assert statistics.requests == 5


def test_a_few_columns_of_a_packed_matrix_fetch_a_few_of_its_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("DAF_PACKED_TARGET_CHUNK_KB", "1")
    path = tmp_path / "big.daf.zarr"
    rng = np.random.default_rng(11)
    daf = pydaf.ZarrDaf(path, "w", packed=True).add_axis("cell", [f"c{i}" for i in range(2000)])
    daf.add_axis("gene", [f"g{i}" for i in range(120)])
    dense = rng.random((2000, 120))
    daf.set_matrix("cell", "gene", "X", dense, relayout=False)
    daf.set_matrix("cell", "gene", "S", sp.random(2000, 120, density=0.3, random_state=2, format="csc"),
                   relayout=False)
    daf.close()
    (shard,) = shard_files(path / "matrices" / "cell" / "gene" / "X")
    local = pydaf.ZarrDaf(path, "r")
    with served(tmp_path, "range") as (url, server):
        remote = pydaf.HttpDaf(f"{url}/big.daf.zarr")
        remote.axis_length("cell"), remote.axis_length("gene")
        statistics = remote.format.client.statistics
        before, partial = statistics.bytes_received, server.partial
        columns = remote.get_matrix_columns("cell", "gene", "X", [5, 6, 90])
        assert np.array_equal(columns, dense[:, [5, 6, 90]])
        fetched = statistics.bytes_received - before
        assert 0 < fetched < shard.stat().st_size // 8, (fetched, shard.stat().st_size)
        assert server.partial > partial and server.whole == 1  # (Range requests only; the root was whole)
        selected = remote.get_stored_matrix_columns("cell", "gene", "S", [3, 70])
        expected = local.get_stored_matrix_columns("cell", "gene", "S", [3, 70])
        assert np.array_equal(selected.to_dense(), expected.to_dense())
        assert np.array_equal(remote.get_matrix("cell", "gene", "X"), dense)
    with served(tmp_path, "plain") as (url, _):  # (Range ignored: the shard once, whole, then served from it)
        remote = pydaf.HttpDaf(f"{url}/big.daf.zarr")
        assert np.array_equal(remote.get_matrix_columns("cell", "gene", "X", [7]), dense[:, [7]])
        assert np.array_equal(remote.get_matrix_columns("cell", "gene", "X", [8, 9]), dense[:, [8, 9]])


def test_a_few_columns_of_a_flat_matrix_are_read_by_range_requests(tmp_path):
    path = tmp_path / "flat.daf.zarr"
    daf = pydaf.ZarrDaf(path, "w").add_axis("cell", [f"c{i}" for i in range(1000)])
    daf.add_axis("gene", [f"g{i}" for i in range(50)])
    dense = np.arange(50_000, dtype=np.float32).reshape(1000, 50)
    daf.set_matrix("cell", "gene", "X", dense, relayout=False)
    daf.set_matrix("cell", "gene", "none", np.zeros((1000, 50), dtype=np.int16), relayout=False)  # (not stored)
    daf.close()
    with served(tmp_path, "range") as (url, _):
        remote = pydaf.HttpDaf(f"{url}/flat.daf.zarr")
        remote.axis_length("cell"), remote.axis_length("gene")
        before = remote.format.client.statistics.bytes_received
        columns = remote.get_matrix_columns("cell", "gene", "X", [49, 0, 1])
        assert np.array_equal(columns, dense[:, [49, 0, 1]]) and columns.flags.f_contiguous
        assert remote.format.client.statistics.bytes_received - before < 3 * 4000 + 65536  # (of 200,000)
        zeros = remote.get_matrix_columns("cell", "gene", "none", ["g3"])
        assert zeros.dtype == np.int16 and zeros.shape == (1000, 1) and not zeros.any()
        assert remote.get_matrix_columns("gene", "cell", "X", [2]).ravel().tolist() == dense[2].tolist()


def pydaf_command(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf", *arguments], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_command_line_reads_zarr_urls(root, tmp_path):
    with served(root, "range") as (url, _):
        target = f"{url}/packed.daf.zarr"
        described = pydaf_command("describe", target)
        assert described.returncode == 0, described.stderr
        assert "type: HttpDaf" in described.stdout and "format: ZarrDaf" in described.stdout
        assert "dense_float64: 700 x Float64 (Dense)" in described.stdout
        queried = pydaf_command("query", target, QUERY)
        assert queried.returncode == 0, queried.stderr
        assert queried.stdout == pydaf_command("query", str(root / "packed.daf.zarr"), QUERY).stdout
        checked = pydaf_command("check", target)
        assert checked.returncode == 0 and checked.stdout.startswith(f"{target}: sound (5 scalars, 3 axes")
        converted = pydaf_command("convert", target, str(tmp_path / "copy.h5df"))
        assert converted.returncode == 0, converted.stderr
        assert_same_data(pydaf.ZarrDaf(root / "packed.daf.zarr", "r"), pydaf.open_daf(str(tmp_path / "copy.h5df")))


# A hostile server: what it answers for each path is the test's.


@pytest.fixture
def hostile(root, tmp_path):
    """A hostile server on a copy of the served root (the tests change files there)."""
    shutil.copytree(root, tmp_path / "root")
    with hostile_server(tmp_path / "root") as server:
        server.root = tmp_path / "root"
        yield server


def reader(server, layout: str = "plain", **keywords) -> pydaf.HttpDaf:
    return pydaf.HttpDaf(f"{server.url}/{layout}.daf.zarr", backoff=keywords.pop("backoff", 0.01), **keywords)


AGE = "/plain.daf.zarr/vectors/cell/dense_float64/c/0"


def test_server_errors_are_retried_then_name_the_url_and_the_property(hostile):
    hostile.behaviours[AGE] = lambda handler, path, attempt: send(handler, 500, b"broken")
    with pytest.raises(pydaf.DafHttpError) as raised:
        reader(hostile, retries=2).get_vector("cell", "dense_float64")
    assert str(raised.value) == (f"HTTP status 500 (after 2 retries) for: {hostile.url}{AGE}\nfor the vector: "
                                 f"dense_float64\nof the axis: cell\nin the daf data: served zarr!")
    assert raised.value.status == 500 and hostile.attempts[AGE] == 3
    hostile.behaviours[AGE] = lambda handler, path, attempt: send(handler, 403, b"no")
    with pytest.raises(pydaf.DafHttpError, match=f"HTTP status 403 for: {hostile.url}{AGE}\nfor the vector: "):
        reader(hostile).get_vector("cell", "dense_float64")


def test_a_truncated_body_and_lying_lengths(hostile):
    data = (hostile.root / AGE.lstrip("/")).read_bytes()
    assert len(data) == 5600
    hostile.behaviours[AGE] = lambda handler, path, attempt: truncated(handler, str(hostile.root), path)
    with pytest.raises(pydaf.DafHttpError, match=f"a truncated body from: {hostile.url}{AGE}\n\\(received 2800 bytes "
                                                 "of the 5600 its Content-Length announced\\)\nfor the vector: "
                                                 "dense_float64"):
        reader(hostile, retries=0).get_vector("cell", "dense_float64")
    hostile.behaviours[AGE] = lambda handler, path, attempt: send(handler, 200, data + b"!" * 8)
    with pytest.raises(pydaf.DafHttpError, match=f"the server announces 5608 bytes for: {hostile.url}{AGE}\n\\(more "
                                                 "than the 5600 expected\\)\nfor the vector: dense_float64"):
        reader(hostile).get_vector("cell", "dense_float64")
    hostile.behaviours[AGE] = lambda handler, path, attempt: send(handler, 200, data[:800])
    with pytest.raises(pydaf.DafFormatError, match=r"the chunk: vectors/cell/dense_float64/c/0\nin the daf zarr "
                                                   r"group served at: .*\nhas 800 bytes instead of 5600 \(700 x "
                                                   r"float64\)\nfor the vector: dense_float64"):
        reader(hostile).get_vector("cell", "dense_float64")


def test_missing_chunks_read_as_a_local_zarr_daf_reads_them(hostile):
    """A chunk the server does not have is one Zarr did not store (the fill value), as a missing chunk file is
    locally; an axis's entries and the indices of sparse data must be stored: theirs is an error."""
    hostile.behaviours[AGE] = lambda handler, path, attempt: send(handler, 404, b"gone")
    served_values = reader(hostile).get_vector("cell", "dense_float64")
    (hostile.root / AGE.lstrip("/")).unlink()
    assert served_values.tolist() == pydaf.ZarrDaf(hostile.root / "plain.daf.zarr", "r").get_vector(
        "cell", "dense_float64").tolist() == [0.0] * 700
    hostile.behaviours["/plain.daf.zarr/axes/cell/c/0"] = lambda handler, path, attempt: send(handler, 404, b"")
    with pytest.raises(pydaf.DafFormatError, match=r"the axis: cell\nin the daf zarr group: http://.*\ndeclares 700 "
                                                   r"entries but stores 0 bytes of them in: axes/cell/c/0"):
        reader(hostile).get_vector("cell", "type")
    hostile.behaviours.pop("/plain.daf.zarr/axes/cell/c/0")
    nzind = "/plain.daf.zarr/vectors/cell/sparse/nzind/c/0"
    hostile.behaviours[nzind] = lambda handler, path, attempt: send(handler, 410, b"")
    with pytest.raises(pydaf.DafFormatError, match=r"the nzind of the sparse vector: sparse\nof the axis: cell\nin "
                                                   r"the daf zarr group: .*\nhas 3 entries \(expected: at most 700\) "
                                                   r"or is not all stored"):
        reader(hostile).get_vector("cell", "sparse")


def test_a_damaged_shard_names_the_property(hostile):
    daf = pydaf.ZarrDaf(hostile.root / "packed.daf.zarr", "r")
    assert daf.get_vector("cell", "dense_int32").shape == (700,)
    key = "/packed.daf.zarr/vectors/cell/dense_int32/c/0"
    data = (hostile.root / key.lstrip("/")).read_bytes()
    hostile.behaviours[key] = lambda handler, path, attempt: send(handler, 200, data[:60])  # (its index only)
    with pytest.raises(pydaf.DafFormatError, match=r"invalid packed data of the vector: dense_int32\nof the axis: "
                                                   r"cell\nin the daf zarr group: http://.*/packed\.daf\.zarr\n"):
        reader(hostile, "packed").get_vector("cell", "dense_int32")
    hostile.behaviours[key] = lambda handler, path, attempt: send(handler, 206, data[:10], headers={
        "Content-Range": f"bytes 0-9/{len(data)}"})
    with pytest.raises(pydaf.DafHttpError, match=rf"the server sent the bytes 0-9 \(10 bytes\) of: {hostile.url}{key}"
                                                 rf"\ninstead of its last 65536 of {len(data)} bytes"):
        reader(hostile, "packed").get_vector("cell", "dense_int32")
    hostile.behaviours[key] = lambda handler, path, attempt: send(handler, 503, b"")
    with pytest.raises(pydaf.DafHttpError, match=rf"HTTP status 503 \(after 0 retries\) for: {hostile.url}{key}\nfor "
                                                 r"the vector: dense_int32\nof the axis: cell"):
        reader(hostile, "packed", retries=0).get_vector("cell", "dense_int32")


def test_what_is_not_a_served_zarr_daf(hostile):
    zarr_json = "/plain.daf.zarr/zarr.json"
    hostile.behaviours[zarr_json] = lambda handler, path, attempt: send(handler, 404, b"")
    with pytest.raises(pydaf.errors.DafNotDafError, match=rf"not a daf data set: {hostile.url}/plain\.daf\.zarr\n\(the "
                                                          r"server has no zarr.json there: HTTP 404"):
        reader(hostile)
    with pytest.raises(pydaf.errors.DafNotDafError, match=rf"not a daf data set: {hostile.url}/plain\n\(the server "
                                                          r"has neither a daf.json there, .* nor a zarr.json"):
        pydaf.HttpDaf(f"{hostile.url}/plain")
    root = json.loads((hostile.root / "plain.daf.zarr" / "zarr.json").read_text())
    for body, error, message in (
            (b"{not json", pydaf.DafFormatError, "invalid zarr.json of the zarr group: http://"),
            (json.dumps({**root, "attributes": {}}).encode(), pydaf.errors.DafNotDafError, "not a daf data set: "),
            (json.dumps({**root, "attributes": {"daf": [2, 0]}}).encode(), pydaf.DafFormatError,
             r"incompatible format version: 2\.0"),
            (json.dumps({key: value for key, value in root.items() if key != "consolidated_metadata"}).encode(),
             pydaf.DafFormatError, r"no consolidated_metadata in the root zarr.json of the daf zarr group served at: "
                                   r"http://.*\n\(a ZarrDaf served over HTTP is listed by it: HTTP can't list folders; "
                                   r"open the directory once for writing")):
        hostile.behaviours[zarr_json] = lambda handler, path, attempt, body=body: send(handler, 200, body)
        with pytest.raises(error, match=message):
            reader(hostile)
    hostile.behaviours[zarr_json] = lambda handler, path, attempt: send(handler, 404, b"")
    hostile.behaviours["/plain.daf.zarr/.zgroup"] = lambda handler, path, attempt: send(handler, 200, b"{}")
    with pytest.raises(pydaf.errors.DafZarrVersionError, match="Zarr v2 store at: http://"):
        reader(hostile)


def test_a_root_without_consolidated_metadata_is_fixed_as_the_message_says(root, tmp_path):
    path = tmp_path / "x.daf.zarr"
    shutil.copytree(root / "plain.daf.zarr", path)
    metadata = json.loads((path / "zarr.json").read_text())
    del metadata["consolidated_metadata"]
    (path / "zarr.json").write_text(json.dumps(metadata))
    with served(tmp_path, "plain") as (url, _):
        with pytest.raises(pydaf.DafFormatError, match="no consolidated_metadata"):
            pydaf.HttpDaf(f"{url}/x.daf.zarr")
        pydaf.ZarrDaf(path, "r+").close()  # (what the message says: it writes the consolidated metadata)
        assert_same_data(pydaf.ZarrDaf(root / "plain.daf.zarr", "r"), pydaf.HttpDaf(f"{url}/x.daf.zarr"))


def test_the_julia_written_zarr_fixture_reads_as_locally():
    from .julia_examples import FIXTURES

    directory = FIXTURES / "julia" / "zarr-flat.daf.zarr"
    if not (directory / "zarr.json").is_file():
        pytest.skip(f"the Julia-written ZarrDaf fixture is not at {directory}")
    with served(directory, "range") as (url, _):
        assert_same_data(pydaf.ZarrDaf(directory, "r"), pydaf.open_daf(url))


# The conformance suite, every read back from storage through HttpDaf on a served ZarrDaf directory.

_SERVED = ServedRoot("pydaf-http-zarr-conformance-")


class ServedZarrBackend(DafBackend):
    """ZarrDaf writes (``packed``: packed by default); reading back from storage (``reopen``) is an HttpDaf of the
    served directory."""

    name = "http_zarr"
    packed = False
    _numbers = itertools.count()

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        return pydaf.ZarrDaf(_SERVED.path / f"{next(self._numbers)}.daf.zarr", "w", name=name,
                             packed=self.packed)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        path = Path(daf.complete_path())
        if isinstance(daf.format, ServedZarrFormat):
            path = _SERVED.path / path.name
        daf.format.format_close()
        if mode != "r":
            return pydaf.ZarrDaf(path, mode, name=daf.name, packed=self.packed)
        return pydaf.HttpDaf(f"{_SERVED.url}/{path.name}", name=daf.name)


class PackedServedZarrBackend(ServedZarrBackend):
    name = "http_zarr_packed"
    packed = True


class TestServedZarrDaf(DafConformance):
    backend = ServedZarrBackend()

    def reopen(self, daf: pydaf.DafReader) -> pydaf.DafReader:
        """Read back through HttpDaf (the suite's writes go to ZarrDaf, before)."""
        return self.backend.reopen(daf, "r")

    #: (read into memory: test_served_numbers_are_read_only_arrays_in_memory, below, says what it promises)
    test_stored_numbers_are_file_maps = None


class TestServedPackedZarrDaf(TestServedZarrDaf):
    backend = PackedServedZarrBackend()

    @pytest.fixture(autouse=True)
    def _small_chunks(self, monkeypatch):
        monkeypatch.setenv("DAF_PACKED_TARGET_CHUNK_KB", "1")


expect_read_only_failures(TestServedZarrDaf)


def test_served_numbers_are_read_only_arrays_in_memory(tmp_path):
    backend = ServedZarrBackend()
    daf = backend.new(tmp_path, "maps!").add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y", "Z"])
    daf.set_vector("cell", "age", [1, 2, 3, 4])
    daf.set_matrix("cell", "gene", "dense", np.ones((4, 3)), relayout=False)
    daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(np.eye(4, 3)), relayout=False)
    daf = backend.reopen(daf, "r")
    assert isinstance(daf, pydaf.HttpDaf) and isinstance(daf.format, ServedZarrFormat)
    sparse = daf.get_stored_matrix("cell", "gene", "sparse")
    for array in (daf.get_vector("cell", "age"), daf.get_matrix("cell", "gene", "dense"), sparse.colptr,
                  sparse.rowval, sparse.nzval):
        assert not is_file_map(array) and not array.flags.writeable
