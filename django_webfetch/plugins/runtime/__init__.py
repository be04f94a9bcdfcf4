"""The out-of-process plugin runtime (DESIGN.md §8, docs/plugins.rst).

``host`` (Django side) spawns and pools plugin processes, speaks the RPC and enforces the
limits; ``guest`` is what runs in the plugin process (seccomp, Landlock, then the plugin);
``protocol`` is the wire format both share.  This package imports neither on its own: the
guest must be importable without Django.
"""

from __future__ import annotations
