#!/usr/bin/env bash
# Runs idpool end to end on a fresh Debian 12 machine:
#
#   scripts/quickstart.sh         install what is missing, build, start
#                                 Redis + MariaDB + idpoold, pop a few IDs
#   scripts/quickstart.sh stop    stop idpoold and the servers it started
#   scripts/quickstart.sh clean   stop, then delete run/ (data and logs)
#
# Everything runs from run/ in the repository (git-ignored), on free
# loopback ports; system services are not touched. Safe to run again: it
# rebuilds, keeps the data and restarts idpoold. To use your own servers
# instead, set both IDPOOL_REDIS_URL and IDPOOL_MYSQL_URL (the schema and
# two demo rows are then created in that database). Passwords in them may
# be percent-encoded (as idpoold reads them); they reach idpoold through its
# environment, never its command line, and are never printed.
#
# For tests: QUICKSTART_RUN (instead of run/), QUICKSTART_BUILD (instead of
# build/), QUICKSTART_NO_BUILD=1 (use that build as it is, install nothing).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${QUICKSTART_RUN:-$ROOT/run}
BUILD=${QUICKSTART_BUILD:-$ROOT/build}
SERVERS=$ROOT/scripts/servers.sh
PIDFILE=$RUN/idpoold.pid
LOG=$RUN/idpoold.log
WAIT_S=${QUICKSTART_WAIT_S:-20}

say() {
    if [[ -t 2 ]]; then
        printf '\033[1m==> %s\033[0m\n' "$*" >&2
    else
        printf '==> %s\n' "$*" >&2
    fi
}
die() {
    printf 'quickstart: error: %s\n' "$*" >&2
    exit 1
}

# ------------------------------------------------------------- packages ---

install_packages() {
    # what running needs (not the tests' tools), no service started or enabled
    "$ROOT/scripts/apt-install.sh" "$ROOT/scripts/packages.txt"
}

# -------------------------------------------------------------- servers ---

# redact URL: the URL with its password replaced by ***, for messages.
redact() { sed -E 's#^([A-Za-z][A-Za-z0-9+.-]*://[^:@/]*):.*@#\1:***@#' <<<"$1"; }

# pct_decode S: S with %XX sequences decoded (as idpoold decodes a password);
# status 1 on a '%' that does not start %XX.
pct_decode() {
    local rest=$1
    while [[ $rest == *%* ]]; do # every % must start %XX, as idpoold requires
        rest=${rest#*%}
        [[ $rest =~ ^[0-9A-Fa-f]{2} ]] || return 1
    done
    local s=${1//\\/\\\\}
    printf '%b' "${s//%/\\x}"
}

# Sets RCLI and MYSQL (command arrays) from IDPOOL_REDIS_URL / _MYSQL_URL;
# passwords go to the clients through their environment (REDISCLI_AUTH,
# MYSQL_PWD), decoded.
clients_from_urls() {
    local re_redis='^redis://(([^:@]*)(:([^@]*))?@)?([^:/@]+)(:([0-9]+))?(/([0-9]+))?/?$'
    local re_mysql='^mysql://([^:@/]+)(:([^@]*))?@([^:/@]+)(:([0-9]+))?/([A-Za-z0-9_]+)$'
    [[ $IDPOOL_REDIS_URL =~ $re_redis ]] ||
        die "cannot parse IDPOOL_REDIS_URL=$(redact "$IDPOOL_REDIS_URL")"
    RHOST=${BASH_REMATCH[5]} RPORT=${BASH_REMATCH[7]:-6379}
    RCLI=(redis-cli -h "$RHOST" -p "$RPORT" -n "${BASH_REMATCH[9]:-0}")
    RPASS=0
    local user
    if [[ -n ${BASH_REMATCH[2]} ]]; then
        user=$(pct_decode "${BASH_REMATCH[2]}") || die "IDPOOL_REDIS_URL: a bad percent-escape in the user"
        RCLI+=(--user "$user")
    fi
    if [[ -n ${BASH_REMATCH[4]} ]]; then
        REDISCLI_AUTH=$(pct_decode "${BASH_REMATCH[4]}") ||
            die "IDPOOL_REDIS_URL: a bad percent-escape in the password"
        export REDISCLI_AUTH
        RPASS=1
    fi
    [[ $IDPOOL_MYSQL_URL =~ $re_mysql ]] ||
        die "cannot parse IDPOOL_MYSQL_URL=$(redact "$IDPOOL_MYSQL_URL")"
    user=$(pct_decode "${BASH_REMATCH[1]}") || die "IDPOOL_MYSQL_URL: a bad percent-escape in the user"
    MYSQL=(mariadb --no-defaults -h "${BASH_REMATCH[4]}" -P "${BASH_REMATCH[6]:-3306}" -u "$user")
    MYSQL_DB=${BASH_REMATCH[7]}
    if [[ -n ${BASH_REMATCH[3]} ]]; then
        MYSQL_PWD=$(pct_decode "${BASH_REMATCH[3]}") ||
            die "IDPOOL_MYSQL_URL: a bad percent-escape in the password"
        export MYSQL_PWD
    fi
}

start_servers() {
    if [[ -n ${IDPOOL_REDIS_URL:-} && -n ${IDPOOL_MYSQL_URL:-} ]]; then
        say "using your servers: $(redact "$IDPOOL_REDIS_URL") and $(redact "$IDPOOL_MYSQL_URL")"
    else
        say "starting Redis and MariaDB in run/"
        mkdir -p "$RUN"
        SERVERS_DETACH=1 "$SERVERS" start "$RUN" >/dev/null
        # shellcheck source=/dev/null
        source "$RUN/env"
    fi
    export IDPOOL_REDIS_URL IDPOOL_MYSQL_URL # idpoold reads them from its environment
    clients_from_urls
    local out
    out=$("${RCLI[@]}" PING 2>&1 | sed '/^$/d' | tr '\n' ' ') || true
    out=${out% }
    [[ $out == PONG ]] ||
        die "Redis at $(redact "$IDPOOL_REDIS_URL") does not answer PING with PONG: ${out:-no answer}"
    out=$("${MYSQL[@]}" -N -e 'SELECT 1' 2>&1) ||
        die "MySQL at $(redact "$IDPOOL_MYSQL_URL") refuses: $out"
}

load_schema_and_demo() {
    say "loading sql/schema.sql and the demo applications"
    "${MYSQL[@]}" -e "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\`" 2>/dev/null || true
    "${MYSQL[@]}" "$MYSQL_DB" <"$ROOT/sql/schema.sql"
    "${MYSQL[@]}" "$MYSQL_DB" <<'EOF'
INSERT INTO application
    (entity_key, entity_name, increasing_type, start_offset, step,
     max_size_per_second, increment_max)
VALUES
    ('demo_mono', 'quickstart: monotonic IDs', 1, 1000000, 1000, 1000, 3),
    ('demo_trend', 'quickstart: trend IDs (shuffled blocks)', 2, 0, 1000, 1000, 1)
ON DUPLICATE KEY UPDATE
    entity_name = VALUES(entity_name), increasing_type = VALUES(increasing_type),
    start_offset = VALUES(start_offset), step = VALUES(step),
    max_size_per_second = VALUES(max_size_per_second),
    increment_max = VALUES(increment_max), deleted_at = 0;
EOF
}

# -------------------------------------------------------------- idpoold ---

daemon_pid() { # pid of our running idpoold, or nothing
    local pid
    [[ -r $PIDFILE ]] || return 0
    pid=$(tr -dc 0-9 <"$PIDFILE")
    if [[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == idpoold ]]; then
        echo "$pid"
    fi
}

running() { # PID is alive and not a zombie
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

stop_daemon() {
    local pid i
    pid=$(daemon_pid)
    if [[ -n $pid ]]; then
        say "stopping idpoold (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            running "$pid" || break
            sleep 0.1
        done
        if running "$pid"; then
            say "idpoold did not exit within 10 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$PIDFILE"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick_port PREFERRED: PREFERRED if nobody listens on it, else a free one.
pick_port() {
    if port_free "$1"; then
        echo "$1"
    else
        python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
    fi
}

start_daemon() {
    HTTP_PORT=$(pick_port 9471) # the status server's default
    API_PORT=$(pick_port 9472)
    mkdir -p "$RUN"
    say "starting idpoold (log: run/idpoold.log)"
    printf '\n--- %s quickstart: starting idpoold ---\n' "$(date '+%F %T')" >>"$LOG"
    # The URLs (and their passwords) go by the environment: not visible in ps.
    setsid "$BUILD/idpoold" --http "127.0.0.1:$HTTP_PORT" --api "127.0.0.1:$API_PORT" \
        </dev/null >>"$LOG" 2>&1 &
    DAEMON=$!
    echo "$DAEMON" >"$PIDFILE"
}

# Waits (bounded) until KEY's pool holds IDs; explains what to look at if not.
wait_pool() {
    local key=$1 deadline n st=0
    deadline=$((${EPOCHREALTIME/[,.]/} + WAIT_S * 1000000))
    while :; do
        n=$("${RCLI[@]}" LLEN "idpool:{$key}:pool" 2>/dev/null || true)
        if [[ $n =~ ^[0-9]+$ ]] && ((n > 0)); then
            return 0
        fi
        if ! running "$DAEMON"; then
            wait "$DAEMON" || st=$?
            rm -f "$PIDFILE"
            tail -n 20 "$LOG" >&2
            die "idpoold exited with status $st; see run/idpoold.log (last lines above)"
        fi
        if ((${EPOCHREALTIME/[,.]/} >= deadline)); then
            tail -n 20 "$LOG" >&2
            die "no IDs in idpool:{$key}:pool after ${WAIT_S} s; see run/idpoold.log (last lines above). idpoold is still running: scripts/quickstart.sh stop"
        fi
        sleep 0.2
    done
}

# A fresh API token for the demo applications (a token is shown only once:
# the previous run's is revoked; a name is never given to another token, so
# each run's has its own, kept in run/api-token-name), loaded by idpoold at
# once (SIGHUP). Kept in run/api-token (mode 600) for the curl lines below.
make_token() {
    local out name prev=quickstart # the name before runs had their own
    name=quickstart-$(date +%Y%m%d-%H%M%S)-$$
    [[ ! -r $RUN/api-token-name ]] || prev=$(<"$RUN/api-token-name")
    "$BUILD/idpoolctl" tokens revoke "$prev" >/dev/null 2>&1 || true
    out=$("$BUILD/idpoolctl" --json tokens add "$name" --apps demo_mono,demo_trend) ||
        die "idpoolctl tokens add failed"
    printf '%s\n' "$name" >"$RUN/api-token-name"
    TOKEN=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])' <<<"$out")
    (umask 077 && printf '%s\n' "$TOKEN" >"$RUN/api-token")
    kill -HUP "$DAEMON"
}

# Waits (bounded) until the API answers 200 for the token; shows that answer.
show_api() {
    local deadline code url="http://127.0.0.1:$API_PORT/v1/ids/demo_mono?count=5"
    deadline=$((${EPOCHREALTIME/[,.]/} + WAIT_S * 1000000))
    # shellcheck disable=SC2016 # shown as a command to copy, expanded by the reader's shell
    printf '\n$ curl -H "Authorization: Bearer $(cat run/api-token)" %s\n' "'$url'"
    while :; do
        code=$(curl -sS -o "$RUN/api-answer" -w '%{http_code}' \
            -H "Authorization: Bearer $TOKEN" "$url" 2>/dev/null || true)
        [[ $code == 200 ]] && break
        if ((${EPOCHREALTIME/[,.]/} >= deadline)); then
            tail -n 20 "$LOG" >&2
            die "the ID API did not answer 200 within ${WAIT_S} s (last: ${code:-no answer} $(cat "$RUN/api-answer" 2>/dev/null)); see run/idpoold.log"
        fi
        sleep 0.2
    done
    cat "$RUN/api-answer"
}

show_ids() {
    local key
    for key in demo_mono demo_trend; do
        printf '\n$ redis-cli LPOP idpool:{%s}:pool 5\n' "$key"
        "${RCLI[@]}" LPOP "idpool:{$key}:pool" 5
    done
    local cli="redis-cli -h $RHOST -p $RPORT" auth_note="" ctl_env sql_note=""
    ((RPASS)) && auth_note="
  (redis-cli reads your Redis password from REDISCLI_AUTH; idpoolctl, like idpoold, from
   IDPOOL_REDIS_URL and IDPOOL_MYSQL_URL in the environment)"
    # idpoolctl finds the servers the way idpoold does: IDPOOL_REDIS_URL and IDPOOL_MYSQL_URL
    if [[ -f $RUN/env ]]; then
        ctl_env="source run/env      (in a new shell: idpoolctl then finds run/'s servers)"
    else
        ctl_env="export IDPOOL_REDIS_URL=... IDPOOL_MYSQL_URL=...   (your servers, as given here)"
    fi
    [[ -n ${MYSQL_PWD:-} ]] && sql_note="
                       (your MySQL password: export MYSQL_PWD=..., or add -p to be asked)"
    cat <<EOF

idpool is running.
  Pop more IDs:        $cli LPOP 'idpool:{demo_mono}:pool' 100
  Trend IDs:           $cli LPOP 'idpool:{demo_trend}:pool' 100
  With the limits:     $cli FCALL idpool_take 2 'idpool:{demo_mono}:pool' 'idpool:{demo_mono}:meta' 100
  Over HTTP:           curl -H 'Authorization: Bearer $TOKEN' 'http://127.0.0.1:$API_PORT/v1/ids/demo_trend?count=3'
                       (token also in run/api-token; more: build/idpoolctl tokens add NAME --apps KEY)
  idpoolctl setup:     $ctl_env
  Status:              build/idpoolctl --http 127.0.0.1:$HTTP_PORT status
  Applications:        build/idpoolctl apps list      (apps add KEY ..., apps show KEY, --help)
  Status page:         http://127.0.0.1:$HTTP_PORT/   (in a browser)
  Metrics:             curl http://127.0.0.1:$HTTP_PORT/metrics   (and /healthz, /v1/apps)
  Alerts:              $cli SUBSCRIBE idpool:alerts
  Applications (SQL):  ${MYSQL[*]} $MYSQL_DB -e 'SELECT * FROM application\\G'$sql_note
  Daemon log:          run/idpoold.log   (pid $DAEMON in run/idpoold.pid)
  Stop everything:     scripts/quickstart.sh stop$auth_note
EOF
}

# ----------------------------------------------------------------- main ---

cmd_stop() {
    stop_daemon
    if [[ -f $RUN/env ]]; then
        say "stopping Redis and MariaDB in run/"
        "$SERVERS" stop "$RUN"
    fi
}

cmd_start() {
    if [[ ${QUICKSTART_NO_BUILD:-0} != 1 ]]; then
        install_packages
        say "building into build/"
        if [[ ! -f $BUILD/build.ninja ]]; then
            meson setup "$BUILD" "$ROOT"
        fi
        ninja -C "$BUILD"
    fi
    start_servers
    load_schema_and_demo
    stop_daemon # a previous run's, so the new build is the one running
    start_daemon
    say "waiting up to ${WAIT_S} s for the pools to fill"
    wait_pool demo_mono
    wait_pool demo_trend
    make_token
    show_ids
    show_api
}

cd "$ROOT"
case ${1:-start} in
start) cmd_start ;;
stop) cmd_stop ;;
clean)
    cmd_stop
    rm -rf "$RUN"
    ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
