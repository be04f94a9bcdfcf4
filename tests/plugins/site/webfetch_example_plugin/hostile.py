"""Every family of system calls a hostile plugin would turn against its host, tried from
inside the plugin process (tests/plugins/test_containment.py, x86_64 numbers).

``everything(target, victim)``: ``target`` is the host process (scheduling, priority,
affinity, ``/proc``), ``victim`` a sacrificial process of the host's user in its own
process group (every route that would kill or stop it).  Destructive calls aim only at
the victim; calls on the host, on pid 1 and on -1 send signal 0 or read.  Each attempt
reports ``done`` or ``refused: <class> errno=N``; whether a ``done`` reached anything is
asserted on the host side.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import socket
import threading
import time
from typing import Any

from .probes import _sigio, _syscall, _try

KEPT: list[Any] = []

# x86_64 system call numbers.
NR = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "mount": 165,
    "umount2": 166,
    "chroot": 161,
    "pivot_root": 155,
    "unshare": 272,
    "setns": 308,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "bpf": 321,
    "perf_event_open": 298,
    "io_uring_setup": 425,
    "clock_settime": 227,
    "settimeofday": 164,
    "adjtimex": 159,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "kexec_load": 246,
    "userfaultfd": 323,
    "fanotify_init": 300,
    "pidfd_open": 434,
    "pidfd_send_signal": 424,
    "tgkill": 234,
    "rt_sigqueueinfo": 129,
    "shmget": 29,
    "mq_open": 240,
    "setuid": 105,
    "sched_setattr": 314,
    "ioprio_set": 251,
    "memfd_secret": 447,
    "open_tree": 428,
    "fsopen": 430,
    "name_to_handle_at": 303,
    "prctl": 157,
    "landlock_create_ruleset": 444,
    "landlock_restrict_self": 446,
    "seccomp": 317,
}

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNS = 0x00020000
_F_SETOWN_EX = 15


def _buffer(size: int) -> ctypes.Array[ctypes.c_char]:
    return ctypes.create_string_buffer(size)


def _signals(victim: int) -> dict[str, str]:
    group = os.getpgid(victim) if _visible(victim) else victim

    def setown_ex() -> None:
        read, write = os.pipe()
        try:
            owner = (ctypes.c_int * 2)(2, group)  # F_OWNER_PGRP
            import fcntl

            fcntl.fcntl(read, _F_SETOWN_EX, bytes(owner))
            fcntl.fcntl(read, 10, signal.SIGKILL)
            fcntl.fcntl(read, fcntl.F_SETFL, fcntl.fcntl(read, fcntl.F_GETFL) | os.O_ASYNC)
            os.write(write, b"x")
        finally:
            os.close(read)
            os.close(write)

    return {
        "kill_victim": _try(lambda: os.kill(victim, signal.SIGKILL)),
        "kill_victim_group": _try(lambda: os.killpg(victim, signal.SIGKILL)),
        "stop_victim": _try(lambda: os.kill(victim, signal.SIGSTOP)),
        "kill_pid_1": _try(lambda: os.kill(1 if os.getpid() != 1 else -1, 0)),
        "kill_every_process": _try(lambda: os.kill(-1, 0)),
        "tgkill_victim": _try(lambda: _syscall(NR["tgkill"], victim, victim, signal.SIGKILL)),
        "sigqueue_victim": _try(lambda: _syscall(NR["rt_sigqueueinfo"], victim, signal.SIGKILL, 0)),
        "pidfd_open_victim": _try(lambda: _syscall(NR["pidfd_open"], victim, 0)),
        "sigio_victim": _try(lambda: _sigio(victim, signal.SIGKILL)),
        "sigio_victim_group": _try(lambda: _sigio(-victim, signal.SIGKILL)),
        "sigio_owner_ex_group": _try(setown_ex),
    }


def _visible(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _scheduling(target: int) -> dict[str, str]:
    return {
        "sched_setscheduler": _try(
            lambda: os.sched_setscheduler(target, os.SCHED_IDLE, os.sched_param(0))
        ),
        "sched_setscheduler_self": _try(
            lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
        ),
        "sched_setattr": _try(lambda: _syscall(NR["sched_setattr"], target, 0, 0)),
        "setpriority_process": _try(lambda: os.setpriority(os.PRIO_PROCESS, target, 19)),
        "setpriority_group": _try(lambda: os.setpriority(os.PRIO_PGRP, target, 19)),
        "setpriority_user": _try(lambda: os.setpriority(os.PRIO_USER, 0, 19)),
        "sched_setaffinity": _try(lambda: os.sched_setaffinity(target, {0})),
        "ioprio_set": _try(lambda: _syscall(NR["ioprio_set"], 1, target, 3 << 13)),
    }


def _processes(victim: int, target: int) -> dict[str, str]:
    def read_proc(pid: int, name: str) -> None:
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            fh.read()

    buffer = _buffer(64)
    local = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 64)
    return {
        "ptrace_attach": _try(lambda: _syscall(NR["ptrace"], 16, victim, 0, 0)),
        "process_vm_readv": _try(
            lambda: _syscall(
                NR["process_vm_readv"],
                victim,
                ctypes.addressof(local),
                1,
                ctypes.addressof(local),
                1,
                0,
            )  # fmt: skip
        ),
        "proc_host_environ": _try(lambda: read_proc(target, "environ")),
        "proc_host_cmdline": _try(lambda: read_proc(target, "cmdline")),
        "proc_victim_mem": _try(lambda: read_proc(victim, "mem")),
        "fork": _try(lambda: os._exit(0) if os.fork() == 0 else None),
        "setuid_root": _try(lambda: _syscall(NR["setuid"], 0)),
    }


def _kernel() -> dict[str, str]:
    fstype = ctypes.c_char_p(b"tmpfs")
    where = ctypes.c_char_p(b"/tmp")
    timespec = (ctypes.c_long * 2)(0, 0)
    timex = _buffer(256)
    ctypes.c_uint.from_buffer(timex).value = 0x0002  # ADJ_FREQUENCY
    name = ctypes.c_char_p(b"plugin-was-here")
    params = _buffer(120)
    attr = _buffer(128)
    return {
        "mount": _try(
            lambda: _syscall(
                NR["mount"],
                ctypes.cast(fstype, ctypes.c_void_p).value or 0,
                ctypes.cast(where, ctypes.c_void_p).value or 0,
                ctypes.cast(fstype, ctypes.c_void_p).value or 0,
                0,
                0,
            )  # fmt: skip
        ),
        "umount": _try(
            lambda: _syscall(NR["umount2"], ctypes.cast(where, ctypes.c_void_p).value or 0, 2)
        ),
        "chroot": _try(lambda: os.chroot("/tmp")),
        "unshare_user": _try(lambda: _syscall(NR["unshare"], _CLONE_NEWUSER)),
        "unshare_mount": _try(lambda: _syscall(NR["unshare"], _CLONE_NEWNS)),
        "setns": _try(lambda: _setns()),
        "open_tree": _try(lambda: _syscall(NR["open_tree"], -100, 0, 0)),
        "fsopen": _try(
            lambda: _syscall(NR["fsopen"], ctypes.cast(fstype, ctypes.c_void_p).value or 0, 0)
        ),
        "keyctl": _try(lambda: _syscall(NR["keyctl"], 0, -4, 0)),  # GET_KEYRING_ID, user
        "add_key": _try(lambda: _syscall(NR["add_key"], 0, 0, 0, 0, -4)),
        "bpf": _try(lambda: _syscall(NR["bpf"], 0, ctypes.addressof(attr), 128)),
        "perf_event_open": _try(
            lambda: _syscall(NR["perf_event_open"], ctypes.addressof(attr), 0, -1, -1, 0)
        ),
        "io_uring_setup": _try(lambda: _syscall(NR["io_uring_setup"], 8, ctypes.addressof(params))),
        "userfaultfd": _try(lambda: _syscall(NR["userfaultfd"], 0)),
        "fanotify_init": _try(lambda: _syscall(NR["fanotify_init"], 0, 0)),
        "clock_settime": _try(lambda: _syscall(NR["clock_settime"], 0, ctypes.addressof(timespec))),
        "settimeofday": _try(lambda: _syscall(NR["settimeofday"], ctypes.addressof(timespec), 0)),
        "adjtimex": _try(lambda: _syscall(NR["adjtimex"], ctypes.addressof(timex))),
        "sethostname": _try(lambda: socket.sethostname("plugin-was-here")),
        "setdomainname": _try(
            lambda: _syscall(NR["setdomainname"], ctypes.cast(name, ctypes.c_void_p).value or 0, 4)
        ),
        "iopl": _try(lambda: _syscall(NR["iopl"], 3)),
        "ioperm": _try(lambda: _syscall(NR["ioperm"], 0x80, 1, 1)),
        "init_module": _try(lambda: _syscall(NR["init_module"], 0, 0, 0)),
        "kexec_load": _try(lambda: _syscall(NR["kexec_load"], 0, 0, 0, 0)),
        "name_to_handle_at": _try(lambda: _syscall(NR["name_to_handle_at"], -100, 0, 0, 0, 0)),
    }


def _setns() -> None:
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        _syscall(NR["setns"], fd, 0)
    finally:
        os.close(fd)


def _sockets(unix_path: str) -> dict[str, str]:
    def open_socket(family: int, kind: int, proto: int = 0) -> socket.socket:
        return socket.socket(family, kind, proto)

    def connect(family: int, address: Any) -> None:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(address)

    return {
        # socket() itself, past the audit layer: refused by the filter.
        "inet_socket_syscall": _try(lambda: _syscall(41, socket.AF_INET, socket.SOCK_STREAM, 0)),
        "inet6_socket_syscall": _try(lambda: _syscall(41, socket.AF_INET6, socket.SOCK_DGRAM, 0)),
        "unix_socket_syscall": _try(lambda: _syscall(41, socket.AF_UNIX, socket.SOCK_DGRAM, 0)),
        "inet_tcp_connect": _try(lambda: connect(socket.AF_INET, ("127.0.0.1", 80))),
        "inet6_tcp_connect": _try(lambda: connect(socket.AF_INET6, ("::1", 80))),
        "inet_udp": _try(lambda: open_socket(socket.AF_INET, socket.SOCK_DGRAM).close()),
        "unix_connect_host_path": _try(lambda: connect(socket.AF_UNIX, unix_path)),
        "unix_abstract": _try(lambda: connect(socket.AF_UNIX, "\0webfetch-host")),
        "raw_ip": _try(lambda: open_socket(socket.AF_INET, socket.SOCK_RAW, 6).close()),
        "packet": _try(lambda: open_socket(socket.AF_PACKET, socket.SOCK_RAW, 0x0300).close()),
        "netlink": _try(lambda: open_socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()),
        "socketpair_inet": _try(lambda: socket.socketpair(socket.AF_INET)),
    }


def _memory() -> dict[str, str]:
    size = 64 << 20

    def memfd() -> None:
        KEPT.append(os.memfd_create("held"))

    def shared() -> None:
        KEPT.append(mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS))

    def dev_shm() -> None:
        with open("/dev/shm/held", "wb") as fh:
            fh.write(b"\1" * size)

    def tmp_file() -> None:
        with open("held", "wb") as fh:  # its scratch directory, on its private /tmp
            for _ in range(size >> 20):
                fh.write(b"\1" * (1 << 20))

    def pipe_size() -> None:
        import fcntl

        read, write = os.pipe()
        KEPT.extend((read, write))
        fcntl.fcntl(write, 1031, 1 << 20)  # F_SETPIPE_SZ

    return {
        "memfd": _try(memfd),
        "memfd_secret": _try(lambda: _syscall(NR["memfd_secret"], 0)),
        "shared_anonymous": _try(shared),
        "dev_shm": _try(dev_shm),
        "tmp_file_64MiB": _try(tmp_file),
        "sysv_shm": _try(lambda: _syscall(NR["shmget"], 0, size, 0o1600)),
        "mq_open": _try(lambda: _syscall(NR["mq_open"], 0, 0o100, 0o600, 0)),
        "pipe_buffer_1MiB": _try(pipe_size),
    }


def _threads(count: int) -> str:
    started = 0
    stop = threading.Event()
    try:
        for _ in range(count):
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
    except (RuntimeError, OSError, MemoryError):
        pass
    finally:
        stop.set()
    time.sleep(0.2)
    return f"started {started}"


def _narrowing() -> dict[str, str]:
    """What the process could change about its own containment: its death signal, more
    Landlock layers or filters (kernel memory a pooled process keeps), a higher limit of
    queued signals, out-of-band data on a Unix socket (CVE-2025-38236's code)."""
    import resource

    def raise_sigpending() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_SIGPENDING)
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (hard + 1, hard + 1))

    def oob(receive: bool) -> None:
        a, b = socket.socketpair()
        try:
            a.send(b"in band")
            if receive:
                b.recv(1, socket.MSG_OOB)
            else:
                a.send(b"x", socket.MSG_OOB)
        finally:
            a.close()
            b.close()

    return {
        "prctl_clear_death_signal": _try(lambda: _syscall(NR["prctl"], 1, 0)),  # PDEATHSIG
        "landlock_create_ruleset": _try(lambda: _syscall(NR["landlock_create_ruleset"], 0, 0, 1)),
        "landlock_restrict_self": _try(lambda: _syscall(NR["landlock_restrict_self"], 0, 0)),
        "seccomp_add_filter": _try(lambda: _syscall(NR["seccomp"], 1, 0, 0)),
        "prctl_set_seccomp": _try(lambda: _syscall(NR["prctl"], 22, 2, 0)),
        "raise_sigpending": _try(raise_sigpending),
        "msg_oob_send": _try(lambda: oob(False)),
        "msg_oob_recv": _try(lambda: oob(True)),
    }


def everything(target: int, victim: int = 0, unix_path: str = "/nonexistent") -> dict[str, str]:
    found: dict[str, str] = {}
    found.update(_signals(victim or target))
    found.update(_scheduling(target))
    found.update(_processes(victim or target, target))
    found.update(_kernel())
    found.update(_sockets(unix_path))
    found.update(_memory())
    found.update(_narrowing())
    found["thread_bomb"] = _threads(5000)
    return found
