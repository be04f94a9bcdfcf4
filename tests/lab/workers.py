"""What each xdist worker of the suite needs of its own (tests/run.sh runs the suite on
several workers, each in its own lab namespace: tests/lab/worker-python).

* A Redis server of its own on a Unix socket in its lab directory: the destination slots,
  plugin budgets and Celery queues keep global keys, which two workers must not share.
* A private copy of every directory a test writes at a fixed path (the example plugin's
  ``state/``, read by the plugin's sandboxed process too): the worker's mount namespace
  (tests/lab/worker-python) gets an empty directory of its own mounted over it.
* Coverage measures the worker (``COVERAGE_PROCESS_START``, set by tests/run.sh for the
  worker's interpreter only) and never the processes its tests start, as in a serial run.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import time
from typing import Any

__all__ = ["configure_worker", "redis_command", "save_coverage", "worker_id"]


_WORKER: str | None = None


def worker_id() -> str | None:
    """``gw0``, ``gw1``... in an xdist worker; ``None`` in a serial run or the controller
    (and in a pytest run a test starts from a worker: it inherits the environment)."""
    return _WORKER


def configure_worker(config: Any, lab_directory: str) -> None:
    global _WORKER
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    _WORKER = str(workerinput.get("workerid", "gw"))
    # The worker itself is measured; the processes its tests start are not.
    os.environ.pop("COVERAGE_PROCESS_START", None)
    if os.environ.get("WEBFETCH_TEST_REDIS_URL"):
        os.environ["WEBFETCH_TEST_REDIS_URL"] = _own_redis(lab_directory)
    for shared in _WRITTEN_AT_FIXED_PATHS:
        _private_copy(shared, lab_directory)


#: Directories tests write at a fixed path (relative to the repository).
_WRITTEN_AT_FIXED_PATHS = ("tests/plugins/site/webfetch_example_plugin/state",)
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _private_copy(relative: str, lab_directory: str) -> None:
    from .netns import MS_BIND, _libc, _mount

    target = os.path.join(_ROOT, relative)
    os.makedirs(target, exist_ok=True)
    private = os.path.join(lab_directory, "private", relative.replace("/", "_"))
    os.makedirs(private, exist_ok=True)
    _mount(_libc(), private, target, None, MS_BIND)


def redis_command(binary: str, socket_path: str, folder: str) -> list[str]:
    """A private, throwaway Redis on a Unix socket (no TCP, no persistence)."""
    return [
        binary,
        *("--port", "0", "--unixsocket", socket_path, "--unixsocketperm", "700"),
        *("--save", "", "--appendonly", "no", "--dir", folder),
        *("--logfile", os.path.join(folder, "redis.log")),
    ]


def _own_redis(directory: str) -> str:
    binary = shutil.which("redis-server")
    if binary is None:  # pragma: no cover - tests/run.sh installs it
        raise RuntimeError("redis-server is not installed (tests/run.sh installs it)")
    folder = os.path.join(directory, "redis")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "redis.sock")
    process = subprocess.Popen(
        redis_command(binary, path, folder),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stop() -> None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
            process.kill()

    atexit.register(stop)
    # Redis creates its socket within milliseconds; a server that exits is a failure.
    for _ in range(1000):
        if os.path.exists(path) or process.poll() is not None:
            break
        time.sleep(0.01)
    if not os.path.exists(path):
        raise RuntimeError(f"the worker's redis-server did not start (exit {process.poll()})")
    return f"unix://{path}"


def save_coverage() -> None:
    """Write the worker's coverage data now: execnet ends a worker with ``os._exit``, which
    skips the ``atexit`` hook coverage would save it in."""
    if worker_id() is None:
        return
    try:
        import coverage
    except ImportError:  # pragma: no cover - coverage is in the test group
        return
    current = coverage.Coverage.current()
    if current is not None:
        current.stop()
        current.save()
