#!/bin/sh
# The example project (a django CMS site with the assistant page) in one command:
#   sh example_project/run.sh               set up, then serve http://127.0.0.1:8000/ (ASGI,
#                                           uvicorn; runs advance in a background runner)
#                                           with the MCP server at /mcp (Streamable HTTP)
#   sh example_project/run.sh wsgi          the same with Django's runserver (WSGI: the
#                                           assistant page still streams, each stream ends
#                                           after 25 s and reconnects; no /mcp)
#   sh example_project/run.sh explain URL   every guard step for URL (group web), no connection
#   sh example_project/run.sh fetch URL     fetch URL through group web's live policy
#   sh example_project/run.sh worker        a Celery worker (with CELERY_BROKER_URL set)
#   sh example_project/run.sh manage CMD    any manage.py command, e.g.
#       sh example_project/run.sh manage webfetch token create --user editor --name laptop
#   sh example_project/run.sh mcp-call TOOL '{"arg": ...}'
#                                           call a tool over MCP as the user of the token in
#                                           WEBFETCH_MCP_TOKEN, wait for its approval, print
#                                           its result (example_project/mcp_call.py)
# Extra arguments go to the manage.py command (e.g. --group rag).
#
# Creates .venv with the package and its cms extra if missing; migrates only when a
# migration is unapplied.  Serving also creates the demo pages and two users:
#   admin / admin    superuser, approves tool calls  (DEMO_ADMIN_PASSWORD)
#   editor / editor  edits pages, asks the assistant (DEMO_EDITOR_PASSWORD)
# Self-approval is refused by default, so a call the editor starts waits for the admin.
#
# Scaled setup, no code change: DATABASE_URL=postgres://... and CELERY_BROKER_URL=redis://...
set -eu

# The commands the CLI prints to run (a trust prompt's confirmation, a check's hint) start
# the way this script was started (django_webfetch.invocation), not `python manage.py`:
# run from the checkout, that finds no manage.py, and `python` is not .venv's.
case "$0" in
    *[!A-Za-z0-9_./-]*) SELF="'$(printf '%s' "$0" | sed "s/'/'\\\\''/g")'" ;;
    *) SELF=$0 ;;
esac
WEBFETCH_MANAGE_COMMAND=${WEBFETCH_MANAGE_COMMAND:-"sh $SELF manage"}
export WEBFETCH_MANAGE_COMMAND

cd "$(dirname "$0")/.."
PY=.venv/bin/python
PYTHON=${PYTHON:-python3}
HOST=${DEMO_HOST:-127.0.0.1}
PORT=${DEMO_PORT:-8000}

if [ ! -x "$PY" ]; then
    echo "==> creating .venv"
    "$PYTHON" -m venv .venv
fi
EXTRAS=cms,assistant,asgi,mcp,metrics
if [ -n "${CELERY_BROKER_URL:-}" ]; then
    EXTRAS=cms,assistant,asgi,mcp,metrics,celery
fi
# Whether the packages are installed: found, not imported (importing them all took 1.6 s of
# CPU on every call).
installed() {
    "$PY" -c 'import sys, importlib.util as u; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))' \
        "$@" >/dev/null 2>&1
}
if ! installed django_webfetch cms djangocms_text pydantic_ai rest_framework httpx dns html5lib uvicorn prometheus_client mcp \
    || { [ -n "${CELERY_BROKER_URL:-}" ] && ! installed celery redis; } \
    || { [ -n "${DATABASE_URL:-}" ] && ! installed psycopg psycopg_pool; }; then
    echo "==> installing django-webfetch[$EXTRAS] into .venv"
    "$PY" -m pip install -q -e ".[$EXTRAS]" "djangocms-text>=0.8" "uvicorn>=0.30"
    if [ -n "${DATABASE_URL:-}" ]; then
        "$PY" -m pip install -q "psycopg[binary,pool]>=3.2"
    fi
fi

manage() { "$PY" example_project/manage.py "$@"; }

# Migrate only when needed.  On SQLite the next manage.py command checks and migrates in its
# own process first (example_project/manage.py, WEBFETCH_EXAMPLE_MIGRATE_FIRST): one start of
# Django instead of two.  On PostgreSQL, and before a Celery worker, `migrate --check` runs
# on its own first (it fails while a migration is unapplied): without the pool and with a 5 s
# connect timeout, so a database that cannot be reached is said so at once (not taken for an
# unapplied migration after the pool's timeouts).
WEBFETCH_EXAMPLE_MIGRATE_FIRST=1
if [ -n "${DATABASE_URL:-}" ] || [ "${1:-serve}" = worker ]; then
    WEBFETCH_EXAMPLE_MIGRATE_FIRST=0
    if ! CHECKED=$(WEBFETCH_EXAMPLE_DB_POOL=0 PGCONNECT_TIMEOUT=5 manage migrate --check 2>&1); then
        if printf '%s\n' "$CHECKED" | grep -q "OperationalError"; then
            echo "==> the database cannot be reached${DATABASE_URL:+ (DATABASE_URL)}:" >&2
            printf '%s\n' "$CHECKED" | grep "OperationalError" | tail -n 1 >&2
            exit 1
        fi
        echo "==> migrating the database"
        manage migrate --noinput -v 0
    fi
fi
export WEBFETCH_EXAMPLE_MIGRATE_FIRST

command=${1:-serve}
[ $# -gt 0 ] && shift
case "$command" in
    explain) exec "$PY" example_project/manage.py webfetch explain "$@" ;;
    fetch) exec "$PY" example_project/manage.py webfetch fetch "$@" ;;
    manage) exec "$PY" example_project/manage.py "$@" ;;
    mcp-call) exec "$PY" example_project/mcp_call.py "$@" ;;
    worker) exec "$PY" -m celery -A example_project.celery_app worker --loglevel INFO "$@" ;;
    serve|wsgi)
        manage demo_setup --domain "$HOST:$PORT"
        WEBFETCH_EXAMPLE_MIGRATE_FIRST=0  # done: the server's processes need not check again
        cat <<TEXT

==> The example django CMS site is ready: http://$HOST:$PORT/
    Log in at http://$HOST:$PORT/admin/ (then "View site" for the CMS toolbar) as
      editor / ${DEMO_EDITOR_PASSWORD:-editor}   asks the assistant (toolbar: Assistant)
      admin  / ${DEMO_ADMIN_PASSWORD:-admin}    approves the calls the editor starts
    The assistant page: http://$HOST:$PORT/assistant/
    MCP (ASGI only): http://$HOST:$PORT/mcp with a token from
      sh example_project/run.sh manage webfetch token create --user editor --name laptop
    and a tool called with it (WEBFETCH_MCP_TOKEN=<the token>, exported):
      sh example_project/run.sh mcp-call read_page '{"path": "/about/"}'
    Tool groups are created disabled; an admin enables "content" and "web" at
      http://$HOST:$PORT/admin/django_webfetch/toolgroup/ (the assistant page says which are off)
    For the operator (as admin): http://$HOST:$PORT/metrics and
      http://$HOST:$PORT/admin/django_webfetch/operationsoverview/
    Approval e-mails are printed on this console.

TEXT
        if [ -n "${CELERY_BROKER_URL:-}" ]; then
            cat <<TEXT
==> Scaled mode: runs and tool calls go to Celery (CELERY_BROKER_URL).  Nothing advances
    until a worker runs: start one in another terminal, with the same DATABASE_URL and
    CELERY_BROKER_URL:  sh example_project/run.sh worker

TEXT
        fi
        if [ "$command" = wsgi ]; then
            exec "$PY" example_project/manage.py runserver "$HOST:$PORT" "$@"
        fi
        # ASGI: Server-Sent Events for the assistant, MCP at /mcp; the background runner
        # starts with the server (example_project/asgi.py).  The MCP endpoint's session
        # manager runs in the ASGI lifespan.  On SIGTERM the open streams end (the pages
        # reconnect to the next server); whatever still runs after DEMO_GRACEFUL_SHUTDOWN
        # seconds (10) is cancelled.
        exec "$PY" -m uvicorn example_project.asgi:application \
            --host "$HOST" --port "$PORT" --lifespan on \
            --timeout-graceful-shutdown "${DEMO_GRACEFUL_SHUTDOWN:-10}" "$@"
        ;;
    *) echo "usage: sh example_project/run.sh [serve|wsgi|explain URL|fetch URL|worker|manage CMD|mcp-call TOOL JSON] [args...]" >&2; exit 2 ;;
esac
