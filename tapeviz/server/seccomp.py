"""The seccomp filter hosted workers run under: a classic BPF program, built here with
`struct`, that bwrap installs (`--seccomp FD`) just before it starts the worker.

It refuses (EPERM) what a Python program never needs and an escape does: new namespaces
(unshare, setns, clone with a CLONE_NEW* flag), mounts, ptrace and reading other processes'
memory, kernel keyrings, BPF, perf, io_uring, module and kexec loading, and memory the
address-space limit cannot see (memfd_create, SysV shared memory). clone3 answers ENOSYS, so
that glibc falls back to clone, whose flags a filter can read. A foreign system-call ABI
(x32, i386 `int 0x80`) kills the process: its numbers would slip past the table.
"""
from __future__ import annotations

import errno
import platform
import struct
from typing import Optional

# name: (x86_64 number, aarch64 number)
DENIED = {
    "unshare": (272, 97), "setns": (308, 268),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "move_mount": (429, 429), "open_tree": (428, 428), "mount_setattr": (442, 442),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "kcmp": (312, 272), "pidfd_getfd": (438, 438),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "memfd_create": (319, 279), "memfd_secret": (447, 447), "shmget": (29, 194),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "acct": (163, 89),
    "quotactl": (179, 60), "sethostname": (170, 161), "setdomainname": (171, 162),
    "syslog": (103, 116), "lookup_dcookie": (212, 18), "fanotify_init": (300, 262),
    "vhangup": (153, 58), "settimeofday": (164, 170), "clock_settime": (227, 112),
    "adjtimex": (159, 171), "clock_adjtime": (305, 266),
}
CLONE = (56, 220)
CLONE3 = (435, 435)
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000
ARCHES = {"x86_64": (0, 0xC000003E), "amd64": (0, 0xC000003E),
          "aarch64": (1, 0xC00000B7), "arm64": (1, 0xC00000B7)}
X32_SYSCALL_BIT = 0x40000000

# classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h)
_LD_W_ABS, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16       # offsets in struct seccomp_data (arg0's low half: LE)


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: Optional[str] = None) -> Optional[bytes]:
    """The filter for this machine's architecture, or None when it has no table here."""
    arch = ARCHES.get((machine or platform.machine()).lower())
    if arch is None or struct.pack("=I", 1) != struct.pack("<I", 1):
        return None
    column, audit_arch = arch
    eperm = _ERRNO | errno.EPERM
    out = [_insn(_LD_W_ABS, _ARCH), _insn(_JEQ_K, audit_arch, 1, 0),
           _insn(_RET_K, _KILL_PROCESS), _insn(_LD_W_ABS, _NR)]
    if column == 0:                   # x86_64: the x32 ABI reuses numbers with a high bit
        out += [_insn(_JGE_K, X32_SYSCALL_BIT, 0, 1), _insn(_RET_K, _KILL_PROCESS)]
    for numbers in DENIED.values():
        out += [_insn(_JEQ_K, numbers[column], 0, 1), _insn(_RET_K, eperm)]
    out += [_insn(_JEQ_K, CLONE3[column], 0, 1), _insn(_RET_K, _ERRNO | errno.ENOSYS)]
    out += [_insn(_JEQ_K, CLONE[column], 0, 4), _insn(_LD_W_ABS, _ARG0),
            _insn(_JSET_K, CLONE_NAMESPACES, 0, 1), _insn(_RET_K, eperm),
            _insn(_RET_K, _ALLOW)]
    out.append(_insn(_RET_K, _ALLOW))
    return b"".join(out)
