"""Workspaces: the files a task's episode starts from, and the files a response ends with.

A workspace is given inline (``{path: text}``, or ``{path: {"base64": ...}}`` for binary
content), as a directory, or as a tar archive (``.tar``, ``.tar.gz``, ``.tgz``). Every path is
relative, without ``..``; a directory or archive may hold no link or special file; the files
together stay within ``MAX_FILES`` and ``MAX_BYTES``. ``workspace_files`` reads any of the three
forms into ``{path: bytes}``, and ``snapshot_of`` packs such a map as a sandbox Snapshot.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import stat
import tarfile
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

MAX_FILES = 10_000
MAX_BYTES = 64 << 20
_ARCHIVES = (".tar", ".tar.gz", ".tgz")


class WorkspaceError(ValueError):
    """A workspace that cannot be used as given (its message says where and why)."""


def workspace_path(path: str) -> str:
    """``path`` normalised, when it names a place inside the workspace; else ValueError."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise WorkspaceError(f"file name {path!r} is empty or holds a NUL byte")
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or str(pure) in ("", "."):
        raise WorkspaceError(f"file name {path!r} must be a relative path inside the workspace, without '..'")
    return str(pure)


def inline_files(files: Mapping[str, Any]) -> dict[str, bytes]:
    """An inline workspace as ``{path: bytes}`` (text is UTF-8)."""
    decoded: dict[str, bytes] = {}
    for name, content in files.items():
        path = workspace_path(name)
        if isinstance(content, str):
            decoded[path] = content.encode()
        elif isinstance(content, Mapping) and set(content) == {"base64"} and isinstance(content["base64"], str):
            try:
                decoded[path] = base64.b64decode(content["base64"], validate=True)
            except binascii.Error:
                raise WorkspaceError(f"file {name!r}: 'base64' is not valid base64") from None
        else:
            raise WorkspaceError(f"file {name!r}: content must be text or {{'base64': '...'}}")
    return _within_bounds(decoded, "inline workspace")


def workspace_problem(files: Any) -> str | None:
    """Why an inline workspace cannot be used (too many files, too much content, a bad path or
    content), or None; None too for what is not a ``{path: content}`` map (a type error elsewhere)."""
    if not isinstance(files, Mapping):
        return None
    try:
        inline_files(files)
    except WorkspaceError as exc:
        return str(exc)
    return None


def inline_form(files: Mapping[str, bytes]) -> dict[str, Any]:
    """``{path: bytes}`` as an inline workspace: text where the bytes are UTF-8, else base64."""
    form: dict[str, Any] = {}
    for path, content in files.items():
        try:
            form[path] = content.decode("utf-8")
        except UnicodeDecodeError:
            form[path] = {"base64": base64.b64encode(content).decode()}
    return form


def workspace_files(spec: Mapping[str, Any] | str | os.PathLike[str] | None) -> dict[str, bytes]:
    """The files of a workspace given in any of its forms (see the module's docstring)."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return inline_files(spec)
    path = os.fspath(spec)
    if os.path.isdir(path):
        return _directory_files(path)
    if os.path.isfile(path) and path.endswith(_ARCHIVES):
        return _archive_files(path)
    if os.path.exists(path):
        raise WorkspaceError(f"workspace {path}: not a directory or a {', '.join(_ARCHIVES)} archive")
    raise WorkspaceError(f"workspace {path}: no such directory or archive")


def snapshot_archive(files: Mapping[str, bytes]) -> bytes:
    """``files`` as the uncompressed tar a sandbox Snapshot holds (directories included)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        made: set[str] = set()
        for name in sorted(files):
            parents = PurePosixPath(name).parents
            for parent in reversed([str(p) for p in parents if str(p) != "."]):
                if parent not in made:
                    made.add(parent)
                    info = tarfile.TarInfo(parent)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(files[name]), 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    return buffer.getvalue()


def _within_bounds(files: dict[str, bytes], where: str) -> dict[str, bytes]:
    _check_growth(where, len(files), sum(map(len, files.values())))
    return files


def _check_growth(where: str, count: int, size: int) -> None:
    """Raise before a workspace grows past its bounds (checked before a file is read)."""
    if count > MAX_FILES:
        raise WorkspaceError(f"{where}: more than {MAX_FILES} files")
    if size > MAX_BYTES:
        raise WorkspaceError(f"{where}: more than {MAX_BYTES >> 20} MiB of content")


def _directory_files(root: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for here, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            full = os.path.join(here, name)
            relative = os.path.relpath(full, root).replace(os.sep, "/")
            info = os.lstat(full)
            if not stat.S_ISREG(info.st_mode):
                kind = "a link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                raise WorkspaceError(f"workspace {root}: {relative} is {kind}; a workspace holds files only")
            total += info.st_size
            _check_growth(root, len(files) + 1, total)
            with open(full, "rb") as handle:
                files[workspace_path(relative)] = handle.read()
    return files


def _archive_files(path: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tar:
                if member.isdir():
                    workspace_path(member.name)
                    continue
                if not member.isfile():
                    raise WorkspaceError(f"workspace {path}: {member.name} is a link or special file; files only")
                total += member.size
                _check_growth(path, len(files) + 1, total)
                extracted = tar.extractfile(member)
                files[workspace_path(member.name)] = extracted.read() if extracted else b""
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise WorkspaceError(f"workspace {path}: not a readable tar archive ({exc})") from None
    return files
