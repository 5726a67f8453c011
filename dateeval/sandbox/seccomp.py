"""A seccomp filter (classic BPF) for sandboxed programs: no new namespaces, mounts, tracing or kernel keyrings.

bubblewrap loads it (``--seccomp FD``) just before the program's interpreter
starts. Namespaces are what a program would need to build a view of the
system other than the one the sandbox gives it; ``ptrace``, ``bpf``,
``perf_event_open``, ``userfaultfd``, ``io_uring`` (whose requests bypass
this filter) and the key syscalls are kernel surface no benchmark solution
needs; ``io_setup`` would hold AIO contexts, of which the whole host has
65,536 (``fs.aio-max-nr``), until the grade ends. Sockets open only in the
families the network namespace isolates (UNIX, IPv4, IPv6, netlink): an
``AF_VSOCK`` socket, for one, reaches the ports of programs graded beside
it. ``memfd_create``, ``memfd_secret`` and ``shmget`` make memory that no
per-process limit counts (a SysV segment outlives its mapping), so they are
refused too. Where no cgroup counts a program's memory, ``single_process``
also refuses new processes (threads stay allowed), so the per-process limit
is a limit on the whole program. ``clone3`` answers "not implemented", so
the C library falls back to ``clone``, whose flags a classic filter can read
(``clone3`` passes them in memory it cannot). Built here rather than with
libseccomp so that nothing beyond bubblewrap has to be installed.
"""

from __future__ import annotations

import errno
import platform
import struct

# struct sock_filter opcodes (linux/bpf_common.h) and seccomp return values (linux/seccomp.h).
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL, _JUMP_AT_LEAST, _JUMP_ANY_BIT = 0x15, 0x35, 0x45  # BPF_JMP | BPF_JEQ/BPF_JGE/BPF_JSET | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_NR, _ARCH, _FIRST_ARGUMENT = 0, 4, 16  # offsets in struct seccomp_data (the argument's low 32 bits, little-endian)
_NEW_NAMESPACES = 0x7E020080  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000
# Socket families a network namespace isolates: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK (socket and socketpair refuse others).
_ISOLATED_FAMILIES = (1, 2, 10, 16)

# Per architecture: the audit value of the ABI, clone and unshare (checked for namespace flags), socket and socketpair
# (checked for the family), the syscalls denied outright, and those that only create processes (denied in
# single-process mode; aarch64 has only clone).
_TABLES = {
    "x86_64": (
        0xC000003E,
        56,
        272,
        (41, 53),
        {
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "ptrace": 101,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsmount": 432,
            "memfd_create": 319,
            "shmget": 29,
            "io_setup": 206,
        },
        {"fork": 57, "vfork": 58},
    ),
    "aarch64": (
        0xC00000B7,
        220,
        97,
        (198, 199),
        {
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "ptrace": 117,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsmount": 432,
            "memfd_create": 279,
            "shmget": 194,
            "io_setup": 0,
        },
        {},
    ),
}
_SHARED = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "memfd_secret": 447}  # same on both
_CLONE3 = 435


def supported() -> bool:
    return platform.machine() in _TABLES


def program(single_process: bool = False) -> bytes:
    """The compiled filter for this machine's architecture (a sequence of ``struct sock_filter``).

    ``single_process``: ``clone`` is allowed only for threads (``CLONE_THREAD``), and ``fork``/``vfork`` are denied.
    """
    arch, clone, unshare, sockets, denied, forks = _TABLES[platform.machine()]
    denied = {**denied, **_SHARED, **(forks if single_process else {})}
    # Jump targets are resolved at the end: each conditional names the label it jumps to when true.
    code: list[tuple[int, int, str | None]] = [
        (_LOAD_WORD, _ARCH, None),
        (_JUMP_EQUAL, arch, "syscall"),
        (_RETURN, _KILL_PROCESS, None),  # another ABI (e.g. 32-bit calls): its numbers mean other syscalls
    ]
    labels = {"syscall": len(code)}
    code.append((_LOAD_WORD, _NR, None))
    if platform.machine() == "x86_64":
        code.append((_JUMP_AT_LEAST, _X32_BIT, "deny"))  # x32 calls share the x86-64 audit value
    code += [(_JUMP_EQUAL, _CLONE3, "not_implemented"), (_JUMP_EQUAL, clone, "clone" if single_process else "flags")]
    code.append((_JUMP_EQUAL, unshare, "flags"))
    code += [(_JUMP_EQUAL, number, "family") for number in sockets]
    code += [(_JUMP_EQUAL, number, "deny") for number in denied.values()]
    code.append((_RETURN, _ALLOW, None))
    if single_process:  # a thread, and no new namespace
        labels["clone"] = len(code)
        code += [
            (_LOAD_WORD, _FIRST_ARGUMENT, None),
            (_JUMP_ANY_BIT, _NEW_NAMESPACES, "deny"),
            (_JUMP_ANY_BIT, _CLONE_THREAD, "allow"),
            (_RETURN, _ERRNO | errno.EPERM, None),
        ]
    labels["family"] = len(code)
    code.append((_LOAD_WORD, _FIRST_ARGUMENT, None))
    code += [(_JUMP_EQUAL, family, "allow") for family in _ISOLATED_FAMILIES]
    code.append((_RETURN, _ERRNO | errno.EPERM, None))
    labels["flags"] = len(code)
    code += [(_LOAD_WORD, _FIRST_ARGUMENT, None), (_JUMP_ANY_BIT, _NEW_NAMESPACES, "deny")]
    labels["allow"] = len(code)
    code.append((_RETURN, _ALLOW, None))
    labels["deny"] = len(code)
    code.append((_RETURN, _ERRNO | errno.EPERM, None))
    labels["not_implemented"] = len(code)
    code.append((_RETURN, _ERRNO | errno.ENOSYS, None))
    compiled = b""
    for index, (opcode, value, target) in enumerate(code):
        jump = 0 if target is None else labels[target] - index - 1
        compiled += struct.pack("=HBBI", opcode, jump, 0, value)
    return compiled
