"""The MCP server: the app's tools, approvals and egress for any MCP client (a surface).

``server.py`` builds the official SDK's low-level server over the services (``calls.py``:
tools and calls, ``tasks.py``: a call as a task of the Tasks extension, ``pages.py``: the
site's pages as resources, ``paging.py``: ``fetch``'s ``start_index``); ``asgi.py`` mounts
the Streamable HTTP transport beside Django's ASGI application; ``stdio.py`` serves stdio
(``manage.py webfetch mcp``).  Nothing else in the app imports this package but the
management command that starts the stdio transport.
"""

from __future__ import annotations
