"""The walls a hosted worker forked from the sandboxed zygote enters before any user code:
its own pid, mount, IPC, network, UTS and cgroup namespaces, a private working directory,
/dev/shm,
/dev/pts and /proc, its memory cgroup, a fresh unprivileged uid, no_new_privs and the
seccomp filter. The zygote runs inside bwrap (read-only system, no network) as root and
without the filter, because making these walls needs unshare and mount, which the filter
refuses; each job's process gets the filter last, after it gave up root.

`enter` runs in the process the zygote forked and returns only in the job's process. Three
processes make one job: the forked one (in the zygote's namespaces: it reports the job's
exit to the zygote), pid 1 of the new pid namespace (root; it reaps orphans, and its exit
ends everything in the namespace), and the job's process (pid 2), which is not pid 1 so
that signals it sends itself behave as in a plain run.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 4, 22, 2
PROBE_UID = 65534                       # nobody: the zygote's check at start runs as it
SHM_BYTES = 64 * 2**20                  # as bwrap gives a spawned worker's /dev/shm
# What bwrap's --proc keeps read-only; a fresh proc mount would make them writable again.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")

_libc = ctypes.CDLL(None, use_errno=True)


class WallError(OSError):
    """A wall could not be built: the job must not run."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise WallError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype, flags: int, data=None) -> None:
    _check(_libc.mount(source.encode(), target.encode(),
                       fstype.encode() if fstype else None, flags,
                       data.encode() if data else None), f"mount {target}")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(program: bytes) -> None:
    """PR_SET_SECCOMP on this (single-threaded) process; every thread started later and
    every child inherit it. no_new_privs must be set first."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
           "seccomp filter")


def _loopback_up() -> None:
    """A new network namespace's `lo` starts down; bwrap brings it up, so this does too
    (a program may talk to itself over 127.0.0.1, never to another job)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 0x1 | 0x40))  # UP|RUNNING


def _mounts(workdir: str, disk_bytes: int) -> None:
    """In the new mount namespace, from pid 1 of the new pid namespace (so /proc is its)."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE)     # nothing propagates to the zygote's
    _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={int(disk_bytes)},mode=1777")
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={SHM_BYTES},mode=1777")
    _mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
           "newinstance,ptmxmode=0666,mode=620")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_READ_ONLY:
        path = f"/proc/{name}"
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(path, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID
                   | MS_NODEV | MS_NOEXEC)


def _what_the_import_left(workdir: str, most: int = 64, most_bytes: int = 1 << 16) -> list:
    """The small tree TensorFlow's import made in the zygote's working directory, its HOME
    (~/.keras): read before the job's own tmpfs hides it, so the job finds it as a plain
    run finds it after `import tensorflow`."""
    items, size = [], 0
    for folder, dirs, files in os.walk(workdir):
        for name in dirs:
            items.append((os.path.relpath(os.path.join(folder, name), workdir), None))
        for name in files:
            path = os.path.join(folder, name)
            try:
                data = open(path, "rb").read(most_bytes - size + 1)
            except OSError:
                continue
            size += len(data)
            items.append((os.path.relpath(path, workdir), data))
        if len(items) > most or size > most_bytes:
            return []          # not what an import leaves: the job starts empty instead
    return items


def _lay_out(workdir: str, items: list, uid: int) -> None:
    for relative, data in items:
        path = os.path.join(workdir, relative)
        if data is None:
            os.makedirs(path, exist_ok=True)
        else:
            with open(path, "wb") as f:
                f.write(data)
        os.chown(path, uid, uid, follow_symlinks=False)


def _drop_to(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)          # from root: every capability goes too
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != uid:
        raise WallError(0, "the uid did not change")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")


def _wait_exit_code(pid: int) -> int:
    """The exit code of `pid` as a shell reports it (128 + signal when killed)."""
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _init(job_pid: int) -> None:
    """Pid 1 of the job's namespace: reap whatever is orphaned to it, and exit with the
    job's own code when the job's process ends (the kernel then kills the rest)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == job_pid:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)


def enter(uid: int, seccomp_program: bytes, disk_bytes: int, workdir: str,
          cgroup_fd: int = -1) -> None:
    """Build the walls around this forked process; returns in the job's process only (the
    other two exit here with its code). Raises WallError before any user code could run."""
    if cgroup_fd >= 0:
        os.write(cgroup_fd, b"0")          # this process, and so all it starts
        os.close(cgroup_fd)
    if not seccomp_program:
        raise WallError(0, "no seccomp filter for this machine")
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS
                         | CLONE_NEWPID | CLONE_NEWCGROUP), "unshare")
    init = os.fork()                       # pid 1 of the new pid namespace
    if init:
        os._exit(_wait_exit_code(init))
    code = 120
    try:
        left = _what_the_import_left(workdir)
        _mounts(workdir, disk_bytes)
        _lay_out(workdir, left, uid)
        _loopback_up()
        job = os.fork()
        if job == 0:
            code = 121
            os.setsid()                    # its own group: killpg(0) reaches it, not pid 1
            os.chdir(workdir)
            _drop_to(uid)
            install_seccomp(seccomp_program)
            return
    except BaseException:                  # noqa: BLE001 - no wall, no job
        os._exit(code)
    _init(job)


def held() -> bool:
    """In a job's process after `enter`: the walls are what they should be (the zygote's
    check at start): pid 2 of its own namespace, not root, new namespaces refused."""
    ctypes.set_errno(0)
    refused = _libc.unshare(CLONE_NEWNS) != 0 and ctypes.get_errno() == 1     # EPERM
    return os.getpid() == 2 and os.getuid() != 0 and os.geteuid() != 0 and refused
