"""Every ``pydaf`` subcommand (demo, describe, query, manifest, repack, convert, check) against hostile paths and
arguments, each run as a real process with a timeout: missing paths and folders, directories where files are expected
(and the reverse), FIFOs, ``/dev/null`` and ``/dev/full``, a read-only folder, a full disk, ``..`` in paths and group
paths, empty, huge and non-UTF-8 names, bad numbers, unknown formats, conflicting options, Ctrl-C, and every way of
naming a command's own input as its output (the same path, ``./``, symbolic and hard links, a group of the same file, a
file inside the data set).

Each refusal is exactly one line ``pydaf <command>: error: ...`` on standard error, plus at most one hint line (in
parentheses), a non-zero exit status (1; 2 for usage errors; 130 for Ctrl-C), no traceback, nothing on standard
output, and every file of the working folder byte for byte as it was, with nothing left behind.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf.interop import daf_as_h5ad

#: ``PYDAF_SOAK=1``: every probe (each destination with and without ``--overwrite``, every bad source for every
#: command, every bad number for every numeric option); by default, a sample holding every kind of probe.
SOAK = float(os.environ.get("PYDAF_SOAK", "0")) >= 1
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TIMEOUT = 120
HUGE = "a" * 100_000
NOT_UTF8 = os.fsdecode(b"\xff\xfe")


#: The memory a probe may allocate: a size taken from an argument fails fast instead of filling the machine.
MEMORY_LIMIT = 4 << 30


#: How a probe is started: ``prlimit`` sets its memory limit (no ``preexec_fn``: probes start from several threads).
LIMITED = ["prlimit", f"--data={MEMORY_LIMIT}"] if shutil.which("prlimit") else []


def run(arguments: list[str], cwd: Path, *, stdout: int | None = subprocess.PIPE,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m pydaf ARGUMENTS`` in ``cwd`` (a hang fails the test through the timeout; an allocation past
    :data:`MEMORY_LIMIT` fails the probe)."""
    return subprocess.run([*LIMITED, sys.executable, "-m", "pydaf", *arguments], cwd=cwd, stdout=stdout,
                          stderr=subprocess.PIPE, timeout=TIMEOUT, env=env or ENV)


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (hidden ones too, links not followed): its kind and content hash."""
    entries = {}
    for parent, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(parent, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                with open(path, "rb") as file:
                    entries[path] = hashlib.sha256(file.read()).hexdigest()
            elif stat.S_ISLNK(mode):
                entries[path] = "link to " + os.readlink(path)
            else:
                entries[path] = f"mode {stat.S_IFMT(mode):o}"
    return entries


def refusal_problem(result: subprocess.CompletedProcess, command: str, status: int = 1) -> str | None:
    """What is wrong with a refusal (``None`` if it has the one shape every refusal has)."""
    stderr = result.stderr.decode("utf-8", "backslashreplace")
    lines = stderr.split("\n")
    if result.returncode != status:
        return f"exit status {result.returncode}, not {status}: {stderr[-300:]!r}"
    if "Traceback" in stderr:
        return f"a traceback: {stderr[-300:]!r}"
    if not stderr.endswith("\n") or len(lines) not in (2, 3):
        return f"not one error line and at most one hint line: {stderr[:600]!r}"
    if not lines[0].startswith(f"{command}: error: ") or len(lines[0]) <= len(f"{command}: error: "):
        return f"not the error line of {command}: {lines[0][:300]!r}"
    if len(lines) == 3 and not (lines[1].startswith("(") and lines[1].endswith(")")):
        return f"a second line that is no hint: {lines[1][:300]!r}"
    if result.stdout:
        return f"output on stdout: {result.stdout[:300]!r}"
    return None


def assert_refused(folder: Path, probes: list[tuple[str, list[str], int]]) -> None:
    """Run each probe ``(command, arguments, status)`` in ``folder`` (a few at a time) and check it is refused, in
    the one-line shape, leaving every file of ``folder`` as it was."""
    before = snapshot(folder)

    def probe(entry: tuple[str, list[str], int]) -> str | None:
        command, arguments, status = entry
        try:
            result = run(arguments, folder)
        except subprocess.TimeoutExpired:
            return f"{arguments!r:.200}: hung"
        problem = refusal_problem(result, command, status)
        return None if problem is None else f"{arguments!r:.200}: {problem}"

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        problems = [problem for problem in pool.map(probe, probes) if problem is not None]
    after = snapshot(folder)
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    assert problems == [] and changed == [], "\n".join([*problems, f"changed or left behind: {changed}"])


def _daf(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    daf.add_axis("cell", ["x", "y", "z"]).add_axis("gene", ["g1", "g2"]).set_scalar("kind", "hostile")
    daf.set_vector("cell", "age", np.array([1, 2, 3])).set_matrix("cell", "gene", "UMIs", np.arange(6.0).reshape(3, 2))
    return daf


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A folder of data sets of every format, and the hostile things around them."""
    root = tmp_path_factory.mktemp("hostile-cli")
    for path in ("a.h5df", "a.daf", "a.daf.zarr", "a.daf.zip", "m.h5dfs#/g1"):
        daf = _daf(pydaf.open_daf(str(root / path), "w", name=f"{path}!"))
        daf.format.format_close()
    obs = _daf(pydaf.MemoryDaf()).add_axis("obs", ["o1", "o2"]).add_axis("var", ["v1"])
    obs.set_matrix("obs", "var", "X", np.array([[1.0], [2.0]]))
    daf_as_h5ad(obs, str(root / "a.h5ad"), progress=False)
    del obs
    (root / "x.h5df").mkdir()  # a directory named like a file
    (root / "empty").mkdir()
    for name in ("fifo", "fifo.h5df", "fifo.h5ad", "fifo.daf.zip"):
        os.mkfifo(root / name)
    (root / "notes.txt").write_text("mine\n")
    (root / "notes.h5df").write_text("mine, not HDF5\n")
    (root / "notes.json").write_text("precious\n")
    for name, minor in (("null", 3), ("full", 7)):  # (see DEVICES)
        if os.geteuid() == 0:
            os.mknod(root / name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        else:
            os.symlink(f"/dev/{name}", root / name)
    os.symlink("a.h5df", root / "link.h5df")
    os.symlink("a.daf", root / "link.daf")
    os.symlink("a.daf.zip", root / "link.daf.zip")
    os.symlink("m.h5dfs", root / "link.h5dfs")
    os.symlink("loop.h5df", root / "loop.h5df")
    os.link(root / "a.h5df", root / "hard.h5df")
    os.link(root / "m.h5dfs", root / "hard.h5dfs")
    return root


#: ``/dev/null`` and ``/dev/full`` as destinations: the fixture's own device nodes (the same devices), so that a command
#: that replaces its destination (as root, what the code before these fixes did) replaces only the test's node, never
#: the system's; without root, links to the system's (which then can't be replaced).
DEVICES = ["null", "full"]

# Paths every command that reads a data set must refuse, in one line.
BAD_SOURCES = ["nope.h5df", "nodir/x.h5df", "x.h5df", "fifo", "fifo.h5df", "/dev/null", "/dev/full", "", HUGE,
               HUGE + ".h5df", f"{NOT_UTF8}.h5df", "notes.txt", "notes.h5df", "m.h5dfs#/../g1", "m.h5dfs#/g1/..",
               "m.h5dfs#/./g1", "m.h5dfs#/nope", "a.h5df/..", "loop.h5df", "nope.daf.zarr", "fifo.daf.zip"]
#: The bad sources of the commands whose source is not their only path (every one with PYDAF_SOAK=1).
SOME_SOURCES = BAD_SOURCES if SOAK else ["nope.h5df", "x.h5df", "fifo.h5df", "/dev/full", "", HUGE,
                                         f"{NOT_UTF8}.h5df", "m.h5dfs#/../g1", "notes.txt", "loop.h5df"]
#: Each destination probed with --overwrite, and with PYDAF_SOAK=1 also without.
OVERWRITE = [[], ["--overwrite"]] if SOAK else [["--overwrite"]]


def test_describe_refuses_bad_paths(folder):
    assert_refused(folder, [("pydaf describe", ["describe", path], 1) for path in BAD_SOURCES]
                   + [("pydaf describe", ["describe", "a.h5df", "--deep", "extra"], 2),
                      ("pydaf describe", ["describe"], 2)])


def test_query_refuses_bad_paths_and_queries(folder):
    queries = ["", "@@@", HUGE, "@ cell : nope", "@ nope : age", "\x1b[2J@ cell", f"@ cell : {NOT_UTF8}",
               ". kind >> Sum", "@ cell [ age > ] : age", "a{1000000000}"]
    assert_refused(folder, [("pydaf query", ["query", path, ". kind"], 1) for path in SOME_SOURCES]
                   + [("pydaf query", ["query", "a.h5df", text], 1) for text in queries]
                   + [("pydaf query", ["query", "a.h5df"], 2)])


def test_check_refuses_what_is_not_a_data_set(folder):
    sources = [*SOME_SOURCES, "m.h5dfs#/nope", "a.h5df/.."]
    sources = [path for path in sources if path != "notes.h5df"]  # (an H5df path whose file is damaged: checked)
    assert_refused(folder, [("pydaf check", ["check", path], 1) for path in sources]
                   + [("pydaf check", ["check"], 2)])
    damaged = run(["check", "notes.h5df"], folder)  # a damaged data set: one problem line on stdout, a summary
    assert damaged.returncode == 1 and damaged.stderr == b"pydaf check: 1 problem in notes.h5df\n"
    assert damaged.stdout.startswith(b"notes.h5df: open: ") and damaged.stdout.count(b"\n") == 1


def test_manifest_refuses_bad_paths_and_never_writes_onto_its_data_set(folder):
    outputs = ["x.h5df", "empty", *DEVICES, "fifo", "nodir/m.json", "notes.txt/m.json", "", HUGE,
               "loop.h5df",
               # the data set itself, by any path, or a file inside it:
               "a.h5df", "./a.h5df", "link.h5df", "hard.h5df", "a.daf/m.json", "link.daf/m.json",
               "a.daf.zarr/m.json", "a.daf.zip", "link.daf.zip"]
    probes = [("pydaf manifest", ["manifest", path], 1) for path in SOME_SOURCES]
    for output in outputs:
        for overwrite in OVERWRITE:
            source = {"a.daf/m.json": "a.daf", "link.daf/m.json": "a.daf", "a.daf.zarr/m.json": "a.daf.zarr",
                      "a.daf.zip": "a.daf.zip", "link.daf.zip": "a.daf.zip"}.get(output, "a.h5df")
            probes.append(("pydaf manifest", ["manifest", source, "--output", output, *overwrite], 1))
    probes += [("pydaf manifest", ["manifest", "m.h5dfs#/g1", "--output", path, "--overwrite"], 1)
               for path in ("m.h5dfs", "link.h5dfs", "hard.h5dfs")]
    probes += [("pydaf manifest", ["manifest", "a.daf", "--output", "a.h5df", "--overwrite"], 1)]  # (data: kept)
    probes += [("pydaf manifest", ["manifest", "a.h5df", "--output", "notes.json"], 1)]  # exists: --overwrite missing
    assert_refused(folder, probes)


def test_demo_refuses_bad_numbers_and_outputs(folder):
    small = ["--cells", "20", "--genes", "10", "--no-progress"]
    numbers = ["-5", "0", "abc", "", "1.5", "1e3", "99999999999999999999", HUGE, "0x10", "-0", " "]
    probes = [("pydaf demo", ["demo", option, number, "--output", "n.h5df", "--no-progress"], 2)
              for option in ("--cells", "--genes") for number in (numbers if SOAK or option == "--cells" else
                                                                  ["-1", "0", "x", "99999999999999999999"])]
    probes += [("pydaf demo", ["demo", "--cells", "10000000", "--genes", "1000", "--output", "n.h5df"], 1),
               ("pydaf demo", ["demo", "--bogus"], 2), ("pydaf", ["demoo"], 2), ("pydaf", [], 2)]
    outputs = ["x.h5df", "empty", *DEVICES, "fifo.h5df", "nodir/d.h5df", "notes.txt/d.h5df", "",
               HUGE + ".h5df", "notes.h5df", "notes.txt", "a.daf", "a.daf.zip", "m.h5dfs#/g2", "m.h5dfs#/../g2",
               "loop.h5df"]
    probes += [("pydaf demo", ["demo", "--output", output, *small, *overwrite], 1)
               for output in outputs for overwrite in OVERWRITE]
    assert_refused(folder, probes)


def test_repack_refuses_bad_paths_and_never_writes_onto_its_source(folder):
    probes = [("pydaf repack", ["repack", path, "r.h5df", "--no-progress"], 1) for path in SOME_SOURCES]
    destinations = ["x.h5df", *DEVICES, "fifo.h5df", "nodir/r.h5df", "notes.txt/r.h5df", "", HUGE,
                    "notes.h5df", "notes.txt", "a.daf", "loop.h5df", "m.h5dfs#/../r", "n.h5dfs#/..",
                    "a.h5df", "./a.h5df", "link.h5df", "hard.h5df", f"{folder}/a.h5df", "../" + folder.name + "/a.h5df"]
    probes += [("pydaf repack", ["repack", "a.h5df", destination, "--no-progress", *overwrite], 1)
               for destination in destinations for overwrite in OVERWRITE]
    probes += [("pydaf repack", ["repack", "m.h5dfs#/g1", destination, "--no-progress", "--overwrite"], 1)
               for destination in ("m.h5dfs#/g1", "m.h5dfs#//g1", "link.h5dfs#/g1", "hard.h5dfs#/g1", "m.h5dfs")]
    probes += [("pydaf repack", ["repack", "a.daf", "r.daf", "--no-progress"], 1),  # no repack for FilesDaf
               ("pydaf repack", ["repack", "a.h5df"], 2)]
    assert_refused(folder, probes)


def test_convert_refuses_bad_paths_and_never_writes_onto_its_source(folder):
    probes = [("pydaf convert", ["convert", path, "c.daf", "--no-progress"], 1)
              for path in [*SOME_SOURCES, "fifo.h5ad"]]
    destinations = ["x.h5df", *DEVICES, "fifo", "fifo.h5df", "fifo.h5ad", "nodir/c.daf",
                    "notes.txt/c.daf", "", HUGE + ".daf", "notes.h5df", "notes.txt", "loop.h5df", "c.h5dfs#/..",
                    "m.h5dfs#/../c", "m.h5dfs#/g2/../g1", "c.dafs.zip#/../c", "c.h5", "c.zarr"]
    probes += [("pydaf convert", ["convert", "a.h5df", destination, "--no-progress", *overwrite], 1)
               for destination in destinations for overwrite in OVERWRITE]
    same = {"a.h5df": ["a.h5df", "./a.h5df", "link.h5df", "hard.h5df", f"{folder}/a.h5df"],
            "a.daf": ["a.daf", "./a.daf/", "link.daf", "a.daf/inner.daf", "link.daf/inner.daf"],
            "a.daf.zarr": ["a.daf.zarr", "./a.daf.zarr", "a.daf.zarr/inner.daf"],
            "a.daf.zip": ["a.daf.zip", "link.daf.zip"],
            "a.h5ad": ["a.h5ad", "./a.h5ad"],
            "m.h5dfs#/g1": ["m.h5dfs#/g1", "m.h5dfs#//g1", "m.h5dfs#/g1/", "link.h5dfs#/g1", "hard.h5dfs#/g1",
                            "m.h5dfs#/g1/inner", "m.h5dfs"]}
    probes += [("pydaf convert", ["convert", source, destination, "--no-progress", "--overwrite"], 1)
               for source, destinations in same.items() for destination in destinations]
    conflicts = [["a.h5df", "c.daf", "--format", "loom"], ["a.h5df", "c.daf", "--format", ""],
                 ["a.h5df", "c.daf", "--format", HUGE], ["a.h5df", "c.daf.zip", "--format", "h5df"],
                 ["a.h5df", "c.daf", "--modality", "rna"], ["a.h5df", "c.daf", "--genome", "GRCh38"],
                 ["a.h5df", "c.daf", "--all-features"], ["a.h5df", "c.daf", "--no-obsm"],
                 ["a.h5df", "c.daf", "--no-raw"],
                 ["a.h5df", "c.daf", "--obs-is", "cell"], ["a.h5ad", "c.h5ad"], ["a.h5df", "c.h5mu"]]
    probes += [("pydaf convert", ["convert", *arguments, "--no-progress"], 1) for arguments in conflicts]
    probes += [("pydaf convert", ["convert", "a.h5df", "c.daf", "--unsupported", "maybe"], 2),
               ("pydaf convert", ["convert", "a.h5df"], 2), ("pydaf convert", ["convert", "a.h5df", "c.daf", "--x"], 2)]
    assert_refused(folder, probes)


def test_a_non_utf8_destination_is_written_and_named_as_its_bytes(tmp_path):
    """(Even where standard output is strict UTF-8, as ``PYTHONIOENCODING=utf-8`` makes it.)"""
    pydaf.H5df(tmp_path / "a.h5df", "w").add_axis("cell", ["x"]).flush()
    result = run(["convert", "a.h5df", f"{NOT_UTF8}.daf", "--no-progress"], tmp_path,
                 env={**ENV, "PYTHONIOENCODING": "utf-8"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == b'wrote FilesDaf "\xff\xfe.daf": 1 axis, 0 vectors, 0 matrices, 0 scalars\n'
    assert pydaf.open_daf(os.fsdecode(bytes(tmp_path) + b"/\xff\xfe.daf")).axis_length("cell") == 1


def test_output_into_a_full_device_is_a_storage_error(folder, tmp_path):
    """``> /dev/full``: one line saying the output could not be written, and nothing left behind."""
    environment = {**ENV, "TMPDIR": str(tmp_path)}  # (where the demo writes without --output)
    commands = [["describe", "a.h5df"], ["query", "a.h5df", "@ cell : age"], ["manifest", "a.h5df"],
                ["check", "a.h5df"], ["demo", "--cells", "20", "--genes", "10", "--no-progress"]]
    before = snapshot(folder)
    with open("/dev/full", "wb") as full:
        for arguments in commands:
            result = run(arguments, folder, stdout=full, env=environment)
            result.stdout = b""
            assert refusal_problem(result, f"pydaf {arguments[0]}") is None, refusal_problem(result,
                                                                                          f"pydaf {arguments[0]}")
            assert b"can't write the standard output; failed: No space left on device" in result.stderr
        for arguments in (["--help"], ["--version"], ["convert", "--help"]):
            result = run(arguments, folder, stdout=full)
            result.stdout = b""
            assert refusal_problem(result, "pydaf") is None, refusal_problem(result, "pydaf")
    assert snapshot(folder) == before and os.listdir(tmp_path) == []


def _in_namespace(script: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a shell script in a private mount namespace (its mounts vanish with it); skip where that needs privileges
    this process lacks."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a read-only or full file system needs a private mount namespace: root and unshare(1)")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"mounting is not permitted here: {probe.stderr.decode()[:200]}")
    return subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=cwd, capture_output=True, timeout=TIMEOUT * 4,
                          env=ENV)


def _namespace_results(result: subprocess.CompletedProcess) -> list[tuple[str, int, bytes]]:
    """The ``(probe, status, stderr)`` of each probe a namespace script ran (each stderr in its own file)."""
    assert result.returncode == 0, result.stderr
    found = []
    for line in result.stdout.decode().splitlines():
        name, status = line.rsplit(" ", 1)
        found.append((name, int(status), Path(f"{name}.err").read_bytes()))
    return found


def test_a_read_only_folder_is_refused_in_one_line(folder, tmp_path):
    """(Root ignores ``chmod 555``: the folder is a read-only bind mount in a private namespace.)"""
    locked = tmp_path / "locked"
    locked.mkdir()
    pydaf.H5df(locked / "old.h5df", "w").set_scalar("old", 1).flush()
    before = snapshot(locked)
    commands = {"convert": f"convert {folder}/a.h5df {locked}/c.daf --no-progress",
                "convert-over": f"convert {folder}/a.h5df {locked}/old.h5df --overwrite --no-progress",
                "convert-zip": f"convert {folder}/a.h5df {locked}/c.daf.zip --no-progress",
                "repack": f"repack {folder}/a.h5df {locked}/r.h5df --no-progress",
                "repack-over": f"repack {folder}/a.h5df {locked}/old.h5df --overwrite --no-progress",
                "manifest": f"manifest {folder}/a.h5df --output {locked}/m.json",
                "demo": f"demo --output {locked}/d.h5df --cells 20 --genes 10 --no-progress"}
    script = f"mount --bind {locked} {locked} && mount -o remount,bind,ro {locked} {locked} || exit 99\n" + "".join(
        f"{sys.executable} -m pydaf {arguments} >/dev/null 2>{tmp_path}/{name}.err; echo {tmp_path}/{name} $?\n"
        for name, arguments in commands.items())
    for name, status, stderr in _namespace_results(_in_namespace(script, tmp_path)):
        command = f"pydaf {Path(name).name.split('-')[0]}"
        result = subprocess.CompletedProcess([], status, b"", stderr)
        assert refusal_problem(result, command) is None, (name, refusal_problem(result, command))
        assert b"read-only file system" in stderr, (name, stderr)
    assert snapshot(locked) == before


def test_a_full_disk_is_a_storage_error_and_leaves_nothing(tmp_path):
    source = tmp_path / "big.h5df"
    daf = pydaf.H5df(source, "w").add_axis("cell", [f"c{index}" for index in range(2000)]).add_axis("gene", ["g"])
    daf.set_matrix("cell", "gene", "m", np.random.default_rng(1).random((2000, 1)) * np.arange(1, 2001)[:, None])
    daf.set_vector("cell", "v", np.random.default_rng(2).random(2000)).flush()
    del daf
    full = tmp_path / "full"
    full.mkdir()
    outputs = ["o.daf", "o.daf.zarr", "o.daf.zip", "o.h5df", "o.h5dfs#/g"]
    script = f"mount -t tmpfs -o size=48k tmpfs {full} || exit 99\n" + "".join(
        f"{sys.executable} -m pydaf convert {source} '{full}/{output}' --no-progress >/dev/null "
        f"2>{tmp_path}/{index}.err; echo {tmp_path}/{index} $?; ls -A {full} >{tmp_path}/{index}.left\n"
        for index, output in enumerate(outputs))
    script += (f"{sys.executable} -m pydaf manifest {source} --output {full}/m.json 2>{tmp_path}/m.err; "
               f"echo {tmp_path}/m $?; ls -A {full} >{tmp_path}/m.left\n")
    for name, status, stderr in _namespace_results(_in_namespace(script, tmp_path)):
        which = outputs[int(Path(name).name)] if Path(name).name.isdigit() else "manifest"
        command = "pydaf manifest" if which == "manifest" else "pydaf convert"
        result = subprocess.CompletedProcess([], status, b"", stderr)
        if which == "manifest" and status == 0:
            continue  # (the manifest of a small data set may fit)
        assert refusal_problem(result, command) is None, (which, refusal_problem(result, command))
        assert b"No space left on device" in stderr, (which, stderr)
        assert Path(f"{name}.left").read_text() == "", (which, Path(f"{name}.left").read_text())


@pytest.fixture(scope="module")
def big_source(tmp_path_factory) -> Path:
    """A data set that takes a while to convert (82 MB)."""
    folder = tmp_path_factory.mktemp("big")
    result = run(["demo", "--output", "big.h5df", "--cells", "20000", "--genes", "2000", "--no-progress"], folder)
    assert result.returncode == 0, result.stderr
    return folder / "big.h5df"


# ``python -m pydaf`` with Ctrl-C handled even where the tests run with SIGINT ignored (a background job of a shell
# without job control: its children inherit the ignored signal, and Python then installs no handler for it).
_WITH_CTRL_C = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                "sys.argv[0] = 'pydaf'; runpy.run_module('pydaf', run_name='__main__', alter_sys=True)")


@pytest.mark.parametrize("destination", ["o.daf", "o.daf.zarr", "o.daf.zip", "o.h5ad", "o.h5df"])
def test_ctrl_c_during_a_convert_exits_130_and_leaves_the_destination_as_it_was(tmp_path, big_source, destination):
    source = big_source
    extra = ["--obs-is", "cell", "--var-is", "gene", "--X-is", "UMIs"] if destination.endswith(".h5ad") else []
    old = run(["convert", str(source), destination, "--no-progress", *extra], tmp_path)  # the destination to keep
    assert old.returncode == 0, old.stderr
    before = snapshot(tmp_path)
    process = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", _WITH_CTRL_C, "convert", str(source),
                                destination, "--overwrite", "--no-progress", *extra], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)  # (a crash shows its stack)
    started = time.monotonic()
    while not any(name.startswith(f".{destination}.tmp") for name in os.listdir(tmp_path)):
        assert process.poll() is None and time.monotonic() - started < TIMEOUT, "the convert never wrote aside"
        time.sleep(0.002)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 130, stderr
    assert stderr == b"pydaf convert: error: interrupted\n" and stdout == b""
    assert snapshot(tmp_path) == before  # the old destination, byte for byte; nothing partial left


# The fixes at their source, below the command line (each also reached by the probes above).


def test_an_h5df_path_that_is_a_directory_or_a_fifo_is_a_format_error(tmp_path):
    """(In a child process: a FIFO could block its open.)"""
    (tmp_path / "x.h5df").mkdir()
    os.mkfifo(tmp_path / "f.h5df")
    script = """if True:
        import sys, pydaf
        for path in ("x.h5df", "f.h5df"):
            for mode in ("r", "r+"):
                try:
                    pydaf.H5df(path, mode)
                except pydaf.DafFormatError as error:
                    print(path, mode, str(error).splitlines()[0])
                else:
                    print(path, mode, "opened")
    """
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            timeout=TIMEOUT, env=ENV)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "x.h5df r not a regular file (a directory): the H5df file", "x.h5df r+ not a regular file (a directory): the "
        "H5df file", "f.h5df r not a regular file (a FIFO): the H5df file", "f.h5df r+ not a regular file (a FIFO): "
        "the H5df file"]


@pytest.mark.parametrize("path", ["x.h5dfs#/..", "x.h5dfs#/../g", "x.h5dfs#/a/../b", "x.h5dfs#/a/./b",
                                  "x.dafs.zip#/a/..", "x.dafs.zarr.zip#/./a"])
def test_a_group_path_with_dot_parts_is_refused_before_anything_is_written(tmp_path, path):
    with pytest.raises(pydaf.DafPathError, match=r"a part \. or \.\. names no group"):
        pydaf.open_daf(f"{tmp_path}/{path}", "w")  # (a Path would drop the "." parts)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("cells", "genes"), [(-5, 10), (0, 10), (10, -1), (10, 0)])
def test_the_demo_refuses_sizes_that_make_no_data_set_before_writing(tmp_path, cells, genes):
    from pydaf.demo import build_demo

    with pytest.raises(pydaf.DafValueError, match=r"number of|too large"):
        build_demo(str(tmp_path / "d.h5df"), n_cells=cells, n_genes=genes, progress=False)
    assert os.listdir(tmp_path) == []


def test_a_manifest_is_never_written_onto_its_data_set(tmp_path):
    from pydaf.manifest import write_manifest

    _daf(pydaf.FilesDaf(tmp_path / "a.daf", "w"))
    _daf(pydaf.H5df(tmp_path / "a.h5df", "w")).flush()
    os.symlink("a.h5df", tmp_path / "link.h5df")
    before = snapshot(tmp_path)
    for source, output in (("a.h5df", "a.h5df"), ("a.h5df", "link.h5df"), ("a.daf", "a.daf/m.json"),
                           ("a.daf", "a.daf")):
        with pytest.raises(pydaf.DafError, match="can't write the manifest"):
            write_manifest(str(tmp_path / source), str(tmp_path / output), overwrite=True)
    with pytest.raises(pydaf.errors.DafNotDafError, match="not a manifest but a data file"):
        write_manifest(str(tmp_path / "a.daf"), str(tmp_path / "a.h5df"), overwrite=True)
    assert snapshot(tmp_path) == before


def test_an_interrupt_while_the_string_heaps_are_checked_goes_through(tmp_path, monkeypatch):
    """A Ctrl-C raised while a view of the checked file's map is alive is the KeyboardInterrupt, not the
    ``BufferError`` of closing that map (which made ``pydaf convert`` exit 1 with "can't read the axis")."""
    from pydaf.formats.h5df import global_heap

    path = tmp_path / "a.h5df"
    pydaf.H5df(path, "w").add_axis("cell", ["x", "y"]).flush()
    views = []

    def interrupted(data, start, size):
        views.append(memoryview(data))  # (a view the traceback keeps alive, as a walk's frame does)
        raise KeyboardInterrupt

    monkeypatch.setattr(global_heap, "walk_problem", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pydaf.H5df(path, "r").axis_vector("cell")
    views.clear()
