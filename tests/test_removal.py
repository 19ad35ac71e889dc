"""pydaf._os.removal: the names go at once, the space once the background thread closed what it held."""

from __future__ import annotations

import os

from pydaf._os.removal import DEFERRED_MIN_BYTES, remove_freeing_later, wait_for_freeing


def _deleted_held(root: str) -> list[str]:
    """The files under ``root`` this process still holds open though they are removed."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(root) and target.endswith(" (deleted)"):
            found.append(target)
    return found


def test_a_tree_is_gone_at_once_and_freed_later_without_following_links(tmp_path):
    root = tmp_path / "root"
    (root / "old" / "inner").mkdir(parents=True)
    (root / "old" / "inner" / "big.data").write_bytes(bytes(DEFERRED_MIN_BYTES * 2))
    (root / "old" / "small.json").write_text("{}")
    outside = tmp_path / "outside.data"
    outside.write_bytes(b"x" * (DEFERRED_MIN_BYTES * 2))
    (root / "old" / "link").symlink_to(outside)
    (root / "old" / "linked.data").write_bytes(bytes(DEFERRED_MIN_BYTES))
    os.link(root / "old" / "linked.data", tmp_path / "other-name.data")  # (2 links: removing one frees nothing)
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        remove_freeing_later(folder, "old")
        assert os.listdir(root) == []
        wait_for_freeing()
        assert _deleted_held(str(tmp_path)) == []
    finally:
        os.close(folder)
    assert outside.read_bytes() == b"x" * (DEFERRED_MIN_BYTES * 2)
    assert (tmp_path / "other-name.data").stat().st_size == DEFERRED_MIN_BYTES
    remove_freeing_later(None, str(root / "nothing-there"))  # (no error)


def test_a_single_file_by_path(tmp_path):
    path = tmp_path / "backup.h5df"
    path.write_bytes(bytes(DEFERRED_MIN_BYTES * 3))
    remove_freeing_later(None, str(path))
    assert not path.exists()
    wait_for_freeing()
    assert _deleted_held(str(tmp_path)) == []


def test_a_child_forked_while_files_are_held_does_not_hold_them(tmp_path):
    from pydaf._os import removal

    path = tmp_path / "old.data"
    path.write_bytes(bytes(DEFERRED_MIN_BYTES))
    held = removal._hold_files(None, str(path), os.stat(path))  # (held, as during a removal, before the thread)
    assert len(held) == 1
    os.unlink(path)
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # (the child reports what it still holds, then leaves at once)
        os.write(writing, repr(_deleted_held(str(tmp_path))).encode())
        os._exit(0)
    os.close(writing)
    reported = os.read(reading, 1 << 16).decode()
    os.close(reading)
    os.waitpid(child, 0)
    assert reported == "[]"
    assert len(_deleted_held(str(tmp_path))) == 1  # (the parent still holds it, until its thread closes it)
    removal._close(held)
    assert _deleted_held(str(tmp_path)) == []
