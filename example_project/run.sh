#!/bin/sh
# The example project in one command:
#   sh example_project/run.sh               migrate, create the demo admin, serve :8000/admin/
#   sh example_project/run.sh explain URL   every guard step for URL (group web), no connection
#   sh example_project/run.sh fetch URL     fetch URL through group web's live policy
# Extra arguments go to the manage.py command (e.g. --group rag).
#
# Creates .venv with the package if it is missing.  The demo admin is admin / admin
# (override with DJANGO_SUPERUSER_USERNAME / DJANGO_SUPERUSER_PASSWORD).
set -eu

cd "$(dirname "$0")/.."
PY=.venv/bin/python
PYTHON=${PYTHON:-python3}

if [ ! -x "$PY" ]; then
    echo "==> creating .venv"
    "$PYTHON" -m venv .venv
fi
if ! "$PY" -c 'import django_webfetch, django, rest_framework, jsonschema, httpx, dns, html5lib' \
        >/dev/null 2>&1; then
    echo "==> installing django-webfetch into .venv"
    "$PY" -m pip install -q -e . jsonschema
fi

manage() { "$PY" example_project/manage.py "$@"; }

manage migrate --noinput -v 0

command=${1:-serve}
[ $# -gt 0 ] && shift
case "$command" in
    explain) exec "$PY" example_project/manage.py webfetch explain "$@" ;;
    fetch) exec "$PY" example_project/manage.py webfetch fetch "$@" ;;
    serve)
        export DJANGO_SUPERUSER_USERNAME="${DJANGO_SUPERUSER_USERNAME:-admin}"
        export DJANGO_SUPERUSER_PASSWORD="${DJANGO_SUPERUSER_PASSWORD:-admin}"
        manage shell -c "
from django.contrib.auth import get_user_model
import os
User = get_user_model()
name = os.environ['DJANGO_SUPERUSER_USERNAME']
if not User.objects.filter(username=name).exists():
    User.objects.create_superuser(name, '', os.environ['DJANGO_SUPERUSER_PASSWORD'])
    print('==> created the demo admin', name)
"
        echo "==> tool groups are created disabled; enable one in the admin"
        echo "==> http://127.0.0.1:8000/admin/"
        exec "$PY" example_project/manage.py runserver 127.0.0.1:8000 "$@"
        ;;
    *) echo "usage: sh example_project/run.sh [serve|explain URL|fetch URL] [args...]" >&2; exit 2 ;;
esac
