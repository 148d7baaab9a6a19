# Sourced by the agent scripts: the run environment, and one helper to call the API with curl.
# Uses only what a worker gives an agent process: ROOST_* (or Paperclip's PAPERCLIP_* names).

api="${ROOST_API_URL:-${PAPERCLIP_API_URL:?no API URL in the environment}}/api"
key="${ROOST_API_KEY:-${PAPERCLIP_API_KEY:?no API key in the environment}}"
run="${ROOST_RUN_ID:-${PAPERCLIP_RUN_ID:?no run id in the environment}}"
agent="${ROOST_AGENT_ID:-${PAPERCLIP_AGENT_ID:?no agent id in the environment}}"
task="${ROOST_TASK_ID:-${PAPERCLIP_TASK_ID:-}}"
wake_reason="${ROOST_WAKE_REASON:-${PAPERCLIP_WAKE_REASON:-}}"

# Everything happens in the worker's work dir, in files named after the run.
log="agent-$run.log"
body="agent-$run.body"
echo $$ > "pid-$run"

say() {
    printf '%s\n' "$*" >> "$log"
}

# call METHOD PATH [JSON]: sets $code to the HTTP status (000: no answer) and leaves the reply in
# the file $body. Every request carries the run id. A write also carries an idempotency key, so
# the one retry after a 503 or a dropped connection is applied once; nothing else is retried,
# and a 409 never is.
call() {
    tries=0
    # A fresh random key per logical write, kept across its retry: a key derived from the
    # request (run, method, path) made a second, different write to the same path a repeat.
    idem=$(cat /proc/sys/kernel/random/uuid)
    while :; do
        tries=$((tries + 1))
        if [ $# -ge 3 ]; then
            code=$(curl -sS -o "$body" -w '%{http_code}' -X "$1" \
                -H "Authorization: Bearer $key" -H "X-Paperclip-Run-Id: $run" \
                -H "Idempotency-Key: $idem" -H 'Content-Type: application/json' \
                --data "$3" "$api$2" 2>> "$log") || code=000
        else
            code=$(curl -sS -o "$body" -w '%{http_code}' -X "$1" \
                -H "Authorization: Bearer $key" -H "X-Paperclip-Run-Id: $run" \
                "$api$2" 2>> "$log") || code=000
        fi
        say "$1 $2 -> $code $(cat "$body" 2> /dev/null)"
        case $code in
            000 | 503) [ $tries -lt 2 ] || return 0 ;;
            *) return 0 ;;
        esac
        sleep 1
    done
}

# The status of issue $1 in the inbox reply in $body (empty if it is not there). Issues are
# split one per line at their `{"id":` (nested objects carry no "id").
inbox_status() {
    sed 's/{"id":/\
{"id":/g' "$body" | grep "^{\"id\":\"$1\"" | sed -n 's/.*"status":"\([a-z_]*\)".*/\1/p' | head -n 1
}

# The first issue in the inbox reply in $body with status $1.
inbox_first() {
    sed 's/{"id":/\
{"id":/g' "$body" | grep "\"status\":\"$1\"" | sed -n 's/^{"id":"\([^"]*\)".*/\1/p' | head -n 1
}
