"""Where the host's notice ``plugin_cpu_limit_unavailable`` is said: where it matters.

The host logs it (once per process, ``runtime.host.Worker.limit_cpu``) the first time the
kernel refuses it a plugin process's per-call CPU limit: a root host without
``CAP_SYS_RESOURCE``, as in most containers.  The registry's load starts a plugin process
too (to read an untrusted plugin's manifest), and the system checks of every management
command load the registry: said there, the notice reached the stderr of ``manage.py check``,
``migrate`` or ``shell``, where no plugin tool runs.  What a load logs of it is held
(:func:`held`) and said when a plugin's tool is about to run in its process
(:func:`release`, ``isolated.run_isolated``); ``webfetch plugin list`` says the limit's
absence itself (:func:`cpu_limit_available`)
(tests/plugins/test_cpu_limit_notice.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator

from .runtime.host import CPU_LIMIT_UNAVAILABLE

__all__ = ["CPU_LIMIT_UNAVAILABLE", "cpu_limit_available", "held", "release"]

logger = logging.getLogger("django_webfetch.plugins")

#: What ``webfetch plugin list`` says where :func:`cpu_limit_available` is false.
WITHOUT_CPU_LIMIT = (
    "plugin processes run without a per-call CPU limit in the kernel "
    f"({CPU_LIMIT_UNAVAILABLE}: this root process lacks CAP_SYS_RESOURCE, as in most "
    "containers); the host's own checks hold the CPU bound (docs/plugins.rst, 'Containment')"
)

_CAP_SYS_RESOURCE = 24
_local = threading.local()
_lock = threading.Lock()
_held: list[logging.LogRecord] = []


class _Hold(logging.Filter):
    """Holds the notice back while this thread is inside :func:`held`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(_local, "depth", 0) and CPU_LIMIT_UNAVAILABLE in record.getMessage():
            with _lock:
                _held.append(record)
            return False
        return True


logger.addFilter(_Hold())


@contextlib.contextmanager
def held() -> Iterator[None]:
    """While inside, this thread's ``plugin_cpu_limit_unavailable`` is held, not logged."""
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def release() -> None:
    """Log what :func:`held` held (the host says it once per process: at most one)."""
    with _lock:
        records = list(_held)
        _held.clear()
    for record in records:
        logger.handle(record)


def cpu_limit_available() -> bool:
    """The host may set a plugin process's CPU limit (``prlimit``): it runs as another
    user than root (its plugin processes are its own uid's), or holds
    ``CAP_SYS_RESOURCE``."""
    if os.geteuid() != 0:
        return True
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            found = dict(line.split(":", 1) for line in fh if ":" in line)
        return bool(int(found["CapEff"], 16) >> _CAP_SYS_RESOURCE & 1)
    except (OSError, KeyError, ValueError):
        return True  # not Linux, or not readable: the host finds out itself (and says so)
