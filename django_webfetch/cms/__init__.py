"""django CMS integration (opt-in app ``django_webfetch.cms``, the ``cms`` extra).

The assistant page for editors (``/assistant/``), the "Assistant" menu in the django CMS
toolbar with "Ask about this page" and the counter of calls waiting for approval, the
e-mail to approvers, and the content tools ``list_pages`` / ``read_page`` (group
``content``, no network).
"""

from __future__ import annotations
