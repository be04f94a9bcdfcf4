from __future__ import annotations

from django.apps import AppConfig


class ThirdPartyConfig(AppConfig):
    name = "tests.thirdparty"
    label = "webfetch_thirdparty"
    #: Discovered by django_webfetch's tool registry.
    webfetch_tools = ("tests.thirdparty.tools.PageTitle", "tests.thirdparty.tools.AdminOnly")
