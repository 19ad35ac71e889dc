"""Kill windows of the H5df undo journal found by the conversion kill campaign (issue 25, class 3 and the 100 kills).

A killed copy into an existing H5df leaves the file's undo journal pending; replacing the file then (``pydaf convert
... --overwrite``, as the incomplete-copy message advises) leaves that journal beside a new file, and the next writable
open sets it aside under a name made of the old file's device and inode numbers. A file system reuses freed inode
numbers (ext4 did, every few rounds, in the campaign): a second journal claiming the same number then met the first
one's set-aside name, and every writable open of the data set was refused ("can't be set aside: ... exists") until a
person deleted a file. Writers are real child processes killed with SIGKILL.
"""

from __future__ import annotations

import os
import shutil
import signal
import warnings
from pathlib import Path

import pytest

import pydaf
from tests.test_h5df_journal_trust import journal_of, killed_writer

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL") or not hasattr(os, "setxattr"),
                                reason="needs SIGKILL and extended attributes (Linux)")


def replace_with_fresh(path: Path, title: str) -> None:
    """Replace the data set at ``path`` by a new file written aside and renamed over it (as a conversion does)."""
    fresh = path.parent / f"fresh-{title}.h5df"
    pydaf.H5df(fresh, "w").add_axis("cell", ["a", "b"]).set_scalar("title", title)
    os.rename(fresh, path)


def test_a_second_journal_of_a_reused_inode_number_does_not_block_writable_opens(tmp_path):
    path = tmp_path / "data.h5df"
    killed_writer(path)  # (a writer killed inside its flush: its journal names the file's inode)
    journal = journal_of(path)
    old_inode = os.stat(path).st_ino
    replace_with_fresh(path, "new")
    # What an earlier round left: a journal of a former file with the same inode number, set aside by a writable open.
    aside = Path(f"{journal}.{os.stat(path).st_dev}-{old_inode}")
    shutil.copyfile(journal, aside)
    earlier = aside.read_bytes()
    newer = journal.read_bytes()
    with pytest.warns(UserWarning, match="an older journal set aside for the same inode number"):
        daf = pydaf.H5df(path, "r+")
    assert daf.get_scalar("title") == "new"
    daf.set_scalar("after", 1)  # (and it writes)
    del daf
    assert pydaf.H5df(path, "r").get_scalar("after") == 1
    assert not journal.exists()
    assert aside.read_bytes() == newer  # (the newer journal takes the name its file would find it by)
    assert Path(f"{aside}.2").read_bytes() == earlier  # (the older one is kept, never deleted)


def test_kills_and_replacements_in_turn_never_block_the_next_writable_open(tmp_path):
    """Rounds of: a writer killed inside its flush, the file replaced by a new one, a writable open of that one (which
    sets the killed writer's journal aside). Freed inode numbers come back (on ext4, within a few rounds): every
    writable open still works and reads the new file, never the old file's journal applied to it."""
    path = tmp_path / "data.h5df"
    inodes: list[int] = []
    for round_number in range(8):
        if path.exists():
            os.unlink(path)  # (frees the inode number of the last round's file)
        killed_writer(path)
        inodes.append(os.stat(path).st_ino)
        replace_with_fresh(path, f"new {round_number}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the killed writer's journal, of a replaced file, is set aside)
            daf = pydaf.H5df(path, "r+")
        assert daf.get_scalar("title") == f"new {round_number}" and daf.axis_vector("cell").tolist() == ["a", "b"]
        daf.set_scalar("round", round_number)
        del daf
        assert pydaf.H5df(path, "r").get_scalar("round") == round_number
    asides = [name for name in os.listdir(tmp_path) if ".pydaf-undo." in name]
    assert len(asides) == 8, asides  # (one per killed writer whose file was replaced: none applied, none lost)
    assert not journal_of(path).exists()
