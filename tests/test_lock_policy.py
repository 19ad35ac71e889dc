"""One lock policy for every stored format (issue 24): a writable open waits up to 2 s for another process's writer,
then refuses naming that process's pid; a writer that closes within the wait hands the data set over."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import pydaf

REPOSITORY = Path(__file__).resolve().parent.parent

FORMATS = {
    "H5df": ("H5df", "data.h5df"),
    "FilesDaf": ("FilesDaf", "data.daf"),
    "ZarrDaf directory": ("ZarrDaf", "data.daf.zarr"),
    "ZarrDaf archive": ("ZarrDaf", "data.daf.zarr.zip"),
    "ZipDaf": ("ZipDaf", "data.daf.zip"),
}

# Opens the data set writable, says so, then closes it after the given number of seconds (or when told, if 0).
HOLDER = """
    import sys, time, pydaf
    daf = getattr(pydaf, sys.argv[1])(sys.argv[2], "r+")
    print("open", flush=True)
    if float(sys.argv[3]):
        time.sleep(float(sys.argv[3]))
    else:
        sys.stdin.readline()
    daf.close()
    print("closed", flush=True)
"""


def holder(kind: str, path: str, seconds: float) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), kind, path, str(seconds)],
                             env={**os.environ, "PYTHONPATH": str(REPOSITORY)}, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "open\n", child.stderr.read()  # type: ignore
    return child


def create(kind: str, path: str) -> None:
    daf = getattr(pydaf, kind)(path, "w+")
    daf.set_scalar("version", 1)
    daf.close()


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_second_writer_process_waits_then_is_refused_naming_the_holder(tmp_path, name):
    kind, file_name = FORMATS[name]
    path = str(tmp_path / file_name)
    create(kind, path)
    child = holder(kind, path, 0)
    try:
        start = time.monotonic()
        with pytest.raises(pydaf.DafLockedError, match=rf"another process has it open \(pid: {child.pid}\)"):
            getattr(pydaf, kind)(path, "r+")
        waited = time.monotonic() - start
        assert 1.9 <= waited < 30, waited  # the one wait policy: 2 s for every format
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_writer_closing_within_the_wait_hands_the_data_set_over(tmp_path, name):
    kind, file_name = FORMATS[name]
    path = str(tmp_path / file_name)
    create(kind, path)
    child = holder(kind, path, 0.5)
    try:
        daf = getattr(pydaf, kind)(path, "r+")  # (opened within the 2 s wait, once the holder closed)
        daf.set_scalar("after", 2)
        assert daf.get_scalar("after") == 2 and daf.get_scalar("version") == 1
        daf.close()
        assert child.stdout is not None and child.stdout.readline() == "closed\n"
    finally:
        child.kill()
        child.wait()
