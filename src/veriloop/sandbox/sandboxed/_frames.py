"""Frames between host, server and run: a JSON header, then raw blobs (part of the server's script)."""

import json
import os
import struct

MIB = 1 << 20


def read_exact(fd, size):
    """``size`` bytes from ``fd``, or None if it closes first."""
    buffer = bytearray(size)
    view, done = memoryview(buffer), 0
    while done < size:
        got = os.readv(fd, [view[done : done + MIB]])
        if not got:
            return None
        done += got
    return bytes(buffer)


def read_frame(fd):
    """``(header bytes, header, blobs)`` of the next frame on ``fd``, or None at its end.

    A frame is a 4-byte big-endian length, that many bytes of JSON (the header), then the raw
    bytes of each blob whose length the header lists in ``blobs``: files, archives and outputs
    travel as they are, never as base64 inside the JSON.
    """
    size = read_exact(fd, 4)
    raw = None if size is None else read_exact(fd, struct.unpack(">I", size)[0])
    if raw is None:
        return None
    header = json.loads(raw)
    blobs = []
    for length in header.get("blobs", ()):
        blob = read_exact(fd, length)
        if blob is None:
            return None
        blobs.append(blob)
    return raw, header, blobs


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


IOV_MAX = 1024


def write_parts(fd, parts):
    """Write ``parts`` (bytes-like) to ``fd`` in order, with as few system calls as the pipe
    allows (``writev``), rather than one or more for each."""
    views = [memoryview(part).cast("B") for part in parts if len(part)]
    first = 0
    while first < len(views):
        done = os.writev(fd, views[first : first + IOV_MAX])
        while first < len(views) and done >= len(views[first]):
            done -= len(views[first])
            first += 1
        if done:
            views[first] = views[first][done:]


def write_frame(fd, header, blobs=()):
    data = json.dumps(dict(header, blobs=[len(blob) for blob in blobs])).encode()
    write_all(fd, struct.pack(">I", len(data)) + data)
    for blob in blobs:
        write_all(fd, blob)


def report_failure(fd, kind, text):
    try:
        os.write(fd, (kind + text)[:2000].encode("utf-8", "replace"))
    except OSError:
        pass
