"""Append-only ZIP archives of STORED, 8-byte-aligned entries: the container framing that ZarrDaf's
``.daf.zarr.zip`` / ``.dafs.zarr.zip#/group`` archives and ZipDaf's ``.daf.zip`` archives share, written byte for
byte as Julia's ``MmapZipStore`` writes it, with every entry's data mappable zero-copy. A property's entries are
appended as one batch (:class:`ZipAppend`) and the central directory is rewritten last, so a killed writer loses at
most the property it was writing; one :class:`ZipStore` per archive per process (:func:`acquire_zip_store`), one
writing process at a time.

Design: docs/design/zip.md; the framing: docs/spec/FORMATS.md §3.11, §5.7."""

from __future__ import annotations

import os
import secrets
import struct
import threading
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._os.files import open_regular_file
from ..._os.locks import LockHold, Owner, ProcessRegistry, close_descriptor, hold_lock
from ..._os.maps import FileKey, detach_region, file_key, map_region
from ..._os.write_errors import storage_error
from ...errors import DafAppendOnlyError as DafAppendOnlyError  # (defined in errors; importable here as before)
from ...errors import DafError, DafFormatError, DafModeError, DafNameError, DafStorageError

#: Entry data starts at a file offset that is a multiple of this (Julia's ``DAF_DATA_OFFSET_ALIGNMENT``).
ALIGNMENT = 8

STORED = 0
DEFLATED = 8

_LFH = struct.Struct("<IHHHHHIIIHH")  # local file header, 30 bytes
_CDH = struct.Struct("<IHHHHHHIIIHHHHHII")  # central directory record, 46 bytes
_EOCD = struct.Struct("<IHHHHIIH")  # legacy end of central directory, 22 bytes
_EOCD64 = struct.Struct("<IQHHIIQQQQ")  # ZIP64 end of central directory, 56 bytes
_LOCATOR = struct.Struct("<IIQI")  # ZIP64 end of central directory locator, 20 bytes
_LFH_SIGNATURE, _CDH_SIGNATURE = 0x04034B50, 0x02014B50
_EOCD_SIGNATURE, _EOCD64_SIGNATURE, _LOCATOR_SIGNATURE = 0x06054B50, 0x06064B50, 0x07064B50
_TAIL_SIZE = _EOCD64.size + _LOCATOR.size + _EOCD.size  # 98
_ZIP64_EXTRA_ID, _PADDING_EXTRA_ID = 0x0001, 0xDAF1
_VERSION_NEEDED, _VERSION_MADE_BY = 45, 0x031E
_UTF8_FLAG, _DOS_DATE = 0x0800, 0x0021
_EXTERNAL_ATTRIBUTES = 0o100644 << 16
_SENTINEL32, _SENTINEL16 = 0xFFFFFFFF, 0xFFFF
_MAX_COMMENT = 0xFFFF
_MAX_DEFLATE_RATIO = 1100  # zlib's best is ~1032:1; a larger declared size is a lie (a zip bomb)

#: The most bytes (UTF-8) an entry's name can have: its length is a 16-bit field of the ZIP headers.
MAX_ENTRY_NAME_BYTES = 0xFFFF


def check_entry_name(name: str, *, what: str, where: str) -> None:
    """Refuse, with a :class:`~pydaf.DafNameError` naming ``what`` (the property) and the limit, an entry name a ZIP
    archive can't hold: longer than :data:`MAX_ENTRY_NAME_BYTES` bytes of UTF-8 (a group's path included), or not
    encodable as UTF-8. Checked before anything is written.

    Example:
        >>> check_entry_name("scalars/x.json", what="the scalar: x", where="x.daf.zip")
        >>> try:
        ...     check_entry_name("scalars/" + "x" * 70000 + ".json", what="the scalar: xxx...", where="x.daf.zip")
        ... except DafNameError as error:
        ...     print(str(error).splitlines()[0])
        too long a name for the scalar: xxx...
    """
    if len(what) > 300:
        what = f"{what[:200]}...{what[-80:]} ({len(what)} characters)"
    try:
        length = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise DafNameError(f"a name that is not valid UTF-8 for {what}\nin the ZIP archive: {where}") from None
    if length > MAX_ENTRY_NAME_BYTES:
        raise DafNameError(f"too long a name for {what}\nin the ZIP archive: {where}\n(its ZIP entry name would have "
                           f"{length} bytes of UTF-8, group path included; a ZIP entry name holds at most "
                           f"{MAX_ENTRY_NAME_BYTES}: use a shorter name)")


@dataclass(frozen=True)
class ZipEntry:
    """One entry of the central directory.

    Attributes:
        name: the entry's name (a ``/``-separated relative path).
        header_offset: the file offset of its local file header.
        size: its uncompressed size.
        compressed_size: its size in the file.
        crc32: the CRC32 of its uncompressed bytes.
        method: its compression method (``0`` STORED, ``8`` DEFLATE, ...).
        flags: its general-purpose flags.
        is_link: whether its external attributes mark a symbolic link.
    """

    name: str
    header_offset: int
    size: int
    compressed_size: int
    crc32: int
    method: int
    flags: int = _UTF8_FLAG
    is_link: bool = False


def _local_header(name: bytes, offset: int, size: int, crc32: int) -> bytes:
    """A local file header at ``offset`` for STORED data of ``size`` bytes, padded so the data is aligned."""
    fixed = _LFH.size + len(name) + 20
    padding = -(offset + fixed) % ALIGNMENT
    if padding:
        padding += ALIGNMENT if padding < 4 else 0  # an extra field needs 4 bytes of header
    extra = struct.pack("<HHQQ", _ZIP64_EXTRA_ID, 16, size, size)
    if padding:
        extra += struct.pack("<HH", _PADDING_EXTRA_ID, padding - 4) + bytes(padding - 4)
    header = _LFH.pack(_LFH_SIGNATURE, _VERSION_NEEDED, _UTF8_FLAG, STORED, 0, _DOS_DATE, crc32, _SENTINEL32,
                       _SENTINEL32, len(name), len(extra))
    return header + name + extra


def _central_record(entry: ZipEntry) -> bytes:
    """The central directory record of an entry this module wrote (ZIP64 sizes and offset)."""
    name = entry.name.encode("utf-8")
    extra = struct.pack("<HHQQQ", _ZIP64_EXTRA_ID, 24, entry.size, entry.compressed_size, entry.header_offset)
    return _CDH.pack(_CDH_SIGNATURE, _VERSION_MADE_BY, _VERSION_NEEDED, _UTF8_FLAG, entry.method, 0, _DOS_DATE,
                     entry.crc32, _SENTINEL32, _SENTINEL32, len(name), len(extra), 0, 0, 0, _EXTERNAL_ATTRIBUTES,
                     _SENTINEL32) + name + extra


def _tail(count: int, cd_offset: int, cd_size: int) -> bytes:
    """The 98-byte end of an archive whose central directory of ``count`` records is at ``cd_offset``."""
    record_offset = cd_offset + cd_size
    return (_EOCD64.pack(_EOCD64_SIGNATURE, _EOCD64.size - 12, _VERSION_MADE_BY, _VERSION_NEEDED, 0, 0, count, count,
                         cd_size, cd_offset)
            + _LOCATOR.pack(_LOCATOR_SIGNATURE, 0, record_offset, 1)
            + _EOCD.pack(_EOCD_SIGNATURE, 0, 0, _SENTINEL16, _SENTINEL16, _SENTINEL32, _SENTINEL32, 0))


EMPTY_ARCHIVE = _tail(0, 0, 0)
"""The bytes of an archive without entries (Julia's empty ``MmapZipStore``)."""


class _Corrupt(DafFormatError):
    """The end records or the central directory don't parse (a killed append, or not an archive at all). Callers
    catch it to decide (recover, refuse) and say which archive; a :class:`DafFormatError`, so one they miss is still
    typed."""


def _pread(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    while len(data) < size:
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            raise _Corrupt(f"{size} bytes at offset {offset} end past the end of the file")
        data += more
    return data


def _pwrite(fd: int, data: Any, offset: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _zip64_values(extra: bytes, wanted: list[bool]) -> list[int | None]:
    """The ZIP64 extra field's values for the fields marked as wanted (those whose 32-bit value was a sentinel)."""
    position = 0
    while position + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, position)
        body = extra[position + 4:position + 4 + length]
        if len(body) < length:
            raise _Corrupt("an extra field runs past its record")
        if kind == _ZIP64_EXTRA_ID:
            values: list[int | None] = []
            cursor = 0
            for want in wanted:
                if want:
                    if cursor + 8 > len(body):
                        raise _Corrupt("a ZIP64 extra field is too short")
                    values.append(struct.unpack_from("<Q", body, cursor)[0])
                    cursor += 8
                else:
                    values.append(None)
            return values
        position += 4 + length
    if any(wanted):
        raise _Corrupt("a record has ZIP64 sentinels but no ZIP64 extra field")
    return [None] * len(wanted)


def _decode_name(raw: bytes, flags: int) -> str:
    try:
        return raw.decode("utf-8" if flags & _UTF8_FLAG else "cp437")
    except UnicodeDecodeError as error:
        raise _Corrupt(f"an entry name is not valid UTF-8: {raw!r}") from error


def _read_directory(fd: int, size: int) -> tuple[list[ZipEntry], list[bytes], int]:
    """The entries, raw central directory records and central directory offset of a complete archive; raises
    :class:`_Corrupt` if its end records or central directory don't parse."""
    if size < _EOCD.size:
        raise _Corrupt("the file is too short to be a ZIP archive")
    window = _pread(fd, min(size, _EOCD.size + _MAX_COMMENT), size - min(size, _EOCD.size + _MAX_COMMENT))
    signature = struct.pack("<I", _EOCD_SIGNATURE)
    position = window.rfind(signature, 0, len(window) - _EOCD.size + 4)
    while position >= 0 and position + _EOCD.size + struct.unpack_from("<H", window, position + 20)[0] != len(window):
        position = window.rfind(signature, 0, position)
    if position < 0:
        raise _Corrupt("no end of central directory record")
    eocd_offset = size - len(window) + position
    _, disk, cd_disk, _, count, cd_size, cd_offset, _ = _EOCD.unpack_from(window, position)
    end_of_directory = eocd_offset
    if eocd_offset >= _LOCATOR.size:
        locator = _pread(fd, _LOCATOR.size, eocd_offset - _LOCATOR.size)
        signature, _, record_offset, disks = _LOCATOR.unpack(locator)
        if signature == _LOCATOR_SIGNATURE:
            if disks > 1 or record_offset + _EOCD64.size > eocd_offset - _LOCATOR.size:
                raise _Corrupt("a multi-disk archive or a misplaced ZIP64 end record")
            record = _pread(fd, _EOCD64.size, record_offset)
            signature, _, _, _, disk, cd_disk, _, count, cd_size, cd_offset = _EOCD64.unpack(record)
            if signature != _EOCD64_SIGNATURE:
                raise _Corrupt("no ZIP64 end of central directory record where its locator points")
            end_of_directory = record_offset
    if disk or cd_disk:
        raise _Corrupt("a multi-disk archive")
    if cd_offset + cd_size != end_of_directory or count > cd_size // _CDH.size:
        raise _Corrupt("the central directory does not end where the end records begin")
    directory = _pread(fd, cd_size, cd_offset)
    entries: list[ZipEntry] = []
    records: list[bytes] = []
    position = 0
    for _ in range(count):
        if position + _CDH.size > len(directory):
            raise _Corrupt("the central directory is shorter than its record count")
        (signature, _, _, flags, method, _, _, crc32, compressed_size, size32, name_length, extra_length,
         comment_length, _, _, external, header_offset) = _CDH.unpack_from(directory, position)
        if signature != _CDH_SIGNATURE:
            raise _Corrupt("a central directory record has a bad signature")
        end = position + _CDH.size + name_length + extra_length + comment_length
        if end > len(directory):
            raise _Corrupt("a central directory record runs past the directory")
        name = _decode_name(directory[position + _CDH.size:position + _CDH.size + name_length], flags)
        extra = directory[position + _CDH.size + name_length:position + _CDH.size + name_length + extra_length]
        wide = _zip64_values(extra, [size32 == _SENTINEL32, compressed_size == _SENTINEL32,
                                     header_offset == _SENTINEL32])
        entry = ZipEntry(name, wide[2] if wide[2] is not None else header_offset,
                         wide[0] if wide[0] is not None else size32,
                         wide[1] if wide[1] is not None else compressed_size, crc32, method, flags,
                         (external >> 16) & 0o170000 == 0o120000)
        entries.append(entry)
        records.append(directory[position:end])
        position = end
    if position != len(directory):
        raise _Corrupt("the central directory has bytes past its last record")
    return entries, records, cd_offset


def _declared_directory_offset(fd: int, size: int) -> int | None:
    """Where the end records at the very end of the file (as this module writes them: no comment) say the central
    directory begins, or ``None`` if they don't parse there."""
    if size < _TAIL_SIZE:
        return None
    tail = _pread(fd, _TAIL_SIZE, size - _TAIL_SIZE)
    record = _EOCD64.unpack_from(tail, 0)
    locator = _LOCATOR.unpack_from(tail, _EOCD64.size)
    eocd = _EOCD.unpack_from(tail, _EOCD64.size + _LOCATOR.size)
    if record[0] != _EOCD64_SIGNATURE or locator[0] != _LOCATOR_SIGNATURE or eocd[0] != _EOCD_SIGNATURE or eocd[7]:
        return None
    cd_size, cd_offset = record[8], record[9]
    if locator[2] != size - _TAIL_SIZE or cd_offset + cd_size != size - _TAIL_SIZE:
        return None
    return cd_offset


@dataclass(frozen=True)
class _Walked:
    entry: ZipEntry
    data_offset: int


def _walk(fd: int, size: int) -> list[_Walked]:
    """The entries found by following the local file headers from the start of the file, up to the first that is
    missing, incomplete or unparsable (what a killed append leaves)."""
    found: list[_Walked] = []
    offset = 0
    while offset + _LFH.size <= size:
        header = _pread(fd, _LFH.size, offset)
        (signature, _, flags, method, _, _, crc32, compressed_size, size32, name_length,
         extra_length) = _LFH.unpack(header)
        if signature != _LFH_SIGNATURE or flags & 0x0009:  # data descriptors and encryption: sizes unknown here
            break
        data_offset = offset + _LFH.size + name_length + extra_length
        if data_offset > size:
            break
        rest = _pread(fd, name_length + extra_length, offset + _LFH.size)
        try:
            name = _decode_name(rest[:name_length], flags)
            wide = _zip64_values(rest[name_length:], [size32 == _SENTINEL32, compressed_size == _SENTINEL32])
        except _Corrupt:
            break
        entry = ZipEntry(name, offset, wide[0] if wide[0] is not None else size32,
                         wide[1] if wide[1] is not None else compressed_size, crc32, method, flags)
        if data_offset + entry.compressed_size > size:
            break
        found.append(_Walked(entry, data_offset))
        offset = data_offset + entry.compressed_size
    return found


def _crc32_of(fd: int, offset: int, size: int) -> int:
    crc = 0
    block = 1 << 24
    for start in range(offset, offset + size, block):
        crc = zlib.crc32(_pread(fd, min(block, offset + size - start), start), crc)
    return crc


def _hold_writer_lock(fd: int, path: str) -> LockHold:
    """This process's exclusive lock on an archive it writes (the one it has open as ``fd``: a new descriptor of that
    very file, so the lock never lands on a file that replaced it); readers take none."""
    return hold_lock(path, exclusive=True, what="ZIP archive",
                     open_descriptor=lambda: os.open(_descriptor_path(fd, path), os.O_RDWR | os.O_CLOEXEC))


class ZipStore:
    """One ZIP archive, open for reading (and, if :attr:`writable`, appending): its central directory in memory, its
    entries read or mapped on demand. Get one with :func:`acquire_zip_store` (one per archive per process).

    Example:
        >>> import os, tempfile, numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "example.zip")
        >>> store = acquire_zip_store(path, writable=True, create=True)
        >>> with store.append() as batch:
        ...     batch.add("data/values", np.arange(4, dtype=np.float64))
        ...     batch.add("data/info.json", b'{"n":4}')
        >>> store.read("data/info.json"), sorted(store.children("data"))
        (b'{"n":4}', ['info.json', 'values'])
        >>> store.map_array("data/values", np.dtype(np.float64), 4).tolist()
        [0.0, 1.0, 2.0, 3.0]
        >>> import zipfile
        >>> zipfile.ZipFile(path).testzip() is None
        True
    """

    def __init__(self, path: str, fd: int, *, writable: bool, is_commit: Callable[[str], bool],
                 hold: LockHold | None = None) -> None:
        self.path = path
        self.writable = writable
        self._fd = fd
        self._hold = hold  # (the writer lock, while writable)
        self._is_commit = is_commit
        self._mutex = threading.RLock()
        self._appending: ZipAppend | None = None
        self._entries: dict[str, ZipEntry] = {}
        self._records: dict[str, bytes] = {}  # central directory records, in order
        self._children: dict[str, set[str]] = {}
        self._data_offsets: dict[str, int] = {}
        self._end = 0  # where the central directory begins (and the next entry goes)
        self._seen: tuple[int, int, int, bytes] = (0, 0, 0, b"")  # (the file's state when last read: _refresh)
        self._users = 0
        self._closer = weakref.finalize(self, close_descriptor, fd, Owner())
        self._load(repair=writable)

    # Opening.

    def _load(self, *, repair: bool) -> None:
        """Read the central directory, or recover the committed entries of an archive a killed writer left."""
        status = os.fstat(self._fd)
        size = status.st_size
        self._data_offsets = {}  # (an entry another process superseded since has a new local header)
        try:
            entries, records, cd_offset = _read_directory(self._fd, size)
            data_offsets: dict[str, int] = {}
        except _Corrupt as error:
            all_walked = _walk(self._fd, size)
            self._refuse_damage(all_walked, size, error)
            walked = self._committed(all_walked)
            if not walked and size:  # (nothing was ever committed: not an archive, or one whose creation was killed)
                raise DafFormatError(f"not a ZIP archive (or a corrupt one): {self.path}\n({error}; nothing in it "
                                     "can be recovered: mode w replaces it)") from error
            entries = [item.entry for item in walked]
            records = [_central_record(entry) for entry in entries]
            cd_offset = walked[-1].data_offset + walked[-1].entry.compressed_size if walked else 0
            data_offsets = {item.entry.name: item.data_offset for item in walked}
            if repair:
                self._write_directory(dict(zip([entry.name for entry in entries], records, strict=True)), cd_offset,
                                      size)
        for entry in entries:
            if entry.header_offset + _LFH.size > cd_offset or entry.compressed_size > cd_offset - entry.header_offset:
                raise DafFormatError(f"the ZIP entry: {entry.name}\nin the archive: {self.path}\nlies outside the "
                                     f"archive's data (at offset {entry.header_offset}, {entry.compressed_size} "
                                     f"bytes; the data ends at {cd_offset})")
        self._end = cd_offset
        self._install(entries, records, data_offsets)
        self._seen = self._state()

    def _state(self) -> tuple[int, int, int, bytes]:
        """What tells whether another process changed the archive since it was read: its size, modification and
        change times, and its end records."""
        status = os.fstat(self._fd)
        tail = os.pread(self._fd, _TAIL_SIZE, max(0, status.st_size - _TAIL_SIZE))
        return status.st_size, status.st_mtime_ns, status.st_ctime_ns, tail

    def _refresh(self) -> None:
        """Read the central directory again if another process changed the archive since (a new open of a store this
        process shares sees what was committed meanwhile; a writable store's lock keeps every other writer out)."""
        with self._mutex:
            if self.writable or self._fd < 0:
                return
            if self._state() != self._seen:
                self._load(repair=False)

    def _refuse_damage(self, walked: list[_Walked], size: int, error: _Corrupt) -> None:
        """Refuse (rather than recover as an earlier state) an archive damaged inside its committed entries: its end
        records still stand at the end of the file, but following the local headers stops before the central
        directory they point to. (A killed append only ever overwrites what lies past that point: the walk of what
        it leaves reaches the old central directory.)"""
        declared = _declared_directory_offset(self._fd, size)
        stop = walked[-1].data_offset + walked[-1].entry.compressed_size if walked else 0
        if declared is not None and stop < declared:
            raise DafFormatError(f"a damaged ZIP archive: {self.path}\n(its entry at offset {stop} is damaged, inside "
                                 f"the committed entries that end at offset {declared}; and {error}: nothing is "
                                 "recovered from it, so that no committed data is silently left out)")

    def _committed(self, walked: list[_Walked]) -> list[_Walked]:
        """The walked entries up to the last complete commit entry (later ones are a killed batch's); later copies of
        a name supersede earlier ones."""
        for last in range(len(walked) - 1, -1, -1):
            item = walked[last]
            if self._is_commit(item.entry.name) and item.entry.method == STORED and \
                    _crc32_of(self._fd, item.data_offset, item.entry.size) == item.entry.crc32:
                kept: dict[str, _Walked] = {}
                for earlier in walked[:last + 1]:
                    kept.pop(earlier.entry.name, None)
                    kept[earlier.entry.name] = earlier
                return list(kept.values())
        return []

    def _install(self, entries: list[ZipEntry], records: list[bytes], data_offsets: dict[str, int]) -> None:
        by_name: dict[str, ZipEntry] = {}
        by_record: dict[str, bytes] = {}
        for entry, record in zip(entries, records, strict=True):
            by_name.pop(entry.name, None)
            by_record.pop(entry.name, None)
            by_name[entry.name] = entry
            by_record[entry.name] = record
        children: dict[str, set[str]] = {}
        for name in by_name:
            _index_name(children, name)
        # Swapped in whole, so readers in other threads see either the old directory or the new one.
        self._entries, self._records, self._children = by_name, by_record, children
        self._data_offsets = {**self._data_offsets, **data_offsets}

    def _upgrade(self) -> None:
        """Make a store opened read-only writable (a later writable open of the same archive in this process)."""
        with self._mutex:
            if self.writable:
                return
            fd = os.open(_descriptor_path(self._fd, self.path), os.O_RDWR | os.O_CLOEXEC)
            try:
                hold = _hold_writer_lock(fd, self.path)
            except BaseException:
                os.close(fd)
                raise
            if file_key(self.path) != file_key(fd):  # (another process replaced it: it is no longer the archive)
                hold.release()
                os.close(fd)
                raise _Replaced()
            self._closer()  # closes the read-only descriptor (exactly once)
            self._fd, self.writable, self._hold = fd, True, hold
            self._closer = weakref.finalize(self, close_descriptor, fd, Owner())
            self._load(repair=True)

    def release(self) -> None:
        """Give up one opener's use of the store (each :func:`acquire_zip_store` counts one); the last one closes its
        descriptor (releasing the writer lock) and forgets it, so the next open reads the archive anew. Arrays mapped
        from it stay valid."""
        with _stores.mutex:  # (not the store's mutex: a batch in flight belongs to a user that has not released)
            self._users -= 1
            if self._users > 0 or self._fd < 0:
                return
            _stores.discard((os.fstat(self._fd).st_dev, os.fstat(self._fd).st_ino), self)
            self._closer()
            self._fd = -1
            if self._hold is not None:
                self._hold.release()
                self._hold = None

    def _require_open(self) -> int:
        if self._fd < 0:
            raise DafStorageError(f"the ZIP archive: {self.path}\nwas closed")
        return self._fd

    # Reading.

    def names(self) -> list[str]:
        """The entry names, in central directory order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def entry(self, name: str) -> ZipEntry | None:
        """The central directory entry of ``name``, or ``None``."""
        return self._entries.get(name)

    def children(self, directory: str) -> set[str]:
        """The names directly inside ``directory`` (``""`` for the top): the next path component of every entry under
        it, files and directories alike."""
        return set(self._children.get(directory, ()))

    def data_offset(self, name: str) -> int:
        """The file offset of an entry's data (read from its local file header, which is checked against the
        central directory)."""
        offset = self._data_offsets.get(name)
        if offset is not None:
            return offset
        entry = self._required(name)
        fd = self._require_open()
        try:
            header = _pread(fd, _LFH.size, entry.header_offset)
            signature, _, flags, method, *_, name_length, extra_length = _LFH.unpack(header)
            raw_name = _pread(fd, name_length, entry.header_offset + _LFH.size)
        except _Corrupt as error:
            raise DafFormatError(f"the ZIP entry: {name}\nin the archive: {self.path}\nhas no whole local header "
                                 f"({error})") from error
        if signature != _LFH_SIGNATURE or method != entry.method or raw_name != name.encode(
                "utf-8" if flags & _UTF8_FLAG else "cp437", errors="replace"):
            raise DafFormatError(f"the local header of the ZIP entry: {name}\nin the archive: {self.path}\ndoes not "
                                 "match its central directory record")
        offset = entry.header_offset + _LFH.size + name_length + extra_length
        if offset + entry.compressed_size > self._end:
            raise DafFormatError(f"the data of the ZIP entry: {name}\nin the archive: {self.path}\nruns into the "
                                 "central directory")
        self._data_offsets[name] = offset
        return offset

    def _required(self, name: str) -> ZipEntry:
        entry = self._entries.get(name)
        if entry is None:
            raise DafFormatError(f"missing ZIP entry: {name}\nin the archive: {self.path}")
        if entry.is_link or entry.flags & 0x0001:
            raise DafFormatError(f"the ZIP entry: {name}\nin the archive: {self.path}\nis a symbolic link or "
                                 "encrypted")
        return entry

    def read(self, name: str) -> bytes:
        """The (decompressed, CRC-checked) bytes of an entry.

        Example:
            >>> import os, tempfile
            >>> store = acquire_zip_store(os.path.join(tempfile.mkdtemp(), "x.zip"), writable=True, create=True)
            >>> with store.append() as batch:
            ...     batch.add("a.txt", b"hello")
            >>> store.read("a.txt")
            b'hello'
        """
        entry = self._required(name)
        offset = self.data_offset(name)
        try:
            raw = _pread(self._require_open(), entry.compressed_size, offset)
        except _Corrupt as error:
            raise DafFormatError(f"truncated ZIP entry: {name}\nin the archive: {self.path}") from error
        if entry.method == STORED:
            data = raw
            if entry.size != entry.compressed_size:
                raise DafFormatError(f"the STORED ZIP entry: {name}\nin the archive: {self.path}\nhas different "
                                     "sizes in and out")
        elif entry.method == DEFLATED:
            if entry.size > max(entry.compressed_size, 1) * _MAX_DEFLATE_RATIO:
                raise DafFormatError(f"the ZIP entry: {name}\nin the archive: {self.path}\ndeclares {entry.size} "
                                     f"bytes from {entry.compressed_size} compressed bytes")
            decompressor = zlib.decompressobj(-15)
            try:
                data = decompressor.decompress(raw, entry.size + 1)
            except zlib.error as error:
                raise DafFormatError(f"corrupt DEFLATE data of the ZIP entry: {name}\nin the archive: {self.path}"
                                     ) from error
            if len(data) != entry.size:
                raise DafFormatError(f"the ZIP entry: {name}\nin the archive: {self.path}\ndecompresses to "
                                     f"{len(data)} bytes instead of {entry.size}")
        else:
            raise DafFormatError(f"unsupported compression method: {entry.method}\nof the ZIP entry: {name}\nin the "
                                 f"archive: {self.path}\n(only STORED (0) and DEFLATE (8) entries can be read)")
        if zlib.crc32(data) != entry.crc32:
            raise DafFormatError(f"CRC mismatch of the ZIP entry: {name}\nin the archive: {self.path}")
        return data

    def map_array(self, name: str, dtype: np.dtype, count: int) -> np.ndarray | None:
        """A read-only, zero-copy map of a STORED entry as ``count`` elements of ``dtype``, or ``None`` if the entry
        is compressed or its data is not aligned for ``dtype`` (read it with :meth:`read` then). The entry's size must
        be exactly ``count`` elements (else :class:`~pydaf.DafFormatError`, before anything is mapped)."""
        entry = self._required(name)
        expected = count * dtype.itemsize
        if entry.size != expected:
            raise DafFormatError(f"the ZIP entry: {name}\nin the archive: {self.path}\nhas {entry.size} bytes instead "
                                 f"of {expected} ({count} x {dtype})")
        if entry.method != STORED or entry.compressed_size != entry.size:
            return None
        offset = self.data_offset(name)
        if offset % dtype.alignment:
            return None
        if count == 0:
            return np.empty(0, dtype=dtype)
        region = map_region(_descriptor_path(self._require_open(), self.path), offset, expected, writable=False)
        return region.view(dtype)

    # Writing.

    def append(self) -> ZipAppend:
        """Start a batch of entries, appended together: nothing of it is in the central directory (so nothing of it
        exists for readers, or after a kill) until :meth:`ZipAppend.commit`. Only one batch at a time: this holds
        the store's lock (other threads wait) until the batch is committed or aborted."""
        if not self.writable:
            raise DafStorageError(f"the ZIP archive: {self.path}\nis open read-only")
        self._require_open()
        self._mutex.acquire()
        if self._appending is not None:
            self._mutex.release()
            raise DafStorageError(f"can't append to the ZIP archive: {self.path}\nwhile this thread fills another "
                                  "property of it (an empty_* builder)")
        self._appending = ZipAppend(self)
        return self._appending

    def _write_directory(self, records: dict[str, bytes], cd_offset: int, old_size: int) -> int:
        """Write the central directory and end records at ``cd_offset`` and cut the file there; returns the new
        size. The end records are written last: until then the archive's end does not parse."""
        directory = b"".join(records.values())
        size = cd_offset + len(directory) + _TAIL_SIZE
        if size > old_size:
            os.ftruncate(self._fd, size)
        _pwrite(self._fd, directory + _tail(len(records), cd_offset, len(directory)), cd_offset)
        if size < old_size:
            os.ftruncate(self._fd, size)
        return size

    def _finish_append(self, batch: ZipAppend, entries: list[ZipEntry], data_offsets: dict[str, int],
                       removed: set[str]) -> None:
        records = {name: record for name, record in self._records.items() if name not in removed}
        by_name = {name: entry for name, entry in self._entries.items() if name not in removed}
        for entry in entries:
            records.pop(entry.name, None)
            records[entry.name] = _central_record(entry)
            by_name.pop(entry.name, None)
            by_name[entry.name] = entry
        self._write_directory(records, batch.position, os.fstat(self._fd).st_size)
        self._end = batch.position
        self._install(list(by_name.values()), [records[name] for name in by_name], data_offsets)

    def _release(self) -> None:
        self._appending = None
        self._mutex.release()


class ZipAppend:
    """A batch of entries appended to a :class:`ZipStore` (:meth:`ZipStore.append`): :meth:`add` whole entries,
    :meth:`reserve` entries to fill in place, then :meth:`commit` (or :meth:`abort`). As a context manager, commits
    on success and aborts on an exception. Entries are written in the order given; put the entry that makes the
    batch's content exist (its *commit entry*) last.

    Example:
        >>> import os, tempfile, numpy as np
        >>> store = acquire_zip_store(os.path.join(tempfile.mkdtemp(), "x.zip"), writable=True, create=True)
        >>> batch = store.append()
        >>> buffer = batch.reserve("values", 16).view(np.int64)  # a map of the entry's bytes in the file
        >>> buffer[:] = [7, 8]
        >>> batch.commit()
        >>> store.map_array("values", np.dtype(np.int64), 2).tolist()
        [7, 8]
        >>> batch = store.append()
        >>> batch.add("dropped", b"never committed")
        >>> batch.abort()
        >>> store.names()
        ['values']
    """

    def __init__(self, store: ZipStore) -> None:
        self._store = store
        self._start = store._end
        self.position = store._end
        self._old_size = os.fstat(store._fd).st_size
        self._entries: list[ZipEntry] = []
        self._data_offsets: dict[str, int] = {}
        self._reserved: list[tuple[int, int, int, np.ndarray]] = []  # (entry index, header offset, data offset, map)
        self._sealed = 0  # how many of the reserved entries have their CRC written
        self._removed: set[str] = set()
        self._done = False

    def __enter__(self) -> ZipAppend:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self._done:
            return
        if kind is None:
            self.commit()
        else:
            self.abort()

    def _check_name(self, name: str, replace: bool) -> bytes:
        if self._done:
            raise DafStorageError(f"the append to the ZIP archive: {self._store.path}\nis already finished")
        if not name or name.startswith("/") or "\\" in name or "\0" in name or \
                any(part in ("", ".", "..") for part in name.split("/")):
            raise DafFormatError(f"invalid ZIP entry name: {name!r}")
        check_entry_name(name, what=f"the ZIP entry: {_shortened(name)}", where=self._store.path)
        if not replace and (name in self._store._entries or any(entry.name == name for entry in self._entries)):
            raise DafStorageError(f"existing ZIP entry: {name}\nin the append-only archive: {self._store.path}")
        return name.encode("utf-8")

    def _place(self, encoded: bytes, name: str, size: int, crc32: int) -> tuple[int, bytes]:
        header = _local_header(encoded, self.position, size, crc32)
        data_offset = self.position + len(header)
        self._entries.append(ZipEntry(name, self.position, size, size, crc32, STORED))
        self._data_offsets[name] = data_offset
        return data_offset, header

    def add(self, name: str, data: bytes | np.ndarray, *, replace: bool = False) -> None:
        """Append an entry holding ``data`` (bytes, or a numpy array's raw bytes in its memory order). With
        ``replace``, an existing entry of that name is superseded; otherwise an existing name is an error."""
        encoded = self._check_name(name, replace)
        payload = (memoryview(data) if isinstance(data, bytes)
                   else np.ascontiguousarray(data).reshape(-1).data).cast("B")
        try:
            self._seal()
            data_offset, header = self._place(encoded, name, len(payload), zlib.crc32(payload))
            _pwrite(self._store._fd, header, self.position)
            _pwrite(self._store._fd, payload, data_offset)
        except OSError as error:
            raise self._failed(name, error) from error
        self.position = data_offset + len(payload)

    def reserve(self, name: str, nbytes: int, *, replace: bool = False) -> np.ndarray:
        """Append an entry of ``nbytes`` and return a writable, zero-filled map of its data to fill in place (its
        disk space allocated first, so a full disk is an error here, never a crash when the map is written). Fill it
        before adding another entry: its CRC is computed by the next :meth:`add` (or :meth:`commit`)."""
        encoded = self._check_name(name, replace)
        fd = self._store._fd
        try:
            data_offset, header = self._place(encoded, name, nbytes, 0)
            _pwrite(fd, header, self.position)
            if nbytes:
                os.posix_fallocate(fd, data_offset, nbytes)
                stale_end = min(data_offset + nbytes, self._old_size)  # old directory bytes still lying there
                if stale_end > data_offset:
                    _pwrite(fd, bytes(stale_end - data_offset), data_offset)
                region = map_region(_descriptor_path(fd, self._store.path), data_offset, nbytes, writable=True)
            else:
                region = np.zeros(0, dtype=np.uint8)
        except OSError as error:
            raise self._failed(name, error) from error
        self._reserved.append((len(self._entries) - 1, self._entries[-1].header_offset, data_offset, region))
        self.position = data_offset + nbytes
        return region

    def remove(self, name: str) -> None:
        """Drop an entry from the central directory at :meth:`commit` (its bytes stay in the file, unreachable: Julia's
        ``remove_entries_from_central_directory!``, e.g. for a stale sidecar); a missing name is ignored."""
        self._check_name(name, replace=True)
        self._removed.add(name)

    def _failed(self, name: str, error: OSError) -> DafStorageError:
        self.abort()
        return storage_error(error, f"can't append the ZIP entry: {name}\nto the archive: {self._store.path}")

    def _seal(self) -> None:
        """Write the CRCs of the reserved entries (filled by now) into their local headers, before any later entry is
        written: so an entry that ends a batch (its commit entry) is only ever complete after every earlier entry of
        its batch is, CRC included, and what a killed writer's archive recovers to (the entries up to its last
        complete commit entry) never holds an unpatched CRC."""
        for index, header_offset, _, region in self._reserved[self._sealed:]:
            crc32 = zlib.crc32(region.data)
            entry = self._entries[index]
            self._entries[index] = ZipEntry(entry.name, entry.header_offset, entry.size, entry.compressed_size, crc32,
                                            STORED)
            _pwrite(self._store._fd, struct.pack("<I", crc32), header_offset + 14)
        self._sealed = len(self._reserved)

    def commit(self) -> None:
        """Patch the CRCs of reserved entries, then write the new central directory and end records (the commit)."""
        if self._done:
            return
        store = self._store
        try:
            self._seal()
            store._finish_append(self, self._entries, self._data_offsets, self._removed)
        except BaseException as error:
            self.abort()
            if isinstance(error, OSError) and not isinstance(error, DafError):
                raise storage_error(error, f"can't append to the ZIP archive: {store.path}") from error
            raise
        finally:
            if not self._done:
                self._done = True
                store._release()

    def abort(self) -> None:
        """Forget the batch: the old central directory and end records are written back where they were, and the
        file cut back to its old size (maps of reserved entries are first moved into private memory)."""
        if self._done:
            return
        store = self._store
        self._done = True
        try:
            if self._reserved:
                detach_region(store._fd, self._start)
            store._write_directory(dict(store._records), self._start, os.fstat(store._fd).st_size)
        finally:
            store._release()


def _shortened(name: str, keep: int = 80) -> str:
    """A name short enough for a message (a 70,000-character one is shown by its ends and length)."""
    return name if len(name) <= 2 * keep else f"{name[:keep]}...{name[-keep:]} ({len(name)} characters)"


def _index_name(children: dict[str, set[str]], name: str) -> None:
    parts = name.split("/")
    for depth in range(len(parts)):
        children.setdefault("/".join(parts[:depth]), set()).add(parts[depth])


def _descriptor_path(fd: int, path: str) -> str:
    """A path that opens the very file ``fd`` is open on (so a map never reaches a file that replaced it)."""
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else path


# The archives this process has open, by identity (one store per archive, shared by every data set in it).
_stores: ProcessRegistry[FileKey, ZipStore] = ProcessRegistry("ZIP archives")


def _always(_: str) -> bool:
    return True


def _archive_names(fd: int, size: int) -> list[str] | None:
    """The entry names of the archive open as ``fd`` (its central directory's, or those a killed writer left in its
    local headers), or ``None`` if it is not a ZIP archive."""
    try:
        entries, _, _ = _read_directory(fd, size)
        return [entry.name for entry in entries]
    except (_Corrupt, OSError):
        pass
    try:
        walked = _walk(fd, size)
    except (_Corrupt, OSError):
        return None
    return [item.entry.name for item in walked] if walked else None


def _replaceable(fd: int, size: int, marker: str) -> bool:
    if size == 0:
        return True
    names = _archive_names(fd, size)
    return names is not None and (not names or marker in names)


def _not_replaceable(path: str, format: str) -> DafModeError:
    return DafModeError(f"not a daf archive: {path}\n(it is an existing file that is not a {format} data set; "
                        f"{format} will not erase it in mode w)")


def require_replaceable_archive(path: str | os.PathLike, marker: str, format: str) -> None:
    """Refuse to replace (mode ``w``) anything at ``path`` but a missing or empty file, an empty archive or an archive
    holding the entry ``marker`` (the root of a data set of ``format``): anything else is somebody's data. A FIFO, a
    device, a folder or a symbolic link is refused without being opened for reading (it never blocks).

    Example:
        >>> import os, tempfile, zipfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf.zip")
        >>> with zipfile.ZipFile(path, "w") as archive:
        ...     archive.writestr("notes.txt", "mine")
        >>> require_replaceable_archive(path, "daf.json", "ZipDaf")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafModeError: not a daf archive: ...x.daf.zip
        (it is an existing file that is not a ZipDaf data set; ZipDaf will not erase it in mode w)
    """
    text = os.fspath(path)
    if not os.path.lexists(text):
        return
    fd = _open_replaced(text, format)
    try:
        if not _replaceable(fd, os.fstat(fd).st_size, marker):
            raise _not_replaceable(text, format)
    finally:
        os.close(fd)


def _open_replaced(path: str, format: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the regular file (not a link) that mode ``w`` would replace; anything else is refused."""
    try:
        fd, _ = open_regular_file(path, what=f"the {format} archive", flags=flags, follow_symlinks=False)
    except DafFormatError:
        raise _not_replaceable(path, format) from None
    except OSError as error:
        raise storage_error(error, f"can't open the ZIP archive: {path}") from error
    return fd


class _Replaced(Exception):
    """The archive's path named another file once its lock was taken (another process replaced it): open anew."""


_ATTEMPTS = 20  # opens retried when another process keeps replacing the archive meanwhile


def acquire_zip_store(path: str | os.PathLike, *, writable: bool, create: bool = False,
                      truncate: tuple[str, str] | None = None, is_commit: Callable[[str], bool] = _always) -> ZipStore:
    """The :class:`ZipStore` of an archive, shared by every opener in this process (by file identity): opened
    writable (upgrading a read-only one) if ``writable``; created empty if missing and ``create``; replaced by an
    empty archive (a new file renamed over the old one, while holding the old one's writer lock) if ``truncate``, the
    ``(marker, format)`` of the data sets it may replace (:func:`require_replaceable_archive`). ``is_commit`` tells
    which entries end a batch (see the module docstring); the first opener's is kept.

    Every writable open takes the archive's writer lock (waiting up to
    :data:`~pydaf._os.locks.LOCK_WAIT_SECONDS`, then :class:`~pydaf.DafLockedError` naming the writer's pid) and
    checks that the path still names the file it locked. A shared store is revalidated (size, time, end records) when
    opened again, so a new open sees what another process committed since.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.zip")
        >>> store = acquire_zip_store(path, writable=True, create=True)
        >>> acquire_zip_store(path, writable=False) is store, store.names()
        (True, [])
        >>> open(path, "rb").read() == EMPTY_ARCHIVE
        True
    """
    path = os.fspath(path)
    if truncate is not None or (create and not os.path.lexists(path)):
        if not writable:
            raise DafStorageError(f"can't create the ZIP archive: {path}\nin a read-only open")
        if truncate is not None:
            with _stores.mutex:
                return _truncate(path, truncate, is_commit)
        _create_empty(path)
    with _stores.mutex:
        for _ in range(_ATTEMPTS):
            try:
                return _acquire(path, writable, is_commit)
            except _Replaced:
                continue
    raise DafStorageError(f"can't open the ZIP archive: {path}\n(other processes kept replacing it meanwhile; retry)")


def _acquire(path: str, writable: bool, is_commit: Callable[[str], bool]) -> ZipStore:
    key = file_key(path)
    if key is None:
        raise DafFormatError(f"no such file: {path}")
    store = _stores.get(key)
    if store is not None:
        store._users += 1  # (first: a release run by the garbage collector from here on can't close it)
        if store._fd < 0:  # (closed by such a release just before)
            store = None
    if store is None:
        fd, hold = _open_archive(path, writable, key)
        store = ZipStore(path, fd, writable=writable, is_commit=is_commit, hold=hold)
        store._users += 1
        _stores.add(key, store)
        return store
    try:
        if writable:
            store._upgrade()
        else:
            store._refresh()
    except BaseException:
        store.release()
        raise
    return store


def _open_archive(path: str, writable: bool, key: FileKey) -> tuple[int, LockHold | None]:
    """A descriptor of the archive (the file ``key`` names; never blocking on a FIFO or a device) and, to write, its
    writer lock, taken on that very file and checked to be still the one at ``path``."""
    try:
        fd, _ = open_regular_file(path, what="the ZIP archive", flags=os.O_RDWR if writable else os.O_RDONLY)
    except FileNotFoundError:
        raise _Replaced() from None
    except DafError:
        raise
    except OSError as error:
        raise DafStorageError(f"can't open the ZIP archive: {path}\n({error})") from error
    hold = None
    try:
        if file_key(fd) != key:
            raise _Replaced()
        if writable:
            hold = _hold_writer_lock(fd, path)
            if file_key(path) != key:  # (replaced by another process while we waited for its lock)
                hold.release()
                raise _Replaced()
    except BaseException:
        os.close(fd)
        raise
    return fd, hold


def _new_file(path: str) -> tuple[str, int]:
    """A new, empty file beside ``path`` (its folder, a hidden unpredictable name, created exclusively and never
    through a symbolic link) and a read-write descriptor of it."""
    folder, name = os.path.split(os.path.abspath(path))
    for _ in range(100):
        temporary = os.path.join(folder, f".{name}.pydaf-new-{os.getpid()}-{secrets.token_hex(8)}")
        try:
            fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        except OSError as error:
            raise storage_error(error, f"can't create the ZIP archive: {path}") from error
        return temporary, fd
    raise DafStorageError(f"can't create the ZIP archive: {path}\n(no free temporary name beside it)")


def _write_empty(fd: int, path: str) -> None:
    try:
        _pwrite(fd, EMPTY_ARCHIVE, 0)
    except OSError as error:
        raise storage_error(error, f"can't create the ZIP archive: {path}") from error


def _create_empty(path: str) -> None:
    """Create a missing archive: an empty archive written under a new name and linked into place (which fails,
    rather than replace, if another opener created it meanwhile: then that one is opened)."""
    temporary, fd = _new_file(path)
    try:
        _write_empty(fd, path)
        try:
            os.link(temporary, path, follow_symlinks=False)
        except FileExistsError:
            pass
        except OSError as error:
            raise storage_error(error, f"can't create the ZIP archive: {path}") from error
    finally:
        os.close(fd)
        os.remove(temporary)


def _truncate(path: str, truncate: tuple[str, str], is_commit: Callable[[str], bool]) -> ZipStore:
    """Mode ``w``: a new empty archive, locked, renamed over the old one while the old one's writer lock is held (so
    no other process writes it meanwhile, and one that waited for it sees the path name another file and opens that
    one); arrays mapped from the old file stay valid (it is unlinked, not cut)."""
    marker, format = truncate
    old_hold: LockHold | None = None
    for _ in range(_ATTEMPTS):
        if not os.path.lexists(path):
            break
        old_fd = _open_replaced(path, format, os.O_RDWR)
        try:
            key = file_key(old_fd)
            old_hold = _hold_writer_lock(old_fd, path)
            if file_key(path) == key and _replaceable(old_fd, os.fstat(old_fd).st_size, marker):
                break
            replaced = file_key(path) != key
            old_hold.release()
            old_hold = None
            if not replaced:
                raise _not_replaceable(path, format)
        finally:
            os.close(old_fd)
    else:
        raise DafStorageError(f"can't replace the ZIP archive: {path}\n(other processes kept replacing it meanwhile; "
                              "retry)")
    try:
        temporary, fd = _new_file(path)
        renamed = False
        try:
            _write_empty(fd, path)
            hold = _hold_writer_lock(fd, path)  # (a new file nobody else knows: never waits)
            try:
                os.replace(temporary, path)
            except OSError as error:
                hold.release()
                raise storage_error(error, f"can't replace the ZIP archive: {path}") from error
            renamed = True
        except BaseException:
            if not renamed:
                os.close(fd)
                os.remove(temporary)
            raise
    finally:
        if old_hold is not None:
            old_hold.release()
    store = ZipStore(path, fd, writable=True, is_commit=is_commit, hold=hold)
    store._users += 1
    _stores.add(file_key(fd), store)  # type: ignore[arg-type]
    return store


def replace_archive(temporary: str | os.PathLike, path: str | os.PathLike) -> None:
    """Rename the complete archive ``temporary`` over the archive ``path`` (a conversion's destination) while holding
    the old archive's writer lock: never while another process writes it (that waits up to
    :data:`~pydaf._os.locks.LOCK_WAIT_SECONDS`, then :class:`~pydaf.DafLockedError` naming its pid, and nothing is
    replaced), and a writer that waited for the old file's lock then finds the path names the new one.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> old, new = os.path.join(folder, "x.daf.zip"), os.path.join(folder, "new.zip")
        >>> acquire_zip_store(old, writable=True, create=True).release()
        >>> acquire_zip_store(new, writable=True, create=True).release()
        >>> replace_archive(new, old)
        >>> sorted(os.listdir(folder))
        ['x.daf.zip']
    """
    path = os.fspath(path)
    hold = None
    if os.path.lexists(path) and not os.path.islink(path) and os.path.isfile(path):
        try:
            fd, _ = open_regular_file(path, what="the ZIP archive", flags=os.O_RDWR, follow_symlinks=False)
        except OSError as error:
            raise storage_error(error, f"can't replace the ZIP archive: {path}") from error
        try:
            hold = _hold_writer_lock(fd, path)
        finally:
            os.close(fd)
    try:
        os.replace(temporary, path)
    finally:
        if hold is not None:
            hold.release()
