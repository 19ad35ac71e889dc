"""Finding Julia for the bridge, and starting it through ``juliacall`` without ever downloading anything:
:func:`find_julia` looks only for a Julia that is already there (juliacall's and juliapkg's settings, juliapkg's
project, ``PATH``), and :func:`start_julia` sets the environment so that neither juliacall nor juliapkg installs
anything; the Julia project must hold DataAxesFormats and the PythonCall of the installed juliacall's version.

Design: docs/design/julia.md ("Finding Julia")."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import DafJuliaUnavailableError, DafJuliaVersionError

#: The repository's Julia kit (``julia/``): its ``Project.toml`` pins DataAxesFormats 0.3.0.
KIT = Path(__file__).resolve().parents[2] / "julia"

#: The Julia code pydaf runs in Julia (included once into a module of its own).
BRIDGE_SOURCE = Path(__file__).resolve().parent / "bridge.jl"

#: The oldest Julia DataAxesFormats 0.3.0 installs on (its Project.toml's ``julia = "1.12"``; juliacall needs 1.10).
MINIMUM_VERSION = (1, 12)

#: PythonCall's UUID (how a Julia manifest names the package).
PYTHONCALL_UUID = "6099a3de-0909-46bc-b1f4-468b9a2dfc0d"

#: How long ``julia --version`` may take (a juliaup launcher may update itself on its first run).
VERSION_TIMEOUT_SECONDS = 60


def manifest_names(version: tuple[int, ...]) -> tuple[str, ...]:
    """The manifest files Julia ``version`` looks for in a project, in its order (Julia's ``Base.manifest_names``).

    Example:
        >>> manifest_names((1, 12, 1))
        ('JuliaManifest-v1.12.toml', 'Manifest-v1.12.toml', 'JuliaManifest.toml', 'Manifest.toml')
    """
    suffix = f"-v{version[0]}.{version[1]}"
    return f"JuliaManifest{suffix}.toml", f"Manifest{suffix}.toml", "JuliaManifest.toml", "Manifest.toml"


def project_manifest(project: str, version: tuple[int, ...]) -> str | None:
    """The manifest Julia ``version`` uses for ``project`` (a directory), if it is instantiated.

    Example:
        >>> project_manifest("/nonexistent", (1, 12, 0)) is None
        True
    """
    for name in manifest_names(version):
        path = os.path.join(project, name)
        if os.path.isfile(path):
            return path
    return None


@dataclass(frozen=True)
class JuliaSetup:
    """The Julia the bridge would start: its executable, version and project, and where each came from.

    Attributes:
        executable: the absolute path of the ``julia`` executable (symbolic links resolved).
        version: its version, e.g. ``(1, 11, 2)``.
        source: the setting or search that found it (``PYTHON_JULIACALL_EXE``, ``PATH``, …).
        project: the Julia project (directory) juliacall activates.
        project_source: the setting that chose the project (``PYDAF_JULIA_PROJECT``, ``the pydaf kit``, …).
    """

    executable: str
    version: tuple[int, int, int]
    source: str
    project: str
    project_source: str


def _option(environ: Mapping[str, str], xoptions: Mapping[str, Any], xkey: str, envkey: str) -> tuple[str, str] | None:
    """A setting given as ``-X xkey=value`` (first) or in the environment, with how it was given."""
    value = xoptions.get(xkey)
    if isinstance(value, str) and value:
        return value, f"-X {xkey}={value}"
    value = environ.get(envkey)
    if value:
        return value, f"{envkey}={value}"
    return None


def _juliapkg_project(environ: Mapping[str, str], xoptions: Mapping[str, Any]) -> Path:
    """The project juliapkg uses (as juliapkg's ``state.py`` decides it)."""
    given = _option(environ, xoptions, "juliapkg-project", "PYTHON_JULIAPKG_PROJECT")
    if given is not None:
        return Path(given[0])
    prefix = sys.prefix if sys.prefix != sys.base_prefix else environ.get("CONDA_PREFIX")
    if prefix:
        return Path(prefix) / "julia_env"
    depot = (environ.get("JULIA_DEPOT_PATH") or "").split(os.pathsep)[0] or os.path.join(os.path.expanduser("~"),
                                                                                        ".julia")
    return Path(depot) / "environments" / "pyjuliapkg"


def _juliapkg_executables(environ: Mapping[str, str], xoptions: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The Julia juliapkg already resolved (its ``meta.json``) or installed, if any (never asking juliapkg)."""
    state = _juliapkg_project(environ, xoptions) / "pyjuliapkg"
    found = []
    try:
        executable = json.loads((state / "meta.json").read_text(encoding="utf-8")).get("executable")
    except (OSError, ValueError, AttributeError):
        executable = None
    if isinstance(executable, str) and executable:
        found.append((executable, f"juliapkg's resolved Julia ({state / 'meta.json'})"))
    found.append((str(state / "install" / "bin" / "julia"), "juliapkg's installed Julia"))
    return found


def _version(executable: str) -> tuple[int, int, int] | None:
    """The version ``executable --version`` reports, if it is a Julia."""
    try:
        result = subprocess.run([executable, "--version"], capture_output=True, text=True,
                                timeout=VERSION_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"julia version (\d+)\.(\d+)\.(\d+)", result.stdout.strip())
    if result.returncode != 0 or match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


def _executable(environ: Mapping[str, str], xoptions: Mapping[str, Any]) -> tuple[str, tuple[int, int, int], str]:
    path = environ.get("PATH", "")
    for xkey, envkey in (("juliacall-exe", "PYTHON_JULIACALL_EXE"), ("juliapkg-exe", "PYTHON_JULIAPKG_EXE")):
        given = _option(environ, xoptions, xkey, envkey)
        if given is not None:
            value, source = given
            executable = shutil.which(value, path=path)  # (a path with a directory is checked as it is)
            if executable is None:
                raise DafJuliaUnavailableError(f"no Julia executable at: {source}\n(pydaf never downloads Julia; "
                                               "fix or unset it, or put a Julia on PATH)")
            return _checked(executable, source)
    for executable, source in _juliapkg_executables(environ, xoptions):
        if os.path.isfile(executable) and os.access(executable, os.X_OK):
            return _checked(executable, source)
    executable = shutil.which("julia", path=path)
    if executable is not None:
        return _checked(executable, "PATH")
    raise DafJuliaUnavailableError(
        "no Julia found: PYTHON_JULIACALL_EXE and PYTHON_JULIAPKG_EXE are not set, juliapkg has no Julia, and there "
        f"is no julia on PATH: {path}\n(pydaf never lets juliacall download Julia: install Julia "
        "(https://julialang.org/downloads) and put it on PATH, or set PYTHON_JULIACALL_EXE to it)")


def _checked(executable: str, source: str) -> tuple[str, tuple[int, int, int], str]:
    real = os.path.realpath(executable)
    version = _version(real)
    if version is None:
        raise DafJuliaUnavailableError(f"not a Julia executable: {real}\nfound by: {source}\n(`{real} --version` "
                                       "does not say \"julia version X.Y.Z\")")
    if version[:2] < MINIMUM_VERSION:
        raise DafJuliaUnavailableError(
            f"Julia {'.'.join(map(str, version))} is too old: {real}\nfound by: {source}\n(DataAxesFormats 0.3.0 "
            f"needs Julia {'.'.join(map(str, MINIMUM_VERSION))} or later)")
    return real, version, source


def _is_kit(directory: Path) -> bool:
    try:
        return "DataAxesFormats" in (directory / "Project.toml").read_text(encoding="utf-8")
    except OSError:
        return False


def _project(environ: Mapping[str, str], xoptions: Mapping[str, Any], version: tuple[int, int, int]) -> tuple[str,
                                                                                                            str]:
    given = _option(environ, xoptions, "juliacall-project", "PYTHON_JULIACALL_PROJECT")
    if given is None and environ.get("PYDAF_JULIA_PROJECT"):
        given = environ["PYDAF_JULIA_PROJECT"], f"PYDAF_JULIA_PROJECT={environ['PYDAF_JULIA_PROJECT']}"
    if given is None:
        if not _is_kit(KIT):
            raise DafJuliaUnavailableError(
                f"no Julia project for the bridge: the pydaf kit is not at: {KIT}\n(set PYDAF_JULIA_PROJECT to a "
                "Julia project holding DataAxesFormats, NamedArrays and PythonCall)")
        given = str(KIT), "the pydaf kit"
    project, source = os.path.abspath(given[0]), given[1]
    if not os.path.isfile(os.path.join(project, "Project.toml")):
        raise DafJuliaUnavailableError(f"not a Julia project (no Project.toml): {project}\nchosen by: {source}")
    if project_manifest(project, version) is None:
        raise DafJuliaUnavailableError(
            f"the Julia project is not instantiated (no Manifest.toml): {project}\nchosen by: {source}\n(run: julia "
            f"--project={project} -e 'using Pkg; Pkg.instantiate()')")
    return project, source


def find_julia(environ: Mapping[str, str] | None = None, *,
               xoptions: Mapping[str, Any] | None = None) -> JuliaSetup:
    """The Julia (and project) the bridge would use, found as the module documentation says without downloading or
    installing anything (it runs ``julia --version``, nothing else); :class:`DafJuliaUnavailableError` if there is
    none. ``environ`` and ``xoptions`` default to this process's (``os.environ``, ``sys._xoptions``).

    Example:
        >>> try:
        ...     setup = find_julia({"PATH": "/nonexistent", "PYTHON_JULIAPKG_PROJECT": "/nonexistent"}, xoptions={})
        ... except DafJuliaUnavailableError as error:
        ...     print(str(error).splitlines()[0].split(":")[0])
        no Julia found
    """
    environ = os.environ if environ is None else environ
    xoptions = sys._xoptions if xoptions is None else xoptions
    executable, version, source = _executable(environ, xoptions)
    project, project_source = _project(environ, xoptions, version)
    setup = JuliaSetup(executable, version, source, project, project_source)
    check_juliacall_pairing(setup)
    return setup


def _installed_juliacall() -> str | None:
    """The installed juliacall's version, read from its metadata (importing juliacall would start Julia)."""
    try:
        return importlib.metadata.version("juliacall")
    except importlib.metadata.PackageNotFoundError:
        return None


def pythoncall_version(manifest: str) -> str | None:
    """The version of PythonCall a Julia manifest holds (``None`` if none); :class:`DafJuliaUnavailableError` if the
    manifest can't be read.

    Example:
        >>> import os, tempfile
        >>> manifest = os.path.join(tempfile.mkdtemp(), "Manifest.toml")
        >>> with open(manifest, "w") as file:
        ...     _ = file.write('manifest_format = "2.0"\\n[[deps.PythonCall]]\\n'
        ...                    'uuid = "6099a3de-0909-46bc-b1f4-468b9a2dfc0d"\\nversion = "0.9.37"\\n')
        >>> pythoncall_version(manifest)
        '0.9.37'
    """
    try:
        with open(manifest, "rb") as file:
            content = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise DafJuliaUnavailableError(f"can't read the Julia project's manifest: {manifest}\n({error})") from None
    # Manifest format 2.0 lists packages under `deps`; format 1.0 at the top level.
    packages = content.get("deps", {}) if "manifest_format" in content else content
    entries = packages.get("PythonCall", []) if isinstance(packages, dict) else []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("uuid") == PYTHONCALL_UUID and isinstance(entry.get("version"), str):
            return entry["version"]
    return None


def check_juliacall_pairing(setup: JuliaSetup, juliacall_version: str | None = None) -> None:
    """Check that the installed juliacall (or ``juliacall_version``) and the PythonCall in ``setup.project``'s manifest
    are the same version, as they must be (PythonCall asserts it when juliacall starts Julia): else
    :class:`DafJuliaVersionError` naming both and how to install the matching pair. Without juliacall there is nothing
    to check. Reads files only.

    Example:
        >>> import os, tempfile
        >>> project = tempfile.mkdtemp()
        >>> with open(os.path.join(project, "Manifest.toml"), "w") as file:
        ...     _ = file.write('manifest_format = "2.0"\\n[[deps.PythonCall]]\\n'
        ...                    'uuid = "6099a3de-0909-46bc-b1f4-468b9a2dfc0d"\\nversion = "0.9.37"\\n')
        >>> setup = JuliaSetup("/opt/julia/bin/julia", (1, 12, 1), "PATH", project, "PYDAF_JULIA_PROJECT")
        >>> check_juliacall_pairing(setup, "0.9.37")
        >>> try:
        ...     check_juliacall_pairing(setup, "0.9.30")
        ... except DafJuliaVersionError as error:
        ...     print(str(error).splitlines()[0])
        juliacall 0.9.30 can't run with PythonCall 0.9.37 (juliacall X.Y.Z needs PythonCall X.Y.Z)
    """
    juliacall_version = _installed_juliacall() if juliacall_version is None else juliacall_version
    if juliacall_version is None:
        return
    manifest = project_manifest(setup.project, setup.version)
    if manifest is None:  # (find_julia checked it; a caller's own setup may not be instantiated)
        raise DafJuliaUnavailableError(f"the Julia project is not instantiated (no Manifest.toml): {setup.project}")
    pythoncall = pythoncall_version(manifest)
    install = (f"julia --project={setup.project} -e 'using Pkg; Pkg.compat(\"PythonCall\", \"={juliacall_version}\"); "
               f"Pkg.add(name=\"PythonCall\", version=\"{juliacall_version}\")'")
    if pythoncall is None:
        raise DafJuliaVersionError(
            f"the Julia project has no PythonCall, which juliacall {juliacall_version} needs (at version "
            f"{juliacall_version}): {manifest}\nchosen by: {setup.project_source}\n(add it: {install})")
    if pythoncall != juliacall_version:
        raise DafJuliaVersionError(
            f"juliacall {juliacall_version} can't run with PythonCall {pythoncall} (juliacall X.Y.Z needs PythonCall "
            f"X.Y.Z)\nPythonCall {pythoncall}: in {manifest}\nchosen by: {setup.project_source}\n(install the matching "
            f"pair: pip install 'juliacall=={pythoncall}', or: {install})")


def juliacall_environment(setup: JuliaSetup, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables :func:`start_julia` sets before importing juliacall, so that it starts
    ``setup.executable`` in ``setup.project`` and neither juliacall nor juliapkg downloads or installs anything.

    Example:
        >>> setup = JuliaSetup("/opt/julia/bin/julia", (1, 11, 2), "PATH", "/work/julia", "the pydaf kit")
        >>> environment = juliacall_environment(setup, {})
        >>> environment["PYTHON_JULIACALL_EXE"], environment["PYTHON_JULIAPKG_OFFLINE"]
        ('/opt/julia/bin/julia', 'yes')
    """
    environ = os.environ if environ is None else environ
    return {
        "PYTHON_JULIACALL_EXE": setup.executable,
        "PYTHON_JULIACALL_PROJECT": setup.project,
        "PYTHON_JULIAPKG_EXE": setup.executable,
        "PYTHON_JULIAPKG_PROJECT": setup.project,
        "PYTHON_JULIAPKG_OFFLINE": "yes",
        # Julia's signal handling is needed to call multi-threaded Julia code from Python without crashing
        # (PythonCall's FAQ); a user's own choice stands.
        "PYTHON_JULIACALL_HANDLE_SIGNALS": environ.get("PYTHON_JULIACALL_HANDLE_SIGNALS", "yes"),
    }


def julia_unavailable_reason() -> str | None:
    """Why the bridge can't start here (``None`` if it can, or already did): cheap, never starts Julia.

    Example:
        >>> reason = julia_unavailable_reason()
        >>> reason is None or isinstance(reason, str)
        True
    """
    if _started is not None or "juliacall" in sys.modules:
        return None
    try:
        find_julia()
        _require_juliacall()
    except DafJuliaUnavailableError as error:
        return str(error)
    return None


def _require_juliacall() -> None:
    if importlib.util.find_spec("juliacall") is None:
        raise DafJuliaUnavailableError("juliacall is not installed\n(pip install 'pydaf[julia]')")


_started: Any = None
_start_lock = threading.Lock()


def start_julia() -> Any:
    """Start Julia (once per process) and load pydaf's bridge into it: the Julia module holding ``bridge.jl``'s
    functions. :class:`DafJuliaUnavailableError` if no Julia can be started (see the module documentation); Julia
    is then never started by a later call either, until the problem is fixed.

    Example:
        >>> callable(start_julia)
        True
    """
    global _started
    with _start_lock:
        if _started is None:
            if "juliacall" not in sys.modules:
                environment = juliacall_environment(find_julia())
                _require_juliacall()
                os.environ.update(environment)
            try:
                juliacall = importlib.import_module("juliacall")
            except Exception as error:  # juliacall raises plain exceptions when Julia fails to start
                raise DafJuliaUnavailableError(f"juliacall could not start Julia: {error}") from error
            module = juliacall.newmodule("PydafBridge")
            try:
                juliacall.Base.include(module, str(BRIDGE_SOURCE))
            except juliacall.JuliaError as error:
                message = juliacall.Base.sprint(juliacall.Base.showerror, error.exception)
                raise DafJuliaUnavailableError(
                    f"Julia could not load pydaf's bridge ({BRIDGE_SOURCE}):\n{message}\n(the Julia project must hold "
                    "DataAxesFormats, NamedArrays and PythonCall: see julia/README.md)") from None
            _started = module
        return _started
