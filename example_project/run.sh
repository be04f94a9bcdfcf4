#!/bin/sh
# The project's main job on its embedded default (SQLite, Celery in-process), set up from
# nothing on a fresh machine:
#
#   sh example_project/run.sh                      # migrate + demo data + dev server on :8000
#   sh example_project/run.sh explain URL          # every guard step for URL, no connection
#   sh example_project/run.sh fetch URL            # guarded fetch of one page (needs a network)
#
# Everything it needs is installed into .venv at the repository root on first use.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)

if [ ! -x "$ROOT/.venv/bin/python" ] || ! "$ROOT/.venv/bin/python" -c "import django_webfetch, django, httpx, dns, html5lib" 2>/dev/null; then
    echo "setting up .venv (first run)..." >&2
    python3 -m venv "$ROOT/.venv"
    "$ROOT/.venv/bin/python" -m pip install -q -U pip
    "$ROOT/.venv/bin/python" -m pip install -q -e "$ROOT[celery]"
fi
PY="$ROOT/.venv/bin/python"

case "${1:-serve}" in
    explain|fetch)
        exec "$PY" -m django_webfetch.net "$@"
        ;;
    serve)
        "$PY" example_project/manage.py migrate --noinput
        "$PY" example_project/manage.py webfetch_demo
        exec "$PY" example_project/manage.py runserver "${2:-127.0.0.1:8000}"
        ;;
    *)
        exec "$PY" example_project/manage.py "$@"
        ;;
esac
