"""Files in and out of the workspace: a job's files and tar archive unpacked by the run's process,
and a snapshot planned and streamed into the answer by the server (part of the server's script)."""

import errno
import os
import stat

from veriloop.sandbox.sandboxed._frames import MIB, write_all  # sandbox: strip
from veriloop.sandbox.sandboxed._scratch import WORKSPACE  # sandbox: strip


def prepare_workspace(plan):
    made = set()
    if plan.archive:
        unpack(plan.archive, made)
    for name, content in plan.files:
        write_file(name, content, 0o644, made)


def write_file(name, content, mode, made):
    parent = os.path.dirname(name)
    if parent and parent not in made:
        os.makedirs(parent, exist_ok=True)
        made.add(parent)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        write_all(fd, content)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def unpack(archive, made):
    """Unpack the directories and regular files of a tar archive (ustar, pax or GNU long
    names) into the current directory; every other member is left out, as are names that
    would leave it. A plain reader: ``tarfile`` takes ten times as long per member."""
    view = memoryview(archive)
    offset, long_name = 0, None
    while offset + 512 <= len(view):
        block = bytes(view[offset : offset + 512])
        if block == bytes(512):
            return
        size = tar_number(block[124:136])
        kind = block[156:157]
        start, offset = offset + 512, offset + 512 + (size + 511) // 512 * 512
        if start + size > len(view):
            raise ValueError("the workspace archive ends inside a member")
        if kind in (b"x", b"L"):  # a pax header or a GNU long name for the next member
            data = bytes(view[start : start + size])
            long_name = pax_path(data) if kind == b"x" else data.rstrip(b"\0").decode("utf-8", "replace")
            continue
        if kind == b"g":
            continue
        name, long_name = long_name or tar_name(block), None
        name = os.path.normpath(name)
        if name.startswith("/") or name == "." or ".." in name.split("/"):
            continue
        if kind == b"5":
            os.makedirs(name, exist_ok=True)
            made.add(name)
        elif kind in (b"0", b"\0", b"7"):
            write_file(name, view[start : start + size], tar_number(block[100:108]) & 0o777, made)


def tar_number(field):
    if field[:1] in (b"\x80", b"\xff"):  # base-256, for sizes past the octal field
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * len(field) - 8)) if field[:1] == b"\xff" else value
    digits = field.split(b"\0", 1)[0].strip()
    return int(digits, 8) if digits else 0


def tar_name(block):
    name = block[0:100].split(b"\0", 1)[0]
    if block[257:262] == b"ustar":
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return name.decode("utf-8", "replace")


def pax_path(data):
    """The ``path`` record of a pax extended header, or None."""
    found, position = None, 0
    while position < len(data):
        space = data.index(b" ", position)
        length = int(data[position:space])
        key, _, value = data[space + 1 : position + length - 1].partition(b"=")
        if key == b"path":
            found = value.decode("utf-8", "replace")
        position += length
    return found


def plan_archive(limit):
    """``(entries, size)`` of the workspace as a tar of its directories and regular files: each
    entry a path, its tar header and its length, and ``size`` the archive's exact length. The
    archive is written later, straight into the answer (``stream_archive``), so a snapshot is
    never held in memory. None if the archive would be over ``limit``, or its files' sizes add
    up to more than the mount holds (only sparse files can: their holes would come back as
    zeros); an OSError for a file or folder that cannot be read (a run may lock them)."""
    stats = os.statvfs(WORKSPACE)
    content_left = stats.f_blocks * stats.f_frsize
    entries, size = [], 2 * 512  # the two zero blocks that end an archive

    def unreadable(error):
        raise error

    for root, dirs, files in os.walk(WORKSPACE, onerror=unreadable):
        dirs.sort()
        for name in dirs + sorted(files):
            path = os.path.join(root, name)
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                kind, length = b"5", 0
            elif stat.S_ISREG(info.st_mode):
                kind, length = b"0", info.st_size
                content_left -= length
                if not os.access(path, os.R_OK):
                    raise PermissionError(errno.EACCES, "cannot read", os.path.relpath(path, WORKSPACE))
            else:
                continue
            header = tar_header(os.path.relpath(path, WORKSPACE), kind, info.st_mode & 0o777, length)
            size += len(header) + (length + 511) // 512 * 512
            if content_left < 0 or size > limit:
                return None
            entries.append((path, header, length))
    return entries, size


def tar_header(name, kind, mode, length):
    """A ustar header (preceded by a pax header when the name does not fit its field)."""
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) <= 100 and encoded.isascii():
        return ustar_block(encoded, kind, mode, length)
    record = b" path=" + encoded + b"\n"
    digits = len(str(len(record)))
    while len(str(len(record) + digits)) != digits:
        digits += 1
    record = str(len(record) + digits).encode() + record
    pax = ustar_block(b"././@PaxHeader", b"x", 0o644, len(record)) + record + bytes(-len(record) % 512)
    return pax + ustar_block(encoded[:100], kind, mode, length)


def ustar_block(name, kind, mode, length):
    fields = [
        name.ljust(100, b"\0"),
        b"%07o\0" % mode,
        b"%07o\0" % 0,
        b"%07o\0" % 0,
        b"%011o\0" % length,
        b"%011o\0" % 0,
        b" " * 8,
        kind,
        bytes(100),
        b"ustar\x0000",
        bytes(32),
        bytes(32),
        bytes(8),
        bytes(8),
        bytes(155),
    ]
    block = bytearray(b"".join(fields).ljust(512, b"\0"))
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def stream_archive(fd, entries):
    """Write the planned archive to ``fd``: each header, then the file's bytes, padded."""
    for path, header, length in entries:
        write_all(fd, header)
        if not length:
            continue
        source = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            left = length
            while left:
                chunk = os.read(source, min(left, MIB))
                if not chunk:
                    raise OSError(errno.EIO, "a file of the workspace shrank while it was sent", path)
                write_all(fd, chunk)
                left -= len(chunk)
        finally:
            os.close(source)
        write_all(fd, bytes(-length % 512))
    write_all(fd, bytes(1024))
