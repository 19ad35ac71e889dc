"""Hostile paths given to ``open_daf``: a symbolic link loop, a NUL character, a socket where a file is expected —
each a typed :class:`pydaf.DafError`, never an ``OSError`` or ``ValueError`` (issue 25, classes 4 and 11)."""

from __future__ import annotations

import os
import socket

import pytest

import pydaf
from pydaf._os.files import read_regular_file

MODES = ["r", "r+", "w"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("suffix", [".h5df", ".daf", ".daf.zarr", ".daf.zip", ".daf.zarr.zip"])
def test_a_symbolic_link_loop_is_a_daf_error(tmp_path, suffix, mode):
    loop = tmp_path / f"loop{suffix}"
    os.symlink(loop.name, loop)
    with pytest.raises(pydaf.DafError):
        pydaf.open_daf(loop, mode)
    assert os.path.islink(loop) and os.readlink(loop) == loop.name  # (nothing replaced the link)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("suffix", [".h5df", ".daf", ".daf.zarr", ".daf.zip", ".h5dfs#/g"])
def test_a_path_with_a_nul_character_is_a_path_error(tmp_path, suffix, mode):
    with pytest.raises(pydaf.DafPathError, match="NUL"):
        pydaf.open_daf(str(tmp_path / f"x\0{suffix}"), mode)
    assert os.listdir(tmp_path) == []


def test_a_socket_is_named_a_socket(tmp_path):
    path = tmp_path / "zarr.json"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(pydaf.DafFormatError, match=r"not a regular file \(a socket\): the metadata"):
            read_regular_file(path, what="the metadata", limit=100)
    finally:
        server.close()
