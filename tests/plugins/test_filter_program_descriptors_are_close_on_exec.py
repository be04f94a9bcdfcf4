"""The filter programs' descriptors are close-on-exec (docs/decisions/0063-a-host-keeps-the-
uids-it-verified.rst, amended in round 26): ``bubblewrap.program_fd`` makes each ``memfd``
with ``MFD_CLOEXEC``, so a program the site runs while a plugin process starts
(``subprocess.run(..., close_fds=False)``, ``os.system``, ``os.posix_spawn``: no Python fork
hook runs) inherits none; ``pass_fds`` makes it inheritable for bwrap alone.

History: issue 30, round 26, finding 8 (the memfd was made with flags ``0``, the only
inheritable descriptor of a plugin start).
"""

from __future__ import annotations

import os
import subprocess
import sys

from django_webfetch.plugins.runtime import bubblewrap


def test_the_filter_program_descriptors_are_not_inherited_by_a_program_the_site_runs() -> None:
    fd = bubblewrap.program_fd(b"\x00" * 8)
    try:
        assert not os.get_inheritable(fd)
        child = subprocess.run(
            [sys.executable, "-c", f"import os; print(os.readlink('/proc/self/fd/{fd}'))"],
            close_fds=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(fd)
    assert "webfetch-plugin-seccomp" not in child.stdout, (
        f"a program the site runs inherits the filter's memfd: {child.stdout.strip()}"
    )


def test_bwrap_reads_the_filter_program_passed_to_it() -> None:
    """``pass_fds`` still hands the close-on-exec descriptor to the program it names."""
    fd = bubblewrap.program_fd(b"program-bytes")
    try:
        child = subprocess.run(
            [sys.executable, "-c", f"import os; print(os.read({fd}, 64).decode())"],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        os.close(fd)
    assert child.stdout.strip() == "program-bytes"
