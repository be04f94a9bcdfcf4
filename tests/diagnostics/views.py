"""Views of the error-analysis tests: one that raises, one that redirects off-site."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect


def compute_total(items: list[int]) -> float:
    count = len(items)
    # The line below raises ZeroDivisionError for an empty cart.
    return sum(items) / count


def boom(request: HttpRequest) -> HttpResponse:
    total = compute_total([])
    return HttpResponse(f"total {total}")


def fine(request: HttpRequest) -> HttpResponse:
    return HttpResponse("<html><body><h1>All good</h1><script>hidden()</script></body></html>")


def away(request: HttpRequest) -> HttpResponse:
    return HttpResponseRedirect("http://docs.lab.example/landing?token=abc")


def leaky(request: HttpRequest) -> HttpResponse:
    """A page that shows what a debug page or a careless template can show (review11)."""
    return HttpResponse(
        "<html><body><h1>OperationalError</h1>"
        "<p>could not connect: postgres://app:hunter2pass@db.internal/shop</p>"
        "<pre>SECRET_KEY = 'abc-very-secret-key'</pre></body></html>"
    )


def away_with_code(request: HttpRequest) -> HttpResponse:
    return HttpResponseRedirect("/login/callback?code=oauth-code-123&state=st4te&next=/cart/")
