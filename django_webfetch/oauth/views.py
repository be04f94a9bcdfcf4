"""The authorization server's pages: consent (django-oauth-toolkit's view with our page and
rules) and the user's *Connected apps*."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseRedirect,
    JsonResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.clickjacking import xframe_options_deny
from oauth2_provider.models import get_application_model
from oauth2_provider.views import AuthorizationView as _AuthorizationView
from oauth2_provider.views import TokenView as _TokenView

from django_webfetch.conf import conf
from django_webfetch.models import AccessToken, TokenEvent
from django_webfetch.tools.display import visible_name, visible_text
from django_webfetch.tools.registry import tools_for_user

from .cimd import last_refusal, on_behalf_of, rate_refusal
from .grants import record
from .validator import GRANT_TYPES

__all__ = ["AuthorizationView", "ConnectionsView", "TokenView"]


def _resource() -> str:
    resource = conf.WEBFETCH_OAUTH_RESOURCE
    if resource is None:
        raise Http404("OAuth is not enabled (WEBFETCH_OAUTH_RESOURCE).")
    return resource


def _is_ours(values: list[str]) -> bool:
    resource = _resource()
    return bool(values) and all(v.rstrip("/") == resource for v in values)


def _not_framed(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """No other page may frame this one (clickjacking): ``X-Frame-Options: DENY`` and a
    ``frame-ancestors 'none'`` policy, whatever middleware the project has."""

    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        csp = response.headers.get("Content-Security-Policy", "")
        if "frame-ancestors" not in csp:
            joined = f"{csp.rstrip().rstrip(';')}; " if csp.strip() else ""
            response.headers["Content-Security-Policy"] = joined + "frame-ancestors 'none'"
        return response

    return xframe_options_deny(wrapped)


def _is_s256(data: Any) -> bool:
    """RFC 7636 with ``S256`` only (OAuth 2.1): a challenge of 43..128 characters."""
    challenge = data.get("code_challenge") or ""
    return data.get("code_challenge_method") == "S256" and 43 <= len(challenge) <= 128


@method_decorator(_not_framed, name="dispatch")
class AuthorizationView(_AuthorizationView):  # type: ignore[misc]
    """The consent page: names the client (from its verified metadata), the user signed in
    and the tools the client will be offered.  A request for any resource but this site's
    MCP endpoint is refused (``invalid_target``).  A client's metadata document is fetched
    here only, on behalf of the signed-in user (``cimd.on_behalf_of``); the page cannot be
    framed."""

    template_name = "django_webfetch/oauth/authorize.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with on_behalf_of(request.user):
            return super().dispatch(request, *args, **kwargs)  # type: ignore[no-any-return]

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not _is_ours(request.GET.getlist("resource")):
            return self._wrong_resource(request)
        if not _is_s256(request.GET):
            return self._refuse(request, "invalid_request", "PKCE with S256 is required.")
        return super().get(request, *args, **kwargs)  # type: ignore[no-any-return]

    def _refuse(self, request: HttpRequest, error: str, description: str) -> HttpResponse:
        context = {"error": {"error": error, "description": description}, "resource": _resource()}
        return render(request, self.template_name, context, status=400)

    def _wrong_resource(self, request: HttpRequest) -> HttpResponse:
        return self._refuse(
            request, "invalid_target", "This site issues tokens for its MCP endpoint only."
        )

    def error_response(self, error: Any, application: Any, **kwargs: Any) -> HttpResponse:
        # An unknown client may be one whose metadata document was refused: say why (a
        # reason code, never the document's or the server's text).
        client_id = self.request.GET.get("client_id", "")
        if application is None and client_id:
            kwargs["client_refusal"] = last_refusal(client_id) or rate_refusal(self.request.user)
        kwargs.setdefault("resource", _resource())
        return super().error_response(error, application, **kwargs)  # type: ignore[no-any-return]

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        application = context.get("application")
        context["resource"] = _resource()
        if application is not None:
            client_id = application.client_id
            source = getattr(application, "registration_source", "")
            context["client_host"] = urlsplit(client_id).hostname if "://" in client_id else ""
            context["client_verified"] = source == "cimd"
            # A tool's name and description are a plugin author's text: bidirectional
            # overrides and invisible characters would make the list read otherwise than
            # it is (shown escaped, as on every approval surface).
            context["offered_tools"] = [
                {"name": visible_name(tool.name), "description": visible_text(tool.description)}
                for tool in tools_for_user(self.request.user)
            ]
        return context

    def form_valid(self, form: Any) -> HttpResponse:
        resource = (form.cleaned_data.get("resource") or "").split()
        if not _is_ours(resource):
            return self._wrong_resource(self.request)
        if not _is_s256(form.cleaned_data):
            return self._refuse(self.request, "invalid_request", "PKCE with S256 is required.")
        client_id = form.cleaned_data.get("client_id") or ""
        application = get_application_model().objects.filter(client_id=client_id).first()
        # An approval issues the grant when the toolkit saves the code, after it validated
        # the whole request (``validator.OAuth2Validator.save_authorization_code``).
        if application is not None and not form.cleaned_data.get("allow"):
            record(
                TokenEvent.Action.DECLINED,
                user_id=self.request.user.pk,
                client_id=client_id,
                by=self.request.user.get_username(),
            )
        return super().form_valid(form)  # type: ignore[no-any-return]


class TokenView(_TokenView):  # type: ignore[misc]
    """The token endpoint: the authorization code and refresh token grants only; any other
    ``grant_type`` is answered ``unsupported_grant_type`` before the toolkit reads it."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.POST.get("grant_type") not in GRANT_TYPES:
            return JsonResponse(
                {
                    "error": "unsupported_grant_type",
                    "error_description": "Only authorization_code and refresh_token.",
                },
                status=400,
                headers={"Cache-Control": "no-store"},
            )
        return super().post(request, *args, **kwargs)  # type: ignore[no-any-return]


@method_decorator(_not_framed, name="dispatch")
class ConnectionsView(LoginRequiredMixin, View):
    """*Connected apps*: the signed-in user's live OAuth grants and personal tokens, each
    with a button that revokes it; the page cannot be framed."""

    template_name = "django_webfetch/oauth/connections.html"

    def _rows(self, request: HttpRequest) -> Any:
        user_id: Any = request.user.pk
        return AccessToken.objects.live().filter(user_id=user_id).order_by("-created")

    def get(self, request: HttpRequest) -> HttpResponse:
        return render(request, self.template_name, {"tokens": self._rows(request)})

    def post(self, request: HttpRequest) -> HttpResponse:
        token_id = request.POST.get("revoke", "")
        if token_id.isdigit():
            self._rows(request).filter(pk=int(token_id)).revoke(by=request.user)
        return HttpResponseRedirect(reverse("oauth2_provider:webfetch-connections"))
