"""FilesDaf writes are atomic: a writer killed (SIGKILL) at random points never leaves a partial property visible."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pydaf

N_CELLS, N_GENES, N_WRITES = 400_000, 20, 20

WRITER = textwrap.dedent(f"""
    import sys, numpy as np, pydaf
    daf = pydaf.FilesDaf(sys.argv[1], "w+")
    if not daf.has_axis("cell"):
        daf.add_axis("cell", [f"c{{i}}" for i in range({N_CELLS})])
        daf.add_axis("gene", [f"g{{i}}" for i in range({N_GENES})])
    round = int(sys.argv[2])
    print("ready", flush=True)
    for index in range({N_WRITES}):
        value = round * 1000 + index
        if index % 2:
            daf.set_matrix("cell", "gene", f"m{{index}}", np.full(({N_CELLS}, {N_GENES}), value, np.float32),
                           overwrite=True)
        else:
            daf.set_vector("cell", f"v{{index}}", np.full({N_CELLS}, value, np.float64), overwrite=True)
        print(index, flush=True)
""")


def check(path) -> None:
    """Every visible property is whole: all its entries hold one value written by some round."""
    daf = pydaf.FilesDaf(path, "r")
    for name in daf.vectors_set("cell"):
        vector = daf.get_vector("cell", name)
        assert vector.shape == (N_CELLS,) and (vector == vector[0]).all(), name
    for name in daf.matrices_set("cell", "gene", relayout=False):
        matrix = daf.get_matrix("cell", "gene", name, relayout=False)
        assert matrix.shape == (N_CELLS, N_GENES) and (matrix == matrix[0, 0]).all(), name
    for name in daf.matrices_set("gene", "cell", relayout=False):
        matrix = daf.get_matrix("gene", "cell", name, relayout=False)
        assert (matrix == matrix[0, 0]).all(), name


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_writers_leave_only_whole_properties(tmp_path):
    path = tmp_path / "crash.daf"
    generator = random.Random(20)
    completed: dict[str, int] = {}
    interrupted = 0
    for round_index in range(1, 9):
        process = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(round_index)],
                                   stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None and process.stdout.readline() == "ready\n"  # the axes exist
        time.sleep(generator.uniform(0.1, 1.5))
        process.send_signal(signal.SIGKILL)
        output = process.stdout.read()  # (communicate would lose what readline buffered)
        process.wait()
        interrupted += len(output.split()) < N_WRITES
        for line in output.split():
            index = int(line)
            completed[f"v{index}" if index % 2 == 0 else f"m{index}"] = round_index * 1000 + index
        check(path)
        daf = pydaf.FilesDaf(path, "r")
        for name, value in completed.items():  # written (and reported) before the kill: present, this round or later
            if name.startswith("v"):
                assert daf.get_vector("cell", name)[0] >= value, name
            else:
                assert daf.get_matrix("cell", "gene", name)[0, 0] >= value, name
    assert interrupted >= 4, "most writers must be killed in the middle of their writes"
    reopened = pydaf.FilesDaf(path, "r+")  # a writable open repairs a stale metadata.json
    check(path)
    assert np.asarray(reopened.get_vector("cell", "v0")).dtype == np.float64


def test_an_interrupted_overwrite_is_rolled_back_on_open(tmp_path):
    import os

    path = tmp_path / "rollback.daf"
    daf = pydaf.FilesDaf(path, "w").add_axis("cell", ["a", "b"]).set_vector("cell", "x", [1.0, 2.0])
    folder = path / "vectors" / "cell"
    # The state a writer killed mid-overwrite leaves: old files moved aside, the new data renamed in, no descriptor.
    os.replace(folder / "x.json", folder / ".x.json.backup")
    os.replace(folder / "x.data", folder / ".x.data.backup")
    (folder / "x.data").write_bytes(np.array([9.0, 9.0]).tobytes())
    (folder / ".x.data.tmp-1").write_bytes(b"partial")
    del daf
    leftovers = sorted(os.listdir(folder))
    reader = pydaf.FilesDaf(path, "r")  # reads the committed (old) value, and touches nothing
    assert reader.get_vector("cell", "x").tolist() == [1.0, 2.0] and reader.vectors_set("cell") == {"x"}
    assert sorted(os.listdir(folder)) == leftovers
    writer = pydaf.FilesDaf(path, "r+")  # the writer lock holder repairs
    assert writer.get_vector("cell", "x").tolist() == [1.0, 2.0]
    assert sorted(os.listdir(folder)) == ["x.data", "x.json"]
    assert b'"vectors/cell/x"' in (path / "metadata.json").read_bytes()
