"""Zero-copy promises of H5df on a ≥ 1 GB matrix, measured in fresh processes (real files, real maps, real RSS)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

N_ROWS, N_COLUMNS = 16_384, 16_384  # Float32: exactly 1 GiB

WRITE = textwrap.dedent("""
    import sys, numpy as np, pydaf
    daf = pydaf.H5df(sys.argv[1], "w", name="big!")
    daf.add_axis("cell", [f"c{{i}}" for i in range({rows})]).add_axis("gene", [f"g{{i}}" for i in range({columns})])
    with daf.empty_dense_matrix("cell", "gene", "UMIs", "Float32") as matrix:
        matrix[:, 7] = np.arange({rows}, dtype=np.float32)  # the rest stays zero (never touched)
""")

READ = textwrap.dedent("""
    import json, sys, time, psutil, numpy as np, pydaf
    process = psutil.Process()
    daf = pydaf.H5df(sys.argv[1], "r")
    before = process.memory_info().rss
    started = time.perf_counter()
    matrix = daf.get_matrix("cell", "gene", "UMIs")
    elapsed = time.perf_counter() - started
    after = process.memory_info().rss
    address = matrix.__array_interface__["data"][0]
    mapped = False
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == sys.argv[1]:
                low, high = (int(value, 16) for value in fields[0].split("-"))
                mapped |= low <= address and address + matrix.nbytes <= high
    column = matrix[:, 7]
    print(json.dumps({{"rss_growth": after - before, "seconds": elapsed, "mapped": mapped, "nbytes": matrix.nbytes,
                      "shape": list(matrix.shape), "writeable": bool(matrix.flags.writeable),
                      "fortran": bool(matrix.flags.f_contiguous),
                      "column_ok": bool(np.array_equal(column, np.arange({rows}, dtype=np.float32))),
                      "other_zero": float(matrix[:, 8].sum())}}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux only)")
def test_fetching_a_1gb_matrix_maps_it_without_reading(tmp_path):
    path = str(tmp_path / "big.h5df")
    code = {"rows": N_ROWS, "columns": N_COLUMNS}
    subprocess.run([sys.executable, "-c", WRITE.format(**code), path], check=True)
    result = subprocess.run([sys.executable, "-c", READ.format(**code), path], check=True, capture_output=True,
                            text=True)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["nbytes"] >= 1 << 30
    assert report["shape"] == [N_ROWS, N_COLUMNS]
    assert report["mapped"], "the matrix must lie inside a map of the file"
    assert not report["writeable"] and report["fortran"]
    assert report["rss_growth"] < 50 * 1024 * 1024, report
    assert report["column_ok"] and report["other_zero"] == 0


def test_numba_kernel_runs_on_the_mapped_1_based_csc(tmp_path):
    import numba
    import scipy.sparse as sp

    import pydaf

    @numba.njit
    def column_sums(colptr, nzval):  # Julia's layout: colptr is 1-based
        sums = np.zeros(colptr.shape[0] - 1)
        for column in range(colptr.shape[0] - 1):
            for position in range(colptr[column] - 1, colptr[column + 1] - 1):
                sums[column] += nzval[position]
        return sums

    matrix = sp.random(300, 40, density=0.1, format="csc", dtype=np.float32, random_state=3)
    path = tmp_path / "kernel.h5df"
    daf = pydaf.H5df(path, "w").add_axis("cell", [f"c{i}" for i in range(300)])
    daf.add_axis("gene", [f"g{i}" for i in range(40)]).set_matrix("cell", "gene", "UMIs", matrix)
    stored = pydaf.H5df(path, "r").get_stored_matrix("cell", "gene", "UMIs")
    assert stored.colptr[0] == 1 and not stored.nzval.flags.writeable and not stored.nzval.flags.owndata
    np.testing.assert_allclose(column_sums(stored.colptr, stored.nzval), np.asarray(matrix.sum(axis=0)).ravel(),
                               rtol=1e-5)


def test_release_pages_drops_only_file_maps_and_keeps_values(tmp_path):
    import psutil

    import pydaf
    from pydaf._os.maps import release_pages

    path = str(tmp_path / "release.h5df")
    values = np.arange(8 << 20, dtype=np.float64)  # 64 MB
    daf = pydaf.H5df(path, "w").add_axis("x", [str(index) for index in range(8192)])
    daf.add_axis("y", [str(index) for index in range(1024)]).set_matrix("x", "y", "m", values.reshape(8192, 1024),
                                                                      relayout=False)
    mapped = pydaf.H5df(path, "r").get_stored_matrix("x", "y", "m")
    process = psutil.Process()
    assert float(mapped.sum()) == float(values.sum())  # touches every page
    touched = process.memory_full_info().rss
    assert release_pages(mapped)
    released = process.memory_full_info().rss
    assert touched - released > 48 << 20
    assert float(mapped.sum()) == float(values.sum())  # faulted back in from the file, unchanged
    private = values.copy()
    assert not release_pages(private) and np.array_equal(private, values)
