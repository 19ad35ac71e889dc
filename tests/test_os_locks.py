"""pydaf._os.locks with real processes: shared and exclusive holds between processes, the one wait policy, the holder
named, atomic downgrade, and forked children that inherit neither holds nor registry entries."""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pydaf._os import locks
from pydaf.errors import DafLockedError

REPOSITORY = Path(__file__).resolve().parent.parent

# Holds a lock (exclusive or shared) on a path, says so, and releases it when told (or after some seconds).
HOLDER = """
    import sys, time
    from pydaf._os import locks
    hold = locks.hold_lock(sys.argv[1], exclusive=sys.argv[2] == "exclusive", what="test file")
    print("held", flush=True)
    if float(sys.argv[3]):
        time.sleep(float(sys.argv[3]))
    else:
        sys.stdin.readline()
    hold.release()
    print("released", flush=True)
    sys.stdin.readline()
"""


def holder(path: Path, kind: str, seconds: float = 0) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), str(path), kind, str(seconds)],
                             env={**os.environ, "PYTHONPATH": str(REPOSITORY)}, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line == "held\n", line + (child.stderr.read() if child.stderr else "")
    return child


def stop(child: subprocess.Popen) -> None:
    child.kill()
    child.wait()


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "target.bin"
    path.write_bytes(b"data")
    return path


def test_the_wait_policy_is_two_seconds():
    assert locks.LOCK_WAIT_SECONDS == 2.0


def test_shared_holds_of_two_processes_coexist(target):
    child = holder(target, "shared")
    try:
        hold = locks.hold_lock(str(target), exclusive=False, what="test file", wait=0)
        assert hold.lock.mode == "shared"
        hold.release()
    finally:
        stop(child)


def test_an_exclusive_hold_keeps_other_processes_out_for_the_wait_and_names_the_holder(target):
    child = holder(target, "exclusive")
    try:
        for exclusive, message in ((False, "can't read the test file"), (True, "can't write the test file")):
            start = time.monotonic()
            with pytest.raises(DafLockedError) as error:
                locks.hold_lock(str(target), exclusive=exclusive, what="test file")
            waited = time.monotonic() - start
            assert 1.9 <= waited < 10, waited  # the default wait: LOCK_WAIT_SECONDS
            assert str(error.value).startswith(f"{message}: {target}\n")
            assert f"(pid: {child.pid})" in str(error.value)
    finally:
        stop(child)
    assert locks.hold_lock(str(target), exclusive=True, what="test file", wait=0).first  # a killed holder's lock goes


def test_a_shared_hold_of_another_process_keeps_writers_out_naming_it(target):
    child = holder(target, "shared")
    try:
        with pytest.raises(DafLockedError, match=rf"while another process has it open \(pid: {child.pid}\)"):
            locks.hold_lock(str(target), exclusive=True, what="test file", wait=0.1)
    finally:
        stop(child)


def test_a_hold_released_within_the_wait_is_taken(target):
    child = holder(target, "exclusive", seconds=0.5)
    try:
        start = time.monotonic()
        hold = locks.hold_lock(str(target), exclusive=True, what="test file")
        assert 0.3 < time.monotonic() - start < 2.0
        assert hold.first and hold.lock.mode == "exclusive"
        hold.release()
    finally:
        stop(child)


def test_holds_in_one_process_are_counted_and_downgrade_atomically(target):
    reader = locks.hold_lock(str(target), exclusive=False, what="test file")
    writer = locks.hold_lock(str(target), exclusive=True, what="test file")
    second = locks.hold_lock(str(target), exclusive=True, what="test file")
    assert writer.first and not second.first and reader.lock is writer.lock is second.lock
    writer.release()
    assert reader.lock.mode == "exclusive"  # (one exclusive hold is left)
    second.release()
    assert reader.lock.mode == "shared"
    child = holder(target, "shared")  # another reader gets in at once
    try:
        with pytest.raises(DafLockedError, match=rf"\(pid: {child.pid}\)"):
            locks.hold_lock(str(target), exclusive=True, what="test file", wait=0)  # (upgrade: still counted)
        assert reader.lock.mode == "shared"
    finally:
        stop(child)
    reader.release()
    assert reader.lock.closed


def test_a_hold_is_released_when_it_is_garbage(target):
    hold = locks.hold_lock(str(target), exclusive=True, what="test file")
    lock = hold.lock
    del hold
    gc.collect()
    assert lock.closed
    child = holder(target, "exclusive")
    stop(child)


def test_a_directory_lock_is_exclusive_and_names_its_holder(tmp_path):
    child = holder(tmp_path, "exclusive")
    try:
        with pytest.raises(DafLockedError, match=rf"while another process has it open \(pid: {child.pid}\)"):
            locks.hold_lock(str(tmp_path), exclusive=True, what="test directory", wait=0.2)
    finally:
        stop(child)
    hold = locks.hold_lock(str(tmp_path), exclusive=True, what="test directory", wait=0)
    hold.release()
    (tmp_path / "other").mkdir()
    with pytest.raises(ValueError, match="exclusive only"):  # (a directory can't hold a shared lock atomically)
        locks.hold_lock(str(tmp_path / "other"), exclusive=False, what="test directory")


def test_a_forked_child_inherits_no_hold(target):
    hold = locks.hold_lock(str(target), exclusive=True, what="test file")
    registry: locks.ProcessRegistry[str, locks.LockHold] = locks.ProcessRegistry("test holds")
    registry.add("hold", hold)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()

    def child() -> None:
        inherited = hold.lock
        queue.put({
            "registry": registry.get("hold") is None,  # the fork handler emptied it
            "lock": locks._locks.get(inherited.key) is None,
            "current": hold.is_current,
        })
        hold.release()  # (a no-op: the lock is the parent's)
        try:
            locks.hold_lock(str(target), exclusive=False, what="test file", wait=0.2)
            queue.put("not refused")
        except DafLockedError as error:
            queue.put(str(error))

    process = context.Process(target=child)
    process.start()
    seen, refused = queue.get(timeout=60), queue.get(timeout=60)
    process.join(60)
    assert seen == {"registry": True, "lock": True, "current": False}
    assert f"while another process is writing it (pid: {os.getpid()})" in refused  # the parent holds it, still
    assert hold.is_current and hold.lock.mode == "exclusive" and registry.get("hold") is hold
    hold.release()
    assert hold.lock.closed


def test_the_registry_forgets_in_a_forked_child_and_reports_what_it_forgot(target):
    forgotten: list[list[object]] = []

    class Value:
        pass

    value = Value()
    registry: locks.ProcessRegistry[int, Value] = locks.ProcessRegistry("values", after_fork=forgotten.append)
    registry.add(1, value)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once (no test machinery)
        try:
            os.write(write, f"{registry.get(1) is None} {len(forgotten) == 1 and forgotten[0] == [value]}".encode())
        finally:
            os._exit(0)
    os.close(write)
    report = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert report == "True True"
    assert registry.get(1) is value and forgotten == []  # (the parent's registry is untouched)
    del value
    gc.collect()
    assert registry.get(1) is None  # weak values


def test_the_hdf5_flock_names_the_program_holding_it(target):
    code = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\nsys.stdin.readline()")
    child = subprocess.Popen([sys.executable, "-c", code, str(target)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        fd = os.open(target, os.O_RDWR)
        try:
            with pytest.raises(DafLockedError, match=rf"is locked by another program \(pid: {child.pid}\)"):
                locks.hdf5_flock(fd, str(target))
        finally:
            os.close(fd)
    finally:
        stop(child)


class _Interrupt(BaseException):
    """Stands for a Ctrl-C that lands while a lock is being made."""


def test_an_interrupt_while_making_a_lock_closes_its_descriptor_once(tmp_path, monkeypatch):
    """A Ctrl-C that landed after the lock's finalizer was armed closed the descriptor twice (the finalizer, then
    file_lock's cleanup): an OSError (EBADF) replaced the interrupt, and a second close could hit a descriptor
    another thread had just opened."""
    path = tmp_path / "file"
    path.write_bytes(b"")
    real_finalize = locks.weakref.finalize

    def finalize_then_interrupt(*arguments, **options):
        real_finalize(*arguments, **options)
        raise _Interrupt()

    monkeypatch.setattr(locks.weakref, "finalize", finalize_then_interrupt)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(_Interrupt) as caught:  # (its traceback keeps the half-made lock alive, as a handler would)
        locks.file_lock(str(path), what="file")
    other = os.open(os.devnull, os.O_RDONLY)  # (takes the lowest free number: the lock's, had it been closed)
    try:
        del caught
        gc.collect()  # (the half-made lock's finalizer runs)
        os.fstat(other)  # (the old code's finalizer closed this descriptor, which had the lock's number)
    finally:
        os.close(other)
    assert len(os.listdir("/proc/self/fd")) == before
