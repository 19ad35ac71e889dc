"""Threads on one data set: 8 reader threads and 1 writer thread for a while, on every backend, in a child process
(so a crash is a failed test, not a dead test runner). Every value the writer stores is uniform (all entries equal to
its version), so a reader can tell a consistent read (one version, all entries equal) from a torn or garbage one.

The duration is 60 s per backend at ``PYDAF_SOAK=1`` (``tests/soak.py``), 6 s by default.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from .soak import soak

SECONDS = soak(60, 6)

_CHILD = textwrap.dedent("""
    import json, sys, threading, time
    import numpy as np
    import pydaf

    backend, path, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if backend == "memory":
        daf = pydaf.MemoryDaf(name="soak!")
    elif backend == "h5df":
        daf = pydaf.H5df(path + ".h5df", "w", name="soak!")
    else:
        daf = pydaf.FilesDaf(path + ".daf", "w", name="soak!")
    n_cells, n_genes = 300, 40
    daf.add_axis("cell", [f"C{index}" for index in range(n_cells)]).add_axis("gene", [f"G{index}" for index in
                                                                                      range(n_genes)])
    daf.set_vector("cell", "age", np.zeros(n_cells, np.int32))
    daf.set_matrix("cell", "gene", "UMIs", np.zeros((n_cells, n_genes), np.float32))
    stop = time.monotonic() + seconds
    errors, counts = [], {"reads": 0, "writes": 0}
    written = {"age": 0, "UMIs": 0}

    def check(values, name):
        values = values.toarray() if hasattr(values, "toarray") else np.asarray(values)
        first = values.flat[0]
        if not np.all(values == first):
            raise AssertionError(f"torn {name}: {np.unique(values)[:5]}")
        if not 0 <= first <= written[name]:
            raise AssertionError(f"{name} holds {first}, never written (last {written[name]})")

    def reader(index):
        while time.monotonic() < stop and not errors:
            try:
                if daf.has_vector("cell", "age"):
                    check(daf.get_vector("cell", "age", default=0), "age")
                if daf.has_matrix("cell", "gene", "UMIs"):
                    check(daf.get_matrix("gene" if index % 2 else "cell", "cell" if index % 2 else "gene",
                                         "UMIs", default=0), "UMIs")
                if index == 0:
                    daf.empty_cache()
                if index == 1:
                    daf.get_query("@ cell @ gene :: UMIs >| Sum || 0", cache=False)
                counts["reads"] += 1
            except pydaf.DafMissingError:
                pass  # deleted between has_* and get_*: a clear error, not a wrong value
            except BaseException as error:
                errors.append(repr(error))

    def writer():
        version = 0
        while time.monotonic() < stop and not errors:
            version += 1
            try:
                written["age"] = version
                daf.set_vector("cell", "age", np.full(n_cells, version, np.int32), overwrite=True)
                written["UMIs"] = version
                if version % 3 == 0:
                    with daf.empty_dense_matrix("cell", "gene", "UMIs", "Float32", overwrite=True) as buffer:
                        buffer[...] = version
                    daf.relayout_matrix("cell", "gene", "UMIs", overwrite=True)
                elif version % 3 == 1:
                    daf.set_matrix("cell", "gene", "UMIs", np.full((n_cells, n_genes), version, np.float32),
                                   overwrite=True)
                else:
                    daf.delete_matrix("cell", "gene", "UMIs")
                    daf.delete_vector("cell", "age")
                counts["writes"] += 1
            except BaseException as error:
                errors.append(repr(error))

    threads = [threading.Thread(target=reader, args=(index,)) for index in range(8)]
    threads.append(threading.Thread(target=writer))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"errors": errors[:5], **counts}))
""")


@pytest.mark.parametrize("backend", ["memory", "h5df", "files"])
def test_eight_readers_and_a_writer(backend, tmp_path):
    result = subprocess.run([sys.executable, "-c", _CHILD, backend, str(tmp_path / "soak"), str(SECONDS)],
                            capture_output=True, text=True, timeout=SECONDS * 10 + 120)
    assert result.returncode == 0, f"the child died ({result.returncode}):\n{result.stderr[-3000:]}"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["errors"] == [], report["errors"]
    assert report["writes"] > 10 and report["reads"] > 100, report
