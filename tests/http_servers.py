"""Real HTTP servers on 127.0.0.1 for the HttpDaf tests: aiohttp's static files (which honour Range requests), Python's
``http.server`` (which ignores them), and a hostile server whose answers a test chooses per path."""

from __future__ import annotations

import asyncio
import atexit
import functools
import http.server
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """``python -m http.server``'s handler (it ignores Range: always 200 and the whole file), without the log."""

    protocol_version = "HTTP/1.1"  # (keeps connections alive, as a real server would)

    def log_message(self, format: str, *arguments: object) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    """A threading server that does not print the clients that hang up on it (as the tests' clients do, on purpose)."""

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class _ClosingHandler(_QuietHandler):
    """``python -m http.server`` exactly: HTTP/1.0, one connection per request."""

    protocol_version = "HTTP/1.0"


@contextmanager
def plain_server(directory: str | os.PathLike, *, keep_alive: bool = True) -> Iterator[str]:
    """Python's ``http.server`` serving ``directory`` (HTTP/1.1 keeping connections alive, or as ``python -m
    http.server`` does, HTTP/1.0); yields its base URL."""
    handler = functools.partial(_QuietHandler if keep_alive else _ClosingHandler, directory=os.fspath(directory))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class RangeServer:
    """aiohttp serving a directory: its base URL, and how many requests it answered with 206 and with 200."""

    url: str = ""
    partial: int = 0
    whole: int = 0


@contextmanager
def range_server(directory: str | os.PathLike, *,
                 certificate: tuple[str, str] | None = None) -> Iterator[RangeServer]:
    """aiohttp's static file handler serving ``directory`` (it honours Range requests) in a thread of its own; over
    HTTPS with ``certificate`` (the files of the certificate and of its key)."""
    from aiohttp import web

    served = RangeServer()
    started = threading.Event()
    loop = asyncio.new_event_loop()
    runner_holder: list = []

    async def count(request, response) -> None:  # (once the file handler chose 200 or 206)
        if response.status == 206:
            served.partial += 1
        elif response.status == 200:
            served.whole += 1

    async def start() -> None:
        application = web.Application()
        application.on_response_prepare.append(count)
        application.router.add_static("/", os.fspath(directory))
        runner = web.AppRunner(application, access_log=None)
        await runner.setup()
        context = None
        if certificate is not None:
            import ssl

            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*certificate)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        runner_holder.append(runner)
        served.url = f"{'https' if certificate else 'http'}://127.0.0.1:{runner.addresses[0][1]}"
        started.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not started.wait(30):
        raise RuntimeError("the aiohttp server did not start")
    try:
        yield served
    finally:
        asyncio.run_coroutine_threadsafe(runner_holder[0].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


#: What the hostile server does for a path: ``(handler, path, attempt)`` writes the whole response itself.
Behaviour = Callable[[http.server.BaseHTTPRequestHandler, str, int], None]


@dataclass
class HostileServer:
    """A server whose answer to each path a test chooses (:data:`Behaviour`); other paths are served from
    ``directory`` honestly (whole files, no Range). ``attempts`` counts the requests per path."""

    url: str
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)


def honest(handler: http.server.BaseHTTPRequestHandler, directory: str, path: str) -> None:
    """Serve a file of ``directory`` whole (404 if missing)."""
    file = os.path.join(directory, *path.lstrip("/").split("/"))
    if not os.path.isfile(file):
        send(handler, 404, b"not found")
        return
    with open(file, "rb") as opened:
        send(handler, 200, opened.read())


def send(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes, *, length: int | None = None,
         headers: dict[str, str] | None = None, close: bool = False) -> None:
    """Send a response whose ``Content-Length`` is ``length`` (the body's own by default: a liar's otherwise)."""
    handler.send_response(status)
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    if close:
        handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()
    if close:
        handler.close_connection = True


@contextmanager
def hostile_server(directory: str | os.PathLike) -> Iterator[HostileServer]:
    """A real server on 127.0.0.1 that misbehaves on the paths a test chooses (``server.behaviours[path] = ...``)."""
    root = os.fspath(directory)
    state = HostileServer(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *arguments: object) -> None:
            pass

        def do_GET(self) -> None:  # (http.server's name)
            path = self.path.split("?")[0]
            attempt = state.attempts[path] = state.attempts.get(path, 0) + 1
            behaviour = state.behaviours.get(path)
            if behaviour is None:
                honest(self, root, path)
            else:
                behaviour(self, path, attempt)

    server = _QuietServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def truncated(handler: http.server.BaseHTTPRequestHandler, directory: str, path: str) -> None:
    """The file's true Content-Length, then half its bytes, then a closed connection."""
    file = os.path.join(directory, *path.lstrip("/").split("/"))
    with open(file, "rb") as opened:
        data = opened.read()
    send(handler, 200, data[:len(data) // 2], length=len(data), close=True)


def hanging(seconds: float) -> Behaviour:
    """Wait ``seconds`` before answering at all (a server that stalls)."""
    def behave(handler: http.server.BaseHTTPRequestHandler, path: str, attempt: int) -> None:
        time.sleep(seconds)
        send(handler, 500, b"too late", close=True)
    return behave


class ServedRoot:
    """A temporary folder served by one :func:`range_server` for a whole test module, started on first use and
    stopped at exit (the conformance backends that read back over HTTP write there)."""

    def __init__(self, prefix: str) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix=prefix)
        self.path = Path(self._folder.name)
        self._url: str | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            context = range_server(self.path)
            self._url = context.__enter__().url
            atexit.register(context.__exit__, None, None, None)
        return self._url
