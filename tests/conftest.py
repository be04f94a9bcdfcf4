from __future__ import annotations

from tests.lab import tracefix

tracefix.install()  # before any lab thread starts (see the module)

# The lab plugin moves the whole test process into a private network namespace before any
# test runs (see tests/lab/); the fixtures plugin holds the Django model factories.
pytest_plugins = ["tests.lab.plugin", "tests.fixtures"]
