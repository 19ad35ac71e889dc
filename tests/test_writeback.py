"""pydaf._os.writeback: the write-back of exactly the finished parts of a file is started, from any thread."""

from __future__ import annotations

import os
import threading

from pydaf._os import writeback


def test_the_queued_ranges_and_only_they_are_written_back(tmp_path, monkeypatch):
    started: list[tuple[int, int]] = []
    real = writeback.start_writeback

    def recorded(fd: int, offset: int = 0, nbytes: int = 0) -> None:
        started.append((offset, nbytes))
        real(fd, offset, nbytes)  # (the real call: only what it was asked is recorded)

    monkeypatch.setattr(writeback, "start_writeback", recorded)
    path = tmp_path / "file.data"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, b"x" * (4 * 100 * 4096), 0)
        thread = writeback.WritebackThread(fd)

        def fill(part: int) -> None:
            for block in range(100):
                thread.queue((part * 100 + block) * 4096, 4096)
            thread.queue(part * 4096, 0)  # (nothing to write back: not queued)

        fillers = [threading.Thread(target=fill, args=(part,)) for part in range(4)]
        for filler in fillers:
            filler.start()
        for filler in fillers:
            filler.join()
        thread.stop()
        assert sorted(started) == [(block * 4096, 4096) for block in range(400)]
        assert not thread._thread.is_alive()
        thread.queue(0, 4096)  # (after the stop: ignored, never blocks)
        thread.stop()
        assert len(started) == 400
        os.fsync(fd)
        assert path.read_bytes() == b"x" * (4 * 100 * 4096)
    finally:
        os.close(fd)


def test_a_failed_start_is_left_for_the_fsync(tmp_path):
    fd = os.open(tmp_path / "file.data", os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    writeback.start_writeback(fd, 0, 4096)  # (a closed descriptor: best effort, nothing raised)
