"""Workspace archives the run unpacks itself: every tar form a Snapshot may hold, and bad ones."""

from __future__ import annotations

import io
import tarfile

import pytest

from veriloop.core import Snapshot
from veriloop.sandbox import Limits, Sandbox

LIST = "import os\nfor root, dirs, files in sorted(os.walk('.')):\n    for f in sorted(files):\n        p = os.path.join(root, f)\n        print(p, oct(os.stat(p).st_mode & 0o777), open(p).read())\n"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(limits=Limits(timeout_s=10), workers=1) as box:
        yield box


def _archive(members, format=tarfile.PAX_FORMAT) -> Snapshot:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:", format=format) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return Snapshot(archive=buffer.getvalue())


def _file(name: str, text: str, mode: int = 0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(text.encode()), mode
    return info, text.encode()


@pytest.mark.parametrize("format", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def test_every_tar_format_unpacks_with_names_modes_and_contents(sandbox, format):
    deep = "a/" + "/".join(["folder_with_a_long_name"] * 5) + "/file.txt"  # over ustar's 100-byte name field
    members = [_file("top.txt", "top"), _file(deep, "deep"), _file("run.sh", "echo hi", 0o755)]
    if format == tarfile.USTAR_FORMAT:
        members[1] = _file("b/" + "c" * 90 + "/d.txt", "deep")  # ustar: the prefix field holds the folders
    result = sandbox.run_python(LIST, snapshot=_archive(members, format))
    assert result.ok, result
    lines = result.stdout.splitlines()
    assert "./top.txt 0o644 top" in lines and "./run.sh 0o755 echo hi" in lines
    assert any(line.endswith("file.txt 0o644 deep") or line.endswith("d.txt 0o644 deep") for line in lines)


def test_links_special_files_and_escaping_names_are_left_out(sandbox):
    link = tarfile.TarInfo("link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    hard = tarfile.TarInfo("hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, "top.txt"
    fifo = tarfile.TarInfo("fifo")
    fifo.type = tarfile.FIFOTYPE
    members = [_file("top.txt", "top"), (link, None), (hard, None), (fifo, None), _file("../up.txt", "up")]
    members.append(_file("/abs.txt", "abs"))
    result = sandbox.run_python(
        LIST + "print(sorted(os.listdir('.')), os.path.exists('/tmp/../up.txt'))", snapshot=_archive(members)
    )
    assert result.ok, result
    assert result.stdout.splitlines()[-1] == "['top.txt'] False"


def test_a_broken_archive_is_an_error_and_the_next_run_is_clean(sandbox):
    good = _archive([_file("a.txt", "a" * 2000)]).archive
    broken = bytearray(good)
    broken[124:136] = b"zzzzzzzzzzz\0"  # the size field is not a number
    result = sandbox.run(["true"], snapshot=Snapshot(archive=bytes(broken)))
    assert result.status == "error" and "could not prepare the workspace" in result.detail, result
    truncated = sandbox.run(["true"], snapshot=Snapshot(archive=good[:700]))
    assert truncated.status == "error" and "ends inside a member" in truncated.detail, truncated
    after = sandbox.run(["ls", "-A"])
    assert after.ok and after.stdout == ""


def test_a_captured_workspace_restores_exactly(sandbox):
    files = {f"pkg/sub{i % 3}/m{i}.py": f"x = {i}\n" * (i + 1) for i in range(30)}
    files["bin.dat"] = bytes(range(256)) * 4
    made = sandbox.run_python("import os; os.chmod('pkg/sub0/m0.py', 0o700)", files=files, capture=True)
    again = sandbox.run_python("pass", snapshot=made.snapshot, capture=True)
    assert again.snapshot.files() == {k: v if isinstance(v, bytes) else v.encode() for k, v in files.items()}
    mode = sandbox.run(["stat", "-c", "%a", "pkg/sub0/m0.py"], snapshot=made.snapshot)
    assert mode.stdout.strip() == "700"


def test_a_captured_workspace_keeps_long_and_non_ascii_names(sandbox):
    deep = "a/" + "b" * 120 + "/f.txt"
    code = f"import os\nos.makedirs(os.path.dirname({deep!r}))\nopen({deep!r}, 'w').write('deep')\nopen('é.txt', 'w').write('u')"
    made = sandbox.run_python(code, capture=True)
    assert made.ok and made.snapshot.files() == {deep: b"deep", "é.txt": b"u"}
    again = sandbox.run(["cat", deep, "é.txt"], snapshot=made.snapshot)
    assert again.stdout == "deepu"


@pytest.mark.parametrize("lock", ["os.chmod('secret.txt', 0)", "os.chmod('folder', 0)"])
def test_a_workspace_the_run_locked_is_no_snapshot_rather_than_a_wrong_one(sandbox, lock):
    code = f"import os\nos.mkdir('folder')\nopen('folder/inner.txt', 'w').write('x')\nopen('secret.txt', 'w').write('s')\n{lock}"
    result = sandbox.run_python(code, capture=True)
    assert result.ok and result.snapshot is None and "could not snapshot the workspace" in result.detail, result
    after = sandbox.run(["ls", "-A"])
    assert after.ok and after.stdout == "" and not after.sandbox_replaced
