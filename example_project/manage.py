#!/usr/bin/env python
"""The example project's manage.py: ``python example_project/manage.py migrate``."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    # Make ``example_project`` and ``django_webfetch`` importable from a checkout, and keep
    # this folder itself off the path (its modules are ``example_project.*``).
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
