"""A third-party app that contributes an assistant tool to the group ``web`` (issue 9)."""
