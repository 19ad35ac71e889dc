"""HttpDaf: FilesDaf directories written by pydaf (and by Julia) served by real servers on 127.0.0.1, one that honours
Range requests (aiohttp's static files) and one that ignores them (Python's ``http.server``), read back exactly;
HttpByteSource's Range reads, coalescing and whole-file fallback; ``open_daf`` and the ``pydaf`` command on URLs."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf import SparseMatrixCSC, SparseVector
from pydaf._os.byte_sources import ByteSource
from pydaf.formats.http import HttpByteSource, HttpClient, HttpSettings
from pydaf.formats.http.client import TAIL_BYTES

from .http_servers import plain_server, range_server
from .julia_examples import FIXTURES

pytest.importorskip("aiohttp", reason="aiohttp (the test extra) serves the Range-honouring server")

JULIA = FIXTURES / "julia"


@contextmanager
def served(directory: Path | str, kind: str):
    """``(base URL, server or None)`` of ``directory`` served by the ``kind`` of server."""
    if kind == "range":
        with range_server(directory) as server:
            yield server.url, server
    else:
        with plain_server(directory, keep_alive=kind == "plain") as url:
            yield url, None


SERVERS = ["range", "plain", "plain-http1.0"]


def write_everything(path: Path) -> None:
    """A FilesDaf holding every kind of property pydaf writes."""
    daf = pydaf.FilesDaf(path, "w", name="everything!")
    daf.set_scalar("name", "served!").set_scalar("count", np.int8(-7)).set_scalar("ratio", 0.25)
    daf.set_scalar("flag", True).set_scalar("note", "naïve ✓")
    daf.add_axis("cell", [f"c{index}" for index in range(50)]).add_axis("gene", ["g1", "g2", "g 3"])
    daf.add_axis("empty", [])
    rng = np.random.default_rng(7)
    for dtype in (np.bool_, np.int8, np.uint16, np.int32, np.uint64, np.float32, np.float64):
        daf.set_vector("cell", f"dense_{np.dtype(dtype).name}", rng.integers(0, 3, 50).astype(dtype))
    daf.set_vector("cell", "type", np.array(["T", "B", ""] * 16 + ["NK", "T"], dtype=object))
    daf.set_vector("cell", "rare", np.array([""] * 49 + ["x"], dtype=object))  # (stored sparse)
    values = np.zeros(50)
    values[[3, 17, 40]] = [1.5, -2.0, 7.0]
    daf.set_vector("cell", "sparse", SparseVector(50, np.array([4, 18, 41]), values[[3, 17, 40]]))
    daf.set_vector("cell", "mask", SparseVector(50, np.array([1, 50]), np.array([True, True])))
    daf.set_vector("gene", "zeros", 0)
    daf.set_vector("gene", "with space", [1, 2, 3])
    dense = rng.integers(0, 5, (50, 3))
    daf.set_matrix("cell", "gene", "UMIs", dense, relayout=True)
    daf.set_matrix("cell", "gene", "fractions", sp.random(50, 3, density=0.2, random_state=1, format="csc"),
                   relayout=True)
    daf.set_matrix("gene", "cell", "labels", np.array([["a", "", "b"] * 50]).reshape(3, 50, order="F"))
    daf.close()


@pytest.fixture(scope="module")
def everything(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("http") / "everything.daf"
    write_everything(path)
    return path


def assert_same_data(expected: pydaf.DafReader, actual: pydaf.DafReader) -> None:
    """Every property of ``expected`` reads the same (values and types) from ``actual``."""
    assert actual.scalars_set() == expected.scalars_set()
    for name in expected.scalars_set():
        assert actual.get_scalar(name) == expected.get_scalar(name)
        assert type(actual.get_scalar(name)) is type(expected.get_scalar(name))
    assert actual.axes_set() == expected.axes_set()
    axes = sorted(expected.axes_set())
    for axis in axes:
        assert actual.axis_vector(axis).tolist() == expected.axis_vector(axis).tolist()
        assert actual.vectors_set(axis) == expected.vectors_set(axis)
        for name in expected.vectors_set(axis):
            assert_same_array(expected.get_stored_vector(axis, name), actual.get_stored_vector(axis, name))
    for rows in axes:
        for columns in axes:
            assert actual.matrices_set(rows, columns, relayout=False) == expected.matrices_set(rows, columns,
                                                                                               relayout=False)
            for name in expected.matrices_set(rows, columns, relayout=False):
                assert_same_array(expected.get_stored_matrix(rows, columns, name),
                                  actual.get_stored_matrix(rows, columns, name))


def assert_same_array(expected, actual) -> None:
    assert type(actual) is type(expected)
    if isinstance(expected, SparseVector | SparseMatrixCSC):
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        for part in ("nzind", "colptr", "rowval", "nzval"):
            if hasattr(expected, part):
                assert np.array_equal(getattr(actual, part), getattr(expected, part))
                assert getattr(actual, part).dtype == getattr(expected, part).dtype
    else:
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert np.array_equal(actual, expected)
        assert not actual.flags.writeable


@pytest.mark.parametrize("kind", SERVERS)
def test_every_property_reads_exactly(everything, kind):
    with served(everything, kind) as (url, _):
        daf = pydaf.open_daf(url)
        assert isinstance(daf, pydaf.HttpDaf) and isinstance(daf, pydaf.DafReadOnly)
        assert_same_data(pydaf.FilesDaf(everything, "r"), daf)
        assert daf["@ cell @ gene :: UMIs >| Sum"].tolist() == pydaf.FilesDaf(everything, "r")[
            "@ cell @ gene :: UMIs >| Sum"].tolist()
        daf.close()


def test_threads_read_at_the_same_time(everything):
    from concurrent.futures import ThreadPoolExecutor

    local = pydaf.FilesDaf(everything, "r")
    names = sorted(local.vectors_set("cell"))
    with served(everything, "range") as (url, _):
        daf = pydaf.HttpDaf(url)

        def read(name: str) -> bool:
            expected = local.get_vector("cell", name)
            return all(np.array_equal(daf.get_vector("cell", name), expected) for _ in range(5))

        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(read, names * 4))


@pytest.mark.parametrize("fixture", ["files-v1.1", "example-cells.files"])
def test_julia_written_fixtures_read_exactly(fixture):
    directory = JULIA / fixture
    if not (directory / "metadata.json").is_file():
        pytest.skip(f"the Julia-written fixture is not at {directory} (or has no metadata.json)")
    with served(directory, "range") as (url, _):
        assert_same_data(pydaf.FilesDaf(directory, "r"), pydaf.HttpDaf(url))


def test_a_directory_without_metadata_json_is_refused_saying_how_to_fix(everything, tmp_path):
    import shutil

    shutil.copytree(everything, tmp_path / "x.daf")
    (tmp_path / "x.daf" / "metadata.json").unlink()
    with served(tmp_path / "x.daf", "plain") as (url, _):
        with pytest.raises(pydaf.DafFormatError, match=r"missing metadata.json in: the daf served at: .*\n\(HttpDaf "
                                                       r"lists a data set by its metadata.json; open the directory "
                                                       r"once for writing"):
            pydaf.HttpDaf(url)
        pydaf.FilesDaf(tmp_path / "x.daf", "r+").close()  # (what the message says: it writes metadata.json)
        assert_same_data(pydaf.FilesDaf(everything, "r"), pydaf.HttpDaf(url))


def test_the_packed_julia_fixture_reads_as_locally():
    directory = JULIA / "files-packed" / "gzip.files"
    if not (directory / "metadata.json").is_file():
        pytest.skip(f"the Julia-written packed fixture is not at {directory}")
    local = pydaf.FilesDaf(directory, "r")
    try:
        local.get_vector("cell", "score")
    except pydaf.DafFormatError as error:
        pytest.skip(f"packed FilesDaf data is not read locally yet: {str(error).splitlines()[0]}")
    with served(directory, "range") as (url, server):
        remote = pydaf.HttpDaf(url)
        assert_same_data(local, remote)
        assert server.partial > 0  # (the shards were read by Range requests)
    with served(directory, "plain") as (url, _):
        assert_same_data(local, pydaf.HttpDaf(url))


def test_https_with_a_certificate_the_client_trusts(everything, tmp_path, monkeypatch):
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl (which makes the test's certificate) is not installed")
    certificate, key = tmp_path / "certificate.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(certificate), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    with range_server(everything, certificate=(str(certificate), str(key))) as server:
        assert server.url.startswith("https://")
        with pytest.raises(pydaf.DafHttpError, match=r"can't connect to: https://(.|\n)*\(SSLCertVerificationError(.|\n)*"
                                                     r"SSL_CERT_FILE=FILE names the certificates to trust"):
            pydaf.HttpDaf(server.url, retries=0)  # (a certificate nobody vouches for)
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate))  # (OpenSSL's own way to trust it)
        assert_same_data(pydaf.FilesDaf(everything, "r"), pydaf.HttpDaf(server.url))


def test_names_modes_and_read_only(everything):
    with served(everything, "plain") as (url, _):
        assert pydaf.open_daf(url + "/").name == "served!"  # (the name scalar; a trailing / is dropped)
        daf = pydaf.HttpDaf(url, name="mine!")
        assert daf.name == "mine!" and daf.url == url and daf.complete_path() == url
        assert daf.description().splitlines()[1:3] == ["type: HttpDaf", f"url: {url}"]
        assert not hasattr(daf, "set_scalar")
        with pytest.raises(pydaf.DafReadOnlyError, match="an HttpDaf is read-only: copy it to write"):
            daf.set_scalar("x", 1)
        with pytest.raises(pydaf.DafModeError, match="can't open a data set served over HTTP in mode 'r\\+'"):
            pydaf.open_daf(url, "r+")
        assert pydaf.HttpDaf(url, packed=True).capabilities == (False, False, True)
        assert isinstance(pydaf.open_daf(url, packed=True), pydaf.HttpDaf)  # (accepted, as Julia accepts it)
        assert not daf.format.format_has_vector("cell", "../gene/with space")  # (never another property)
        assert not daf.format.format_has_scalar("../daf") and daf.format.format_vectors_set("..") == set()


def test_metadata_once_and_each_payload_once(everything):
    with served(everything, "range") as (url, _):
        daf = pydaf.HttpDaf(url)
        statistics = daf.format.client.statistics
        assert statistics.requests == 2  # daf.json and metadata.json
        for axis in daf.axes_set():
            daf.axis_length(axis)
            daf.vectors_set(axis)
            for other in daf.axes_set():
                daf.matrices_set(axis, other)
        assert daf.get_scalar("note") == "naïve ✓"
        assert statistics.requests == 2  # (all from metadata.json)
        daf.get_vector("cell", "dense_float64")
        assert statistics.requests == 3
        daf.empty_cache()
        daf.get_vector("cell", "dense_float64")
        assert statistics.requests == 3  # (the bytes were still in the format's own bounded cache)


def test_the_cache_is_bounded_by_DAF_PACKED_HTTP_CACHE_KB(everything, monkeypatch):
    monkeypatch.setenv("DAF_PACKED_HTTP_CACHE_KB", "1")
    with served(everything, "range") as (url, _):
        daf = pydaf.HttpDaf(url)
        assert daf.format.cache.max_bytes == 1024
        for name in sorted(daf.vectors_set("cell")):
            daf.get_vector("cell", name)
            daf.get_matrix("cell", "gene", "UMIs")  # (1,200 bytes: never kept)
            assert daf.format.cache.size <= 1024
        before = daf.format.client.statistics.requests
        daf.empty_cache()
        daf.get_matrix("cell", "gene", "UMIs")
        assert daf.format.client.statistics.requests == before + 1
    monkeypatch.setenv("DAF_PACKED_HTTP_CACHE_KB", "lots")
    with pytest.raises(pydaf.DafValueError, match="invalid value of the environment variable: "
                                                  "DAF_PACKED_HTTP_CACHE_KB\nvalue: 'lots'"):
        HttpSettings.from_environment()


# HttpByteSource.


@pytest.fixture(scope="module")
def blob(tmp_path_factory) -> tuple[Path, bytes]:
    folder = tmp_path_factory.mktemp("blob")
    data = np.random.default_rng(3).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    (folder / "blob.bin").write_bytes(data)
    (folder / "empty.bin").write_bytes(b"")
    (folder / "small.bin").write_bytes(data[:1000])
    return folder, data


def test_a_byte_source_reads_ranges_where_the_server_honours_them(blob):
    folder, data = blob
    with range_server(folder) as server:
        source = HttpByteSource(server.url + "/blob.bin")
        assert isinstance(source, ByteSource)
        assert source.size() == len(data)  # (one suffix Range request: the last 64 KiB come with the size)
        assert source.client.statistics.bytes_received == TAIL_BYTES
        assert bytes(source.read(1000, 500)) == data[1000:1500]
        assert bytes(source.read(99_999, 1)) == data[-1:]  # (in the tail: no request)
        assert source.honours_range is True
        assert server.whole == 0 and server.partial == 2
        assert source.client.statistics.bytes_received == TAIL_BYTES + 500  # (never the whole file)
        with pytest.raises(pydaf.DafFormatError, match=r"truncated file: .*blob.bin\n\(bytes 99999 to 100001 end"):
            source.read(99_999, 2)
        assert HttpByteSource(server.url + "/empty.bin").size() == 0
        small = HttpByteSource(server.url + "/small.bin")
        assert small.size() == 1000 and bytes(small.read(10, 990)) == data[10:1000]  # (it came whole, at once)
        assert small.client.statistics.requests == 1


def test_nearby_ranges_are_coalesced_into_one_request(blob, monkeypatch):
    folder, data = blob
    monkeypatch.setenv("DAF_HTTP_MAX_COALESCE_GAP_KB", "1")
    ranges = [(5000, 100), (0, 10), (5100, 50), (6000, 10), (50_000, 8)]  # gaps: 0, 0, 850 (≤ 1 KiB), far
    with range_server(folder) as server:
        client = HttpClient(HttpSettings.from_environment())
        source = HttpByteSource(server.url + "/blob.bin", size=len(data), client=client)
        parts = source.read_ranges(ranges)
        assert [bytes(part) for part in parts] == [data[offset:offset + length] for offset, length in ranges]
        assert client.statistics.range_requests == 3  # [0,10) ; [5000,6010) ; [50000,50008)
        assert server.partial == 3
    monkeypatch.setenv("DAF_HTTP_MAX_COALESCE_GAP_KB", "0")
    assert HttpSettings.from_environment().max_coalesce_gap == 0


def test_a_server_that_ignores_range_is_read_whole_once(blob):
    folder, data = blob
    with plain_server(folder) as url:
        source = HttpByteSource(url + "/blob.bin", size=len(data))
        assert bytes(source.read(1000, 500)) == data[1000:1500]
        assert source.honours_range is False
        assert [bytes(part) for part in source.read_ranges([(10, 5), (90_000, 20)])] == [data[10:15],
                                                                                         data[90_000:90_020]]
        assert source.client.statistics.requests == 1  # (the whole file once, then served from it)
        assert HttpByteSource(url + "/empty.bin").size() == 0
        with pytest.raises(pydaf.DafHttpError, match=r"the server announces 100000 bytes for: .*\ninstead of the 7 "
                                                     r"that metadata.json says"):
            HttpByteSource(url + "/blob.bin", size=7).read(0, 1)


def test_a_column_range_of_a_dense_matrix_is_read_by_range_requests(tmp_path):
    path = tmp_path / "wide.daf"
    values = np.random.default_rng(5).random((10_000, 40))
    daf = pydaf.FilesDaf(path, "w").add_axis("cell", [f"c{index}" for index in range(10_000)])
    daf.add_axis("gene", [f"g{index}" for index in range(40)])
    daf.set_matrix("cell", "gene", "X", values, relayout=False)
    daf.set_matrix("cell", "gene", "S", sp.csc_matrix(np.where(values > 0.9, values, 0)), relayout=False)
    daf.close()
    column_bytes = 10_000 * 8
    with served(path, "range") as (url, server):
        remote = pydaf.HttpDaf(url)
        statistics = remote.format.client.statistics
        before = (statistics.requests, statistics.bytes_received)
        columns = remote.get_matrix_columns("cell", "gene", "X", [3, 4, 5, 20])
        assert np.array_equal(columns, values[:, [3, 4, 5, 20]]) and not columns.flags.writeable
        assert columns.flags.f_contiguous
        # (3-5 in one request, 20 in another: 14 columns apart, farther than the coalescing gap; never the rest)
        assert (statistics.requests - before[0], statistics.bytes_received - before[1]) == (2, 4 * column_bytes)
        assert server.partial == 2
        assert np.array_equal(remote.get_matrix_columns("cell", "gene", "X", slice(38, None)), values[:, 38:])
        assert np.array_equal(remote.get_matrix_columns("cell", "gene", "X", ["g1"]), values[:, [1]])
        assert np.array_equal(remote.get_matrix_columns("gene", "cell", "X", [7]), values.T[:, [7]])  # (relaid out)
        assert np.array_equal(remote.get_matrix_columns("cell", "gene", "S", [0, 39]),
                              np.where(values > 0.9, values, 0)[:, [0, 39]])
        with pytest.raises(pydaf.DafIndexError, match="column positions out of range: 0 to 40"):
            remote.get_matrix_columns("cell", "gene", "X", [0, 40])
        with pytest.raises(pydaf.DafMissingError, match="missing entry: nope"):
            remote.get_matrix_columns("cell", "gene", "X", ["nope"])
    with served(path, "plain") as (url, _):
        remote = pydaf.HttpDaf(url)
        assert np.array_equal(remote.get_matrix_columns("cell", "gene", "X", [3, 20]), values[:, [3, 20]])
        assert np.array_equal(remote.get_matrix_columns("cell", "gene", "X", [30]), values[:, [30]])
        assert remote.format.client.statistics.requests == 3  # (daf.json, metadata.json, then the file once)


# open_daf and the command line.


def pydaf_command(*arguments: str) -> subprocess.CompletedProcess:
    """The ``pydaf`` command, run as a real process."""
    return subprocess.run([sys.executable, "-m", "pydaf", *arguments], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def test_the_command_line_reads_urls(everything, tmp_path):
    with served(everything, "range") as (url, _):
        described = pydaf_command("describe", url)
        assert described.returncode == 0, described.stderr
        assert "type: HttpDaf" in described.stdout and "dense_float64: 50 x Float64 (Dense)" in described.stdout
        queried = pydaf_command("query", url, "@ cell @ gene :: UMIs >| Sum")
        assert queried.returncode == 0 and queried.stdout == pydaf_command(
            "query", str(everything), "@ cell @ gene :: UMIs >| Sum").stdout
        checked = pydaf_command("check", url)
        assert checked.returncode == 0 and checked.stdout.startswith(f"{url}: sound (5 scalars, 3 axes")
        for destination, kind in (("copy.h5df", "H5df"), ("copy.daf", "FilesDaf"), ("copy.daf.zarr", "ZarrDaf")):
            converted = pydaf_command("convert", url, str(tmp_path / destination))
            assert converted.returncode == 0, converted.stderr
            assert converted.stdout.startswith(f'wrote {kind} "{tmp_path / destination}"')
            assert_same_data(pydaf.FilesDaf(everything, "r"), pydaf.open_daf(str(tmp_path / destination)))
        refused = pydaf_command("convert", str(tmp_path / "copy.h5df"), url + "/more.daf")
        assert refused.returncode == 1
        assert refused.stderr.startswith(f"pydaf convert: error: can't write to the URL: {url}/more.daf")
    missing = pydaf_command("describe", url)  # (the server is gone)
    assert missing.returncode == 1 and missing.stderr.startswith(f"pydaf describe: error: can't connect to: {url}")


def test_importing_pydaf_imports_no_http_machinery():
    code = "import sys, pydaf; print(sorted(m for m in ('http.client', 'ssl', 'aiohttp') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}).stdout.strip() == "[]"
