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
