#!/bin/sh
# One heartbeat of Paperclip's agent loop, with curl and only the run environment: read the
# inbox, check out the issue this run was woken for, read its context, comment (naming the run)
# and mark it done. Never retries a 409. Exits non-zero, failing the run, on anything else
# unexpected. Leaves a trace in agent-<run id>.log in its working directory.
set -u
. "$(dirname "$0")/lib.sh"

call GET /agents/me/inbox-lite
[ "$code" = 200 ] || exit 1
# PAPERCLIP_TASK_ID first; without one, the first issue waiting in the inbox.
[ -n "$task" ] || task=$(inbox_first todo)
if [ -z "$task" ]; then
    say "nothing to do"
    exit 0
fi
case $(inbox_status "$task") in
    # This agent's own issue, left in progress by a run of it that was lost: resume it. (There
    # is no checkout to adopt: ending the lost run released it.)
    in_progress) expected='["in_progress"]' ;;
    "")
        say "$task is not in my inbox"
        exit 0
        ;;
    *) expected='["todo","backlog"]' ;;
esac

call POST "/issues/$task/checkout" "{\"agentId\":\"$agent\",\"expectedStatuses\":$expected}"
case $code in
    200) ;;
    409)
        say "409 on checkout: someone else has it; never retried"
        exit 0
        ;;
    *) exit 1 ;;
esac
call GET "/issues/$task/heartbeat-context"
[ "$code" = 200 ] || exit 1
call POST "/issues/$task/comments" "{\"body\":\"Done in run $run.\"}"
[ "$code" = 201 ] || exit 1
call PATCH "/issues/$task" '{"status":"done"}'
[ "$code" = 200 ] || exit 1
say "done"
