"""``--output PATH``, shared by the benchmark scripts: what a run prints also goes to a results file, after a header
naming the command, the commit and the machine, so a run's full table is kept as it was measured
(``benchmarks/results/<script>-<date>-<commit>.md``; see ``benchmarks/README.md``)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import io
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

Main = Callable[[list[str] | None], object]

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT_HELP = ("also write what the run prints to this file, after a header naming the command, commit and machine "
               "(appended to: runs are never overwritten); e.g. benchmarks/results/<script>-<date>-<commit>.md")


def commit() -> str:
    """The short commit of the checkout the scripts are in, ``+`` if its tracked files differ from it."""
    try:
        head = subprocess.run(["git", "-C", REPOSITORY, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPOSITORY, "diff", "--quiet", "HEAD"], capture_output=True).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def machine() -> str:
    """CPU model, cores, memory, load average: what a time measured here depends on."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), model)
    memory = ""
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo") as meminfo:
        memory = f", {int(meminfo.readline().split()[1]) / 1e6:.0f} GB"
    load = " ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"{platform.node()}: {model}, {os.cpu_count()} cores{memory}, load {load}"


class _Tee(io.TextIOBase):
    def __init__(self, *streams: TextIO) -> None:
        self._streams = streams

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()


@contextlib.contextmanager
def recorded(path: str | None, script: str, argv: list[str] | None = None) -> Iterator[None]:
    """Inside the block, print to stdout and, if ``path`` is given, append to ``path`` too, after a header naming
    ``script`` run with ``argv`` (default: this process's arguments).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with recorded(f"{folder}/run.md", "bench_x.py", ["--repeats", "1"]):
    ...         print("operation  best")
    ...     text = open(f"{folder}/run.md").read()
    operation  best
    >>> text.splitlines()[0].startswith("## ") and text.splitlines()[-2:]
    ['operation  best', '```']
    """
    if path is None:
        yield
        return
    arguments = sys.argv[1:] if argv is None else argv
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    with open(path, "a") as file:
        command = " ".join([os.path.basename(script), *arguments])
        file.write(f"## {stamp}, commit {commit()}\n\n`{command}` on {machine()}\n\n```text\n")
        try:
            with contextlib.redirect_stdout(_Tee(sys.stdout, file)):
                yield
        finally:
            file.write("```\n")


def recording_main(script: str) -> Callable[[Main], Main]:
    """Decorate a script's ``main(argv)``: a run given ``--output PATH`` (which the script's parser declares, with
    :data:`OUTPUT_HELP`) is :func:`recorded` into ``PATH``.

    >>> import tempfile
    >>> @recording_main("bench_x.py")
    ... def main(argv):
    ...     print("argv:", argv)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     main(["--output", f"{folder}/run.md", "--repeats", "1"])  # doctest: +ELLIPSIS
    ...     "argv:" in open(f"{folder}/run.md").read()
    argv: ['--output', ..., '--repeats', '1']
    True
    """

    def decorate(main: Main) -> Main:
        @functools.wraps(main)
        def recording(argv: list[str] | None = None) -> object:
            arguments = sys.argv[1:] if argv is None else list(argv)
            parser = argparse.ArgumentParser(add_help=False)
            parser.add_argument("--output")
            with recorded(parser.parse_known_args(arguments)[0].output, script, arguments):
                return main(argv)

        return recording

    return decorate
