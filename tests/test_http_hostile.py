"""HttpDaf against a hostile server (a real ``http.server`` on 127.0.0.1 answering as each test chooses): missing files,
server errors, truncated bodies, lying lengths, redirect loops, stalls and dropped connections each give a
:class:`~pydaf.DafHttpError` (or :class:`~pydaf.DafFormatError`) naming the URL and the property; never another
exception, never an unbounded read."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf.formats.http import HttpByteSource, HttpClient, HttpSettings

from .http_servers import hanging, hostile_server, send, truncated

AGE = "/vectors/cell/age.data"


@pytest.fixture(scope="module")
def served_daf(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "cells.daf"
    daf = pydaf.FilesDaf(path, "w", name="cells!").add_axis("cell", ["A", "B", "C"])
    daf.set_vector("cell", "age", np.array([1.5, 2.5, 3.5]))
    daf.set_vector("cell", "type", ["T", "B", "T"])
    daf.close()
    return path


@pytest.fixture
def server(served_daf):
    with hostile_server(served_daf) as server:
        yield server


def reader(server, **keywords) -> pydaf.HttpDaf:
    return pydaf.HttpDaf(server.url, backoff=keywords.pop("backoff", 0.01), **keywords)


def test_an_honest_answer_reads(server):
    assert reader(server).get_vector("cell", "age").tolist() == [1.5, 2.5, 3.5]


def test_a_missing_file_names_the_url_and_the_property(server):
    server.behaviours[AGE] = lambda handler, path, attempt: send(handler, 404, b"gone")
    daf = reader(server)
    # The name is the URL, with a "#2" when an earlier test of this process served the same port.
    assert daf.name.split("#")[0] == server.url
    with pytest.raises(pydaf.DafHttpError) as raised:
        daf.get_vector("cell", "age")
    assert str(raised.value) == (f"not found (HTTP 404): {server.url}{AGE}\nfor the vector: age\nof the axis: cell\n"
                                 f"in the daf data: {daf.name}")
    assert raised.value.status == 404 and raised.value.url == server.url + AGE
    assert isinstance(raised.value, pydaf.DafStorageError) and raised.value.daf_name == daf.name
    assert server.attempts[AGE] == 1  # (a 404 is not retried)


def test_no_daf_json_is_not_a_daf_data_set(server):
    server.behaviours["/daf.json"] = lambda handler, path, attempt: send(handler, 404, b"")
    with pytest.raises(pydaf.errors.DafNotDafError, match=f"not a daf data set: {server.url}\n"):
        reader(server)


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"axes/cell": 3}'])
def test_an_invalid_metadata_json_is_a_format_error(server, body):
    server.behaviours["/metadata.json"] = lambda handler, path, attempt: send(handler, 200, body)
    with pytest.raises(pydaf.DafFormatError, match=r"metadata.json of the daf served at"):
        reader(server)


@pytest.mark.parametrize(("descriptor", "problem"), [
    ('{"format":"axis","n_entries":-1}', "negative n_entries: -1"),
    ('{"format":"axis","n_entries":"3"}', 'expected "n_entries" to be a integer'),
    ('{"format":"dense","n_entries":3}', 'expected "format":"axis"')])
def test_an_invalid_axis_descriptor_in_metadata_json(server, served_daf, descriptor, problem):
    index = json.loads((served_daf / "metadata.json").read_bytes())
    index["axes/cell"] = json.loads(descriptor)
    server.behaviours["/metadata.json"] = lambda handler, path, attempt: send(handler, 200, json.dumps(index).encode())
    with pytest.raises(pydaf.DafFormatError) as raised:
        reader(server).axis_length("cell")
    assert str(raised.value).startswith("invalid descriptor of the axis: cell\nin the metadata.json of the daf served "
                                        f"at: {server.url}\n({problem})")


def test_a_version_from_the_future_is_refused(server):
    server.behaviours["/daf.json"] = lambda handler, path, attempt: send(handler, 200, b'{"version":[2,0]}\n')
    with pytest.raises(pydaf.DafFormatError, match=r"incompatible format version: 2\.0"):
        reader(server)


def test_server_errors_are_retried_with_backoff(server):
    server.behaviours[AGE] = lambda handler, path, attempt: (
        send(handler, 503, b"busy") if attempt <= 2 else send(handler, 200, np.array([1.5, 2.5, 3.5]).tobytes()))
    daf = reader(server, retries=3)
    assert daf.get_vector("cell", "age").tolist() == [1.5, 2.5, 3.5]
    assert server.attempts[AGE] == 3 and daf.format.client.statistics.retries == 2


def test_persistent_server_errors_give_up_after_the_retries(server):
    server.behaviours[AGE] = lambda handler, path, attempt: send(handler, 500, b"broken")
    started = time.perf_counter()
    with pytest.raises(pydaf.DafHttpError, match=rf"HTTP status 500 \(after 2 retries\) for: "
                                                 rf"{server.url}{AGE}\nfor the vector: age\nof the axis") as raised:
        reader(server, retries=2, backoff=0.05).get_vector("cell", "age")
    assert raised.value.status == 500 and server.attempts[AGE] == 3
    assert time.perf_counter() - started >= 0.05 + 0.1  # (backoff doubles)


def test_a_truncated_body(server, served_daf):
    server.behaviours[AGE] = lambda handler, path, attempt: truncated(handler, str(served_daf), path)
    with pytest.raises(pydaf.DafHttpError, match=f"a truncated body from: {server.url}{AGE}\n\\(received 12 bytes "
                                                 "of the 24 its Content-Length announced\\)\nfor the vector: age"):
        reader(server, retries=0).get_vector("cell", "age")


def test_a_content_length_that_disagrees_with_metadata_json(server):
    server.behaviours[AGE] = lambda handler, path, attempt: send(handler, 200, b"\0" * 16)
    with pytest.raises(pydaf.DafHttpError, match=f"the server announces 16 bytes for: {server.url}{AGE}\ninstead of "
                                                 "the 24 that metadata.json says"):
        reader(server).get_vector("cell", "age")


def test_a_huge_content_length_is_refused_before_reading(server):
    server.behaviours[AGE] = lambda handler, path, attempt: send(handler, 200, b"", length=10**15, close=True)
    with pytest.raises(pydaf.DafHttpError, match="the server announces 1000000000000000 bytes"):
        reader(server).get_vector("cell", "age")


def endless(handler, path, attempt) -> None:
    """No Content-Length, and bytes until the client hangs up."""
    handler.send_response(200)
    handler.send_header("Connection", "close")
    handler.end_headers()
    try:
        for _ in range(10_000):
            handler.wfile.write(b"A\n" * 4096)
    except OSError:
        pass
    handler.close_connection = True


def test_a_body_without_length_is_read_up_to_its_bound(server):
    server.behaviours[AGE] = endless
    with pytest.raises(pydaf.DafHttpError, match=r"more than 24 bytes from: .*age\.data"):
        reader(server).get_vector("cell", "age")
    client = HttpClient(HttpSettings(max_unsized_bytes=1000))
    server.behaviours["/axes/cell.txt"] = endless
    with pytest.raises(pydaf.DafHttpError, match=r"more than 1000 bytes from: .*\n\(the most "
                                                      r"expected\)\nfor the axis: cell"):
        client.get(server.url + "/axes/cell.txt", limit=1000, what="axis: cell")


def test_an_axis_file_that_disagrees_with_metadata_json(server):
    server.behaviours["/axes/cell.txt"] = lambda handler, path, attempt: send(handler, 200, b"A\nB\nC\nD\n")
    with pytest.raises(pydaf.DafFormatError, match=r"the text of the axis: cell\nin the daf served at: .*\nhas 4 "
                                                   r"lines instead of 3"):
        reader(server).axis_vector("cell")
    server.behaviours["/axes/cell.txt"] = lambda handler, path, attempt: send(handler, 200, b"A\nB\nA\n")
    with pytest.raises(pydaf.DafFormatError, match="duplicate entry: 'A'"):
        reader(server).axis_vector("cell")


def redirect(target: str):
    return lambda handler, path, attempt: send(handler, 302, b"", headers={"Location": target})


def test_redirects_are_followed_and_loops_refused(server, served_daf):
    server.behaviours["/metadata.json"] = redirect("/elsewhere/metadata.json")
    server.behaviours["/elsewhere/metadata.json"] = lambda handler, path, attempt: send(
        handler, 200, (served_daf / "metadata.json").read_bytes())
    assert reader(server).get_vector("cell", "age").tolist() == [1.5, 2.5, 3.5]
    server.behaviours[AGE] = redirect("/b")
    server.behaviours["/b"] = redirect(AGE)
    with pytest.raises(pydaf.DafHttpError, match=f"a redirect loop at: {server.url}{AGE}\n\\(redirected through: "):
        reader(server).get_vector("cell", "age")
    server.behaviours[AGE] = redirect("/r0")
    for index in range(20):
        server.behaviours[f"/r{index}"] = redirect(f"/r{index + 1}")
    with pytest.raises(pydaf.DafHttpError, match="too many redirects \\(10\\) from"):
        reader(server).get_vector("cell", "age")
    server.behaviours[AGE] = redirect("ftp://127.0.0.1/age.data")
    with pytest.raises(pydaf.DafHttpError, match=r"a redirect to a URL that is not HTTP\(S\): ftp://"):
        reader(server).get_vector("cell", "age")


def test_a_stalled_server_times_out(server):
    server.behaviours[AGE] = hanging(3)
    started = time.perf_counter()
    with pytest.raises(pydaf.DafHttpError, match=f"timed out \\(after 0.3 s\\) reading: {server.url}{AGE}") as raised:
        reader(server, timeout=0.3).get_vector("cell", "age")
    assert time.perf_counter() - started < 2.5 and raised.value.status is None


def test_dropped_connections_are_retried_then_reported(server):
    def drop(handler, path, attempt) -> None:
        handler.close_connection = True  # (no response at all)

    server.behaviours[AGE] = drop
    with pytest.raises(pydaf.DafHttpError, match=f"the connection was dropped .*for: {server.url}{AGE}"):
        reader(server, retries=2).get_vector("cell", "age")
    assert server.attempts[AGE] == 4  # (one reconnection of a stale connection, then 2 retries)


def test_urls_that_are_not_http(served_daf):
    for url in ("ftp://127.0.0.1/x.daf", "file:///tmp/x.daf", "http://", "http://127.0.0.1/x.daf?token=1"):
        with pytest.raises(pydaf.DafPathError):
            pydaf.HttpDaf(url)
    with pytest.raises(pydaf.DafHttpError, match=r"can't connect to: http://127\.0\.0\.1:9/x\.daf/daf\.json"):
        pydaf.HttpDaf("http://127.0.0.1:9/x.daf", retries=0)


# Range requests.


def test_a_content_range_that_lies(server, served_daf):
    data = (served_daf / "vectors" / "cell" / "age.data").read_bytes()

    def lying(first: int, last: int, total: int, body: bytes):
        return lambda handler, path, attempt: send(handler, 206, body,
                                                   headers={"Content-Range": f"bytes {first}-{last}/{total}"})

    url = server.url + AGE
    server.behaviours[AGE] = lying(0, 7, 24, data[:8])
    assert bytes(HttpByteSource(url, size=24).read(0, 8)) == data[:8]
    server.behaviours[AGE] = lying(8, 15, 24, data[8:16])
    with pytest.raises(pydaf.DafHttpError, match=r"sent the bytes 8-15 \(8 bytes\) of: .*\ninstead of the bytes 0-7"):
        HttpByteSource(url, size=24).read(0, 8)
    server.behaviours[AGE] = lying(0, 7, 99, data[:8])
    with pytest.raises(pydaf.DafHttpError, match=r"the server announces 99 bytes for: .*\ninstead of the 24"):
        HttpByteSource(url, size=24).read(0, 8)
    server.behaviours[AGE] = lying(0, 7, 24, data[:4])
    with pytest.raises(pydaf.DafHttpError, match="sent the bytes 0-7 \\(4 bytes\\)"):
        HttpByteSource(url, size=24).read(0, 8)
    server.behaviours[AGE] = lambda handler, path, attempt: send(handler, 206, data[:8])  # (no Content-Range)
    with pytest.raises(pydaf.DafHttpError, match="a partial response without a valid Content-Range"):
        HttpByteSource(url, size=24).read(0, 8)
    server.behaviours[AGE] = lying(0, 7, 24, data[:8])  # (asked for its size, and so for its last bytes: all 24)
    with pytest.raises(pydaf.DafHttpError, match=r"sent the bytes 0-7 \(8 bytes\) of: .*\ninstead of its last 65536 "
                                                 r"of 24 bytes"):
        HttpByteSource(url).size()
    server.behaviours[AGE] = lying(10**15 - 65536, 10**15 - 1, 10**15, b"")
    with pytest.raises(pydaf.DafHttpError, match=r"the server announces 1000000000000000 bytes for: .*\n\(more than "
                                                 r"the 1000 expected\)"):
        HttpByteSource(url, max_size=1000).size()
    server.behaviours[AGE] = lambda handler, path, attempt: send(handler, 200, data + b"!")  # (a whole file, too long)
    with pytest.raises(pydaf.DafHttpError, match="the server announces 25 bytes"):
        HttpByteSource(url, size=24).read(0, 8)
