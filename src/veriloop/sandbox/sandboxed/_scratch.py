"""The writable mounts and what a run can leave in the sandbox besides files: emptied after every run
(part of the server's script)."""

import ctypes
import errno
import os
import shutil

from veriloop.sandbox.sandboxed._kernel import libc  # sandbox: strip

WORKSPACE = "/workspace"
SCRATCH_MODES = {"/workspace": 0o755, "/tmp": 0o1777, "/dev/shm": 0o1777}
IPC_RMID = 0
IPC_DENIED = False  # set at start: True when the seccomp filter denies creating SysV IPC objects
KEPT_MOUNTS, KEPT_PARENTS = frozenset(), frozenset()  # set at start: mounts inside the scratch mounts
EMPTIED = {}  # mount -> its state when last emptied (``empty_state``), for the mounts that can be left unread

IPC_TABLES = (
    ("/proc/sysvipc/shm", lambda ident: libc.shmctl(ident, IPC_RMID, None)),
    ("/proc/sysvipc/msg", lambda ident: libc.msgctl(ident, IPC_RMID, None)),
    ("/proc/sysvipc/sem", lambda ident: libc.semctl(ident, 0, IPC_RMID)),
)


def ipc_is_denied():
    """Whether the seccomp filter denies SysV IPC; then no run can leave objects behind."""
    ident = libc.shmget(0, 4096, 0o600)  # IPC_PRIVATE
    if ident >= 0:
        libc.shmctl(ident, IPC_RMID, None)
        return False
    return ctypes.get_errno() == errno.EPERM


def remove_ipc_objects():
    for table, remove in IPC_TABLES:
        fd = os.open(table, os.O_RDONLY)
        try:
            rows = os.read(fd, 1 << 20).split(b"\n")[1:]
        finally:
            os.close(fd)
        for row in rows:
            if row.strip():
                remove(int(row.split()[1]))


def unlock_tree(path):
    """Give the owner full access to every directory below ``path`` (a run may have locked them)."""
    os.chmod(path, 0o700)
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            child = os.path.join(root, name)
            if not os.path.islink(child):
                os.chmod(child, 0o700)


def mounts_below(tops):
    """Mount points strictly inside the directories ``tops`` (read-only binds of an interpreter
    or environment kept under /tmp, say) and every directory on the way to them."""
    with open("/proc/self/mountinfo", "rb") as handle:
        points = [line.split()[4].decode() for line in handle]
    kept, on_the_way = set(), set()
    for point in points:
        for top in tops:
            if point.startswith(top + "/"):
                kept.add(point)
                parent = os.path.dirname(point)
                while parent != top:
                    on_the_way.add(parent)
                    parent = os.path.dirname(parent)
    return frozenset(kept), frozenset(on_the_way - kept)


def empty_directory(path, mode):
    """Remove everything in ``path`` but the mounts below it, and give it ``mode`` again."""
    os.chmod(path, 0o700)
    for entry in os.scandir(path):
        if entry.path in KEPT_MOUNTS:
            continue
        if entry.path in KEPT_PARENTS and entry.is_dir(follow_symlinks=False):
            empty_directory(entry.path, 0o755)
        elif entry.is_dir(follow_symlinks=False):
            try:
                shutil.rmtree(entry.path)
            except OSError:
                unlock_tree(entry.path)
                shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    os.chmod(path, mode)


def empty_state(mount):
    """What no run can leave anything in ``mount`` (an empty tmpfs) without changing: the mode
    and owner of its root, and its count of free inodes, since every entry takes one (file,
    directory, link, hard link, socket, FIFO, whiteout) and all of a run's processes are gone.
    None where that does not hold: a mount with mounts kept inside it (an entry there can be
    renamed at no cost in inodes), or a tmpfs that counts no inodes."""
    if any(kept.startswith(mount + "/") for kept in KEPT_MOUNTS):
        return None
    counts = os.statvfs(mount)
    if not counts.f_files:
        return None
    root = os.stat(mount)
    return root.st_mode, root.st_uid, root.st_gid, counts.f_ffree


def empty_mounts():
    """Empty each mount, or only look at it (two calls) when it is still as it was emptied."""
    for mount, mode in SCRATCH_MODES.items():
        emptied = EMPTIED.get(mount)
        if emptied is not None and empty_state(mount) == emptied:
            continue
        empty_directory(mount, mode)
        EMPTIED[mount] = empty_state(mount)


def clean_scratch():
    """Remove what the run left (SysV IPC objects, the mounts' contents), after its answer has
    gone (its snapshot is read from the workspace as it is sent). A sandbox that cannot be
    cleaned ends here: the host finds it gone before the next job and starts a fresh one."""
    try:
        if not IPC_DENIED:
            remove_ipc_objects()
        empty_mounts()
    except Exception:
        os._exit(3)


def prepare_scratch():
    """At start, before the template is forked: learn what the cleanup must spare, and give the
    mounts the modes every run finds."""
    global IPC_DENIED, KEPT_MOUNTS, KEPT_PARENTS
    IPC_DENIED = ipc_is_denied()
    KEPT_MOUNTS, KEPT_PARENTS = mounts_below(tuple(SCRATCH_MODES))
    for mount, mode in SCRATCH_MODES.items():
        os.chmod(mount, mode)  # bubblewrap makes them 0755; the first run gets what every later one does
