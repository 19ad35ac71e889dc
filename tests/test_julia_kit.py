"""The Julia kit (``julia/``) and the bridge's Julia side (``pydaf/julia/bridge.jl``) against DataAxesFormats 0.3.0:
what can be checked without Julia is checked here by reading the kit's files and running real processes (the kit's
version requirements, the juliacall/PythonCall pairing, the README's commands, ``verify.jl``'s exit codes, the
manifest's text); what needs Julia runs where Julia and the instantiated kit are (and each such test skips, saying
why, where they are not). None of these tests fakes a Julia result.
"""

from __future__ import annotations

import gc
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf.julia import DafJuliaError, DafJuliaUnavailableError, JuliaSetup
from pydaf.julia.setup import KIT
from pydaf.manifest import _shown_scalar, daf_manifest, manifest_differences, manifest_json

REPOSITORY = Path(__file__).resolve().parents[1]
DAF_REQUIREMENTS = KIT / "DataAxesFormats-0.3.0.toml"
PYTHONCALL_UUID = "6099a3de-0909-46bc-b1f4-468b9a2dfc0d"


def _toml(path: Path) -> dict:
    with open(path, "rb") as file:
        return tomllib.load(file)


# 1. The kit's requirements lie within DataAxesFormats 0.3.0's.

Version = tuple[int, int, int]


def _version(text: str) -> Version:
    parts = [int(part) for part in text.split(".")]
    return (*parts, 0, 0)[:3]  # type: ignore[return-value]


def _compat_ranges(spec: str) -> list[tuple[Version, Version]]:
    """The versions a Julia ``[compat]`` entry allows, as half-open ranges (Pkg's rules: ``1.2`` and ``^1.2`` mean
    ``[1.2.0, 2.0.0)``, ``0.2.3`` ``[0.2.3, 0.3.0)``, ``0.0.3`` ``[0.0.3, 0.0.4)``, ``~1.2.3`` ``[1.2.3, 1.3.0)``,
    ``=1.2.3`` only 1.2.3; comma-separated parts are a union)."""
    ranges = []
    for part in (part.strip() for part in spec.split(",")):
        match = re.fullmatch(r"([=^~]?)\s*(\d+(?:\.\d+){0,2})", part)
        assert match is not None, f"unsupported [compat] specifier: {part!r}"
        kind, text = match.groups()
        given = len(text.split("."))
        low = _version(text)
        if kind == "=":
            high = (low[0], low[1], low[2] + 1)
        elif kind == "~":
            high = (low[0] + 1, 0, 0) if given == 1 else (low[0], low[1] + 1, 0)
        elif low[0] > 0 or given == 1:
            high = (low[0] + 1, 0, 0)
        elif low[1] > 0 or given == 2:
            high = (0, low[1] + 1, 0)
        else:
            high = (0, 0, low[2] + 1)
        ranges.append((low, high))
    return ranges


def _within(inner: str, outer: str) -> bool:
    """Whether every version ``inner`` allows is one ``outer`` allows."""
    return all(any(low >= outer_low and high <= outer_high for outer_low, outer_high in _compat_ranges(outer))
               for low, high in _compat_ranges(inner))


def test_compat_ranges_follow_pkgs_rules():
    assert _compat_ranges("1.12") == [((1, 12, 0), (2, 0, 0))]
    assert _compat_ranges("0.10.5") == [((0, 10, 5), (0, 11, 0))]
    assert _compat_ranges("0.0.3, =0.3.0") == [((0, 0, 3), (0, 0, 4)), ((0, 3, 0), (0, 3, 1))]
    assert _within("1.12", "1.12") and not _within("1.10", "1.12") and not _within("0.21, 1", "1.5.1")
    assert _within("=0.9.37", "0.9") and not _within("0.9", "=0.9.37")


def test_the_kit_installs_where_dataaxesformats_does():
    """Every [compat] entry the kit shares with DataAxesFormats 0.3.0 lies within its requirement (else
    ``Pkg.instantiate()`` can't resolve: 0.3.0 requires Julia 1.12), and the other places that state the Julia version
    say the same."""
    recorded = _toml(DAF_REQUIREMENTS)
    assert (recorded["name"], recorded["version"]) == ("DataAxesFormats", "0.3.0")
    theirs = recorded["compat"]
    kit = _toml(KIT / "Project.toml")
    ours = kit["compat"]
    assert kit["deps"]["DataAxesFormats"] == recorded["uuid"]
    assert ours["DataAxesFormats"] == "=0.3.0"
    shared = sorted(set(ours) & set(theirs))
    assert {"julia", "JSON", "NamedArrays"} <= set(shared)
    outside = [f"{name}: the kit allows {ours[name]!r}, DataAxesFormats 0.3.0 requires {theirs[name]!r}"
               for name in shared if not _within(ours[name], theirs[name])]
    assert not outside, "\n".join(outside)

    minimum = _compat_ranges(theirs["julia"])[0][0][:2]
    assert minimum == (1, 12)
    assert _compat_ranges(ours["julia"])[0][0][:2] == minimum
    from pydaf.julia.setup import MINIMUM_VERSION

    assert MINIMUM_VERSION == minimum
    readme = (KIT / "README.md").read_text(encoding="utf-8")
    assert "julia --version                                             # 1.12 or later" in readme
    assert "1.10 or later" not in readme


def test_an_older_julia_is_refused_naming_the_requirement(tmp_path):
    old = tmp_path / "bin" / "julia"
    old.parent.mkdir()
    old.write_text("#!/bin/sh\necho 'julia version 1.11.7'\n")
    old.chmod(0o755)
    from pydaf.julia import find_julia

    with pytest.raises(DafJuliaUnavailableError) as error:
        find_julia({"PATH": str(old.parent), "PYTHON_JULIAPKG_PROJECT": str(tmp_path / "none")}, xoptions={})
    assert str(error.value) == (f"Julia 1.11.7 is too old: {old}\nfound by: PATH\n(DataAxesFormats 0.3.0 needs Julia "
                                "1.12 or later)")


# 7. juliacall and PythonCall: pinned as a pair, and checked before Julia starts.


def _pinned_juliacall() -> str:
    extras = _toml(REPOSITORY / "pyproject.toml")["project"]["optional-dependencies"]["julia"]
    assert len(extras) == 1
    match = re.fullmatch(r"juliacall==(\d+\.\d+\.\d+)", extras[0])
    assert match is not None, f"pyproject.toml's julia extra does not pin one juliacall version: {extras}"
    return match[1]


def test_juliacall_and_pythoncall_are_pinned_to_the_same_version():
    version = _pinned_juliacall()
    assert _toml(KIT / "Project.toml")["compat"]["PythonCall"] == f"={version}"
    readme = (KIT / "README.md").read_text(encoding="utf-8")
    assert f"juliacall {version}" in readme and f"PythonCall {version}" in readme


def _manifest(directory: Path, pythoncall: str | None, *, name: str = "Manifest.toml", format_2: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Project.toml").write_text(f'[deps]\nPythonCall = "{PYTHONCALL_UUID}"\n')
    lines = ['julia_version = "1.12.1"', 'manifest_format = "2.0"', ""] if format_2 else []
    if pythoncall is not None:
        lines += ["[[deps.PythonCall]]" if format_2 else "[[PythonCall]]", 'deps = ["CondaPkg"]',
                  f'uuid = "{PYTHONCALL_UUID}"', f'version = "{pythoncall}"', ""]
    lines += ["[[deps.CondaPkg]]" if format_2 else "[[CondaPkg]]", 'uuid = "992eb4ea-22a4-4c89-a5bb-47a3300528ab"',
              'version = "0.2.33"']
    (directory / name).write_text("\n".join(lines) + "\n")
    return directory


def test_the_pairing_check_names_both_versions(tmp_path):
    from pydaf.julia.errors import DafJuliaVersionError
    from pydaf.julia.setup import check_juliacall_pairing

    def setup(project: Path) -> JuliaSetup:
        return JuliaSetup("/opt/julia/bin/julia", (1, 12, 1), "PATH", str(project), "PYDAF_JULIA_PROJECT")

    matching = setup(_manifest(tmp_path / "matching", "0.9.37"))
    check_juliacall_pairing(matching, "0.9.37")
    check_juliacall_pairing(setup(_manifest(tmp_path / "old-format", "0.9.37", format_2=False)), "0.9.37")

    with pytest.raises(DafJuliaVersionError) as error:
        check_juliacall_pairing(matching, "0.9.30")
    manifest = tmp_path / "matching" / "Manifest.toml"
    install = (f"julia --project={tmp_path / 'matching'} -e 'using Pkg; Pkg.compat(\"PythonCall\", \"=0.9.30\"); "
               "Pkg.add(name=\"PythonCall\", version=\"0.9.30\")'")
    assert str(error.value) == (
        "juliacall 0.9.30 can't run with PythonCall 0.9.37 (juliacall X.Y.Z needs PythonCall X.Y.Z)\n"
        f"PythonCall 0.9.37: in {manifest}\nchosen by: PYDAF_JULIA_PROJECT\n(install the matching pair: pip install "
        f"'juliacall==0.9.37', or: {install})")
    assert isinstance(error.value, DafJuliaError) and isinstance(error.value, DafJuliaUnavailableError)
    assert isinstance(error.value, pydaf.DafError)

    with pytest.raises(DafJuliaVersionError, match=r"^the Julia project has no PythonCall, which juliacall 0\.9\.37 "):
        check_juliacall_pairing(setup(_manifest(tmp_path / "none", None)), "0.9.37")

    # Julia reads Manifest-v1.12.toml before Manifest.toml (Base.manifest_names): so does the check.
    versioned = _manifest(tmp_path / "versioned", "0.9.30")
    _manifest(versioned, "0.9.37", name="Manifest-v1.12.toml")
    check_juliacall_pairing(setup(versioned), "0.9.37")
    with pytest.raises(DafJuliaVersionError, match=r"PythonCall 0\.9\.30"):
        check_juliacall_pairing(JuliaSetup("/opt/julia", (1, 13, 0), "PATH", str(versioned), "x"), "0.9.37")

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "Manifest.toml").write_text("[[deps.PythonCall\n")
    with pytest.raises(DafJuliaUnavailableError, match=r"^can't read the Julia project's manifest: "):
        check_juliacall_pairing(setup(broken), "0.9.37")


def _fake_distribution(site: Path, name: str, version: str) -> None:
    """An installed distribution's metadata (what ``pip install`` leaves), without its package."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_find_julia_refuses_a_mismatched_juliacall_before_importing_it(tmp_path):
    """In a real process with juliacall 0.9.30's metadata installed and a project holding PythonCall 0.9.37: the
    reason names both versions, and neither juliacall nor juliapkg was imported."""
    site = tmp_path / "site"
    _fake_distribution(site, "juliacall", "0.9.30")
    julia = tmp_path / "bin" / "julia"
    julia.parent.mkdir()
    julia.write_text("#!/bin/sh\necho 'julia version 1.12.1'\n")
    julia.chmod(0o755)
    project = _manifest(tmp_path / "project", "0.9.37")
    code = """
import sys, pydaf.julia
print(pydaf.julia.julia_unavailable_reason().splitlines()[0])
print(sorted(module for module in sys.modules if module.startswith(("juliacall", "juliapkg"))))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPOSITORY,
        env={"PATH": str(julia.parent), "HOME": str(tmp_path), "PYDAF_JULIA_PROJECT": str(project),
             "PYTHON_JULIAPKG_PROJECT": str(tmp_path / "juliapkg"), "PYTHONPATH": f"{REPOSITORY}{os.pathsep}{site}"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "juliacall 0.9.30 can't run with PythonCall 0.9.37 (juliacall X.Y.Z needs PythonCall X.Y.Z)", "[]"]


# 5. The README's commands read juliacall's version without importing it.


def _shell_commands(markdown: str) -> list[str]:
    """The commands of a markdown file's ``sh`` blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", markdown, flags=re.DOTALL):
        parts: list[str] = []
        for line in block.splitlines():
            line = line.rstrip()
            if line.endswith("\\"):
                parts.append(line[:-1].strip())
                continue
            parts.append(line.strip())
            command = " ".join(part for part in parts if part)
            if command:
                commands.append(command)
            parts = []
    return commands


def test_no_readme_command_imports_juliacall():
    """Importing juliacall starts juliapkg, which may download Julia and prints ``[juliapkg]`` lines."""
    for readme in (REPOSITORY / "README.md", KIT / "README.md"):
        for command in _shell_commands(readme.read_text(encoding="utf-8")):
            assert re.search(r"\bimport\s+juliacall\b|from\s+juliacall\s+import", command) is None, (readme, command)


def test_the_readmes_version_pipeline_adds_exactly_that_pythoncall(tmp_path):
    """The README's pipeline, run by bash, with juliacall 0.9.37 installed as a package whose import behaves as
    juliacall's does without Julia (juliapkg reports on stdout before anything else) and a ``julia`` that records its
    arguments: one Julia call, with exactly that version."""
    commands = [command for command in _shell_commands((KIT / "README.md").read_text(encoding="utf-8"))
                if "juliacall" in command and "| xargs" in command]
    assert len(commands) == 1, commands
    site = tmp_path / "site"
    _fake_distribution(site, "juliacall", "0.9.37")
    (site / "juliacall").mkdir()
    (site / "juliacall" / "__init__.py").write_text(
        "print('[juliapkg] Locating Julia ^1.10.3')\nprint('[juliapkg] Installing Julia 1.12.1 using JuliaUp')\n"
        "__version__ = '0.9.37'\n")
    calls = tmp_path / "julia-calls.txt"
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "julia").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {shlex.quote(str(calls))}\n")
    (fake_bin / "julia").chmod(0o755)
    (fake_bin / "python").symlink_to(sys.executable)
    result = subprocess.run(["bash", "-c", commands[0]], capture_output=True, text=True, cwd=REPOSITORY,
                            env={"PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(site),
                                 "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [
        '--project=julia -e using Pkg; Pkg.compat("PythonCall", "=0.9.37"); Pkg.add(name="PythonCall", '
        'version="0.9.37")']


# 6. verify.jl's exit codes, by reading it.

_EXIT_CODES = {"OK": 0, "MISMATCH": 1, "USAGE": 2, "UNREADABLE": 3, "FAILED": 4}


def test_verify_has_a_distinct_exit_code_for_each_outcome():
    source = (KIT / "verify.jl").read_text(encoding="utf-8")
    constants = {name: int(value) for name, value in re.findall(r"^const EXIT_([A-Z]+) = (\d+)$", source, re.M)}
    assert constants == _EXIT_CODES
    # The header documents each code with the word its message starts with.
    for word, code in _EXIT_CODES.items():
        assert re.search(rf"^#\s+{code}\s+{word}\s+\S", source, re.M), word
    # Each message names its outcome (and, but for OK and USAGE, its code).
    assert 'println("OK: ' in source and "USAGE: julia --project=julia julia/verify.jl" in source
    for word in ("MISMATCH", "UNREADABLE", "FAILED"):
        assert re.search(rf'"{word}: [^"]*\(exit code \$\(EXIT_{word}\)\)', source), word
    # No bare numbers leave a function; every exception is caught (Julia itself exits with 1 on one).
    assert re.search(r"\breturn\s+\d", source) is None and re.search(r"\bexit\((?!verify\(ARGS\)\))", source) is None
    assert source.rstrip().endswith("exit(verify(ARGS))")
    verify = source[source.index("function verify("):]
    assert re.search(r"try\n\s+return main\(arguments\)\n\s+catch exception\n", verify)
    assert "return EXIT_FAILED" in verify
    # The README documents the same codes.
    readme = (KIT / "README.md").read_text(encoding="utf-8")
    for word, code in _EXIT_CODES.items():
        assert re.search(rf"^\| {code} \| `{word}`", readme, re.M), word


# 8. The manifest's text, and manifest_differences' defaults.


def _julia_float_texts() -> list[tuple[str, str]]:
    source = (KIT / "manifest.jl").read_text(encoding="utf-8")
    table = source[source.index("const PYTHON_FLOAT_TEXTS = ("):]
    table = table[:table.index("\n)\n")]
    return re.findall(r'^\s+"([^"]+)" => "([^"]+)",$', table, re.M)


def test_julias_float_text_table_is_pythons_repr():
    """The table manifest.jl checks its ``python_float_text`` against (in Julia, before writing any manifest) is what
    pydaf's manifest shows for each value."""
    pairs = _julia_float_texts()
    assert len(pairs) >= 20
    for literal, expected in pairs:
        assert _shown_scalar(np.float64(float(literal))) == expected, literal
        if np.isfinite(float(literal)):
            assert repr(float(literal)) == expected, literal
    assert _shown_scalar(np.float32(0.1)) == dict(pairs)["0.10000000149011612"]


def test_julia_writes_the_manifest_text_pydaf_writes():
    """By reading manifest.jl: the text is written by its own writer in pydaf's layout, not by JSON.jl."""
    source = (KIT / "manifest.jl").read_text(encoding="utf-8")
    body = source[source.index("function manifest_text("):]
    assert body[:body.index("\nend\n")].strip().endswith("return manifest_json(manifest_of(daf))")
    assert "JSON.json(" not in source
    sample = {"version": 1, "manifest": "daf-manifest", "scalars": {}, "shape": [3, 4], "x": {"b": True, "a": "\x01é"}}
    assert manifest_json(sample) == ('{\n "manifest": "daf-manifest",\n "scalars": {},\n "shape": [\n  3,\n  4\n ],\n'
                                     ' "version": 1,\n "x": {\n  "a": "\\u0001é",\n  "b": true\n }\n}\n')


def test_both_sides_default_to_not_comparing_storage():
    source = (KIT / "manifest.jl").read_text(encoding="utf-8")
    match = re.search(r"function manifest_differences\([^)]*storage::Bool = (true|false)\)", source)
    assert match is not None
    assert (match[1] == "true") is inspect.signature(manifest_differences).parameters["storage"].default


# 2, 3, 4: the rest needs Julia's own code, read here for the fix and run below where Julia is.


def test_the_kit_opens_every_format_with_one_name():
    source = (KIT / "make_fixtures.jl").read_text(encoding="utf-8")
    opens = re.findall(r"open_format\(path, \"[rw]\"[^)]*\)", source)
    assert opens == ['open_format(path, "w"; name = KIT_NAME)', 'open_format(path, "r"; name = KIT_NAME)']
    assert re.search(r'^const KIT_NAME = "[^"]*!"$', source, re.M)  # `!`: unique_name leaves it as it is


def test_the_bridge_keeps_buffer_owners_by_identity():
    source = (REPOSITORY / "pydaf" / "julia" / "bridge.jl").read_text(encoding="utf-8")
    assert "WeakKeyDict" not in source.split('"""')[-1] and "BUFFER_OWNERS" not in source
    wrap = source[source.index("function wrap_buffer("):]
    assert "keep_owner_alive!(array, owner)" in wrap[:wrap.index("\nend\n")]
    keep = source[source.index("function keep_owner_alive!("):]
    keep = keep[:keep.index("\nend\n")]
    assert "getfield(array, :ref).mem" in keep and "finalizer(memory)" in keep


def test_stored_layouts_are_what_has_matrix_says():
    for path in (REPOSITORY / "pydaf" / "julia" / "bridge.jl", KIT / "manifest.jl"):
        source = path.read_text(encoding="utf-8")
        for call in re.finditer(r"matrices_set\(daf, rows_axis, columns_axis; relayout = false, tensors = false\)",
                                source):
            following = source[call.end():call.end() + 200]
            assert "has_matrix(daf, rows_axis, columns_axis, name; relayout = false)" in following, path


# With Julia.

try:
    from .test_julia import JULIA, JULIA_REASON, REASON, julia_bridge, julia_manifest
except ImportError:  # (run alone, outside the tests package)
    JULIA, JULIA_REASON, REASON = None, "tests.test_julia is not importable", "tests.test_julia is not importable"

needs_julia = pytest.mark.skipif(REASON is not None, reason=f"Julia is not available: {(REASON or '')[:150]}")
needs_julia_kit = pytest.mark.skipif(JULIA is None or bool(JULIA_REASON),
                                     reason=f"Julia and the instantiated kit are needed: {(JULIA_REASON or '')[:150]}")


@needs_julia
def test_equal_buffers_keep_their_own_owners():
    """Two sparse matrices with the same structure (equal index buffers, as a WeakKeyDict would see them): once pydaf
    lets go and both collectors run, Julia still reads each matrix's own values."""
    from pydaf.julia import to_julia

    daf = pydaf.MemoryDaf(name="owners!").add_axis("cell", list("ABCD")).add_axis("gene", list("XYZ"))
    for index in range(2):
        matrix = pydaf.SparseMatrixCSC((4, 3), np.array([1, 2, 3, 4], np.int64), np.array([1, 2, 3], np.int64),
                                       np.array([1.0, 2.0, 3.0]) + 10 * index)
        daf.set_matrix("cell", "gene", f"m{index}", matrix, relayout=False)
    julia_daf = to_julia(daf, in_memory=True)
    del daf, matrix
    bridge = julia_bridge()
    for _ in range(3):
        gc.collect()
        bridge.seval("GC.gc(true)")
        _ = [np.full(1000, 99, np.int64) for _ in range(100)]  # reuse freed memory, if any was freed
    for index in range(2):
        values = bridge.seval("(daf, name) -> collect(get_matrix(daf, \"cell\", \"gene\", name; relayout = false))")(
            julia_daf, f"m{index}")
        assert np.asarray(values).tolist() == [[1.0 + 10 * index, 0, 0], [0, 2.0 + 10 * index, 0],
                                               [0, 0, 3.0 + 10 * index], [0, 0, 0]]


@needs_julia
def test_a_layout_julia_computed_is_not_reported_as_stored(tmp_path):
    from pydaf.julia import from_julia, to_julia

    path = tmp_path / "one-layout.h5df"
    writer = pydaf.H5df(path, "w", name="layouts!").add_axis("cell", list("ABC")).add_axis("gene", list("XY"))
    writer.set_matrix("cell", "gene", "UMIs", np.asfortranarray(np.arange(6.0).reshape(3, 2)), relayout=False)
    del writer
    gc.collect()
    reader = pydaf.H5df(path, "r")
    julia_daf = to_julia(reader)
    julia_bridge().get_matrix(julia_daf, "gene", "cell", "UMIs")  # Julia computes and caches the other layout
    assert manifest_differences(daf_manifest(reader), julia_manifest(julia_daf), storage=True) == []
    back = from_julia(julia_daf)
    assert back.matrices_set("gene", "cell", relayout=False) == set()
    assert back.matrices_set("cell", "gene", relayout=False) == {"UMIs"}


@needs_julia
def test_repeated_hand_offs_keep_the_name():
    from pydaf.julia import to_julia

    daf = pydaf.MemoryDaf(name="cells").add_axis("cell", ["A"])
    names = [str(julia_bridge().daf_name(to_julia(daf, in_memory=True))) for _ in range(3)]
    assert names == ["cells", "cells", "cells"]


@needs_julia
def test_julias_manifest_text_is_pydafs(tmp_path):
    from pydaf.julia import to_julia

    from .test_manifest import fill_sample

    daf = fill_sample(pydaf.MemoryDaf(name="text!"))
    daf.set_scalar("tiny", 1e-05).set_scalar("huge", 1.5e300).set_scalar("third", np.float32(1 / 3))
    bridge = julia_bridge()
    bridge.check_python_float_text()
    assert str(bridge.manifest_text(to_julia(daf))) == manifest_json(daf_manifest(daf))


def _run_verify(*arguments: str) -> subprocess.CompletedProcess:
    assert JULIA is not None
    return subprocess.run([JULIA.executable, f"--project={KIT}", str(KIT / "verify.jl"), *arguments],
                          capture_output=True, text=True, timeout=600)


@needs_julia_kit
def test_verify_exit_codes(tmp_path):
    path = tmp_path / "x.daf"
    pydaf.FilesDaf(path, "w", name="x!").set_scalar("ratio", 0.1).add_axis("cell", ["A"])
    manifest = tmp_path / "x.json"
    manifest.write_text(manifest_json(daf_manifest(pydaf.FilesDaf(path, "r"))), encoding="utf-8")
    assert _run_verify(str(path), str(manifest)).returncode == 0
    assert _run_verify("--bogus", str(path)).returncode == 2
    missing = _run_verify(str(tmp_path / "missing.daf"), str(manifest))
    assert missing.returncode == 3 and missing.stderr.startswith("UNREADABLE: can't read the data set: "), missing
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    bad = _run_verify(str(path), str(tmp_path / "bad.json"))
    assert bad.returncode == 3 and bad.stderr.startswith("UNREADABLE: can't read the manifest: "), bad
    printed = _run_verify("--print", str(path))
    assert printed.returncode == 0
    theirs = json.loads(printed.stdout)
    assert printed.stdout == manifest_json({**daf_manifest(pydaf.FilesDaf(path, "r")), "name": theirs["name"]})


KIT_OUTPUT = Path(os.environ.get("PYDAF_JULIA_FIXTURES") or REPOSITORY.parent / "shared" / "fixtures" / "julia"
                  / "pydaf-kit")


@pytest.mark.skipif(not (KIT_OUTPUT / "kit.json").is_file(),
                    reason=f"no Julia-written kit at {KIT_OUTPUT} (julia/make_fixtures.jl writes it)")
def test_the_kits_manifests_are_byte_for_byte_pydafs():
    kit = json.loads((KIT_OUTPUT / "kit.json").read_text(encoding="utf-8"))
    for entry in kit["data_sets"]:
        text = (KIT_OUTPUT / entry["manifest"]).read_text(encoding="utf-8")
        ours = daf_manifest(pydaf.open_daf(str(KIT_OUTPUT / entry["path"]), "r"))
        assert text == manifest_json({**ours, "name": json.loads(text)["name"]}), entry["path"]
