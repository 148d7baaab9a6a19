#!/bin/sh
# One heartbeat of Paperclip's published agent skill, followed step by step with curl and the
# run environment only. The skill is paperclipai@2026.916.1
# @paperclipai/server/skills/paperclip/SKILL.md (the same file ships in
# @paperclipai/adapter-claude-local/skills/paperclip/SKILL.md); sections below are its headings.
#
#   "Authentication": only the env vars the skill names (PAPERCLIP_API_URL, PAPERCLIP_API_KEY,
#       PAPERCLIP_RUN_ID, PAPERCLIP_AGENT_ID, PAPERCLIP_COMPANY_ID, PAPERCLIP_TASK_ID,
#       PAPERCLIP_WAKE_REASON, PAPERCLIP_WAKE_COMMENT_ID, PAPERCLIP_WAKE_PAYLOAD_JSON,
#       PAPERCLIP_APPROVAL_ID), `Authorization: Bearer $PAPERCLIP_API_KEY`, everything under /api.
#       The ROOST_* twins are unset first, so lib.sh reads Paperclip's names.
#   "Run audit trail": X-Paperclip-Run-Id on every request (lib.sh's `call`).
#   "The Heartbeat Procedure":
#     Step 1 Identity        GET /agents/me: id, companyId, role, chainOfCommand, budget
#                            (budget and spend: "Critical Rules", critical work only above 80%).
#     Step 2 Approval        only with PAPERCLIP_APPROVAL_ID: GET /approvals/{id}[/issues].
#     Step 3 Assignments     GET /agents/me/inbox-lite.
#     Step 4 Pick work       PAPERCLIP_TASK_ID if assigned to me, else in_progress, in_review
#                            (on a comment wake), todo; nothing assigned: exit.
#     Step 5 Checkout        POST /issues/{id}/checkout with the skill's body; never retry a 409.
#     Step 6 Context         PAPERCLIP_WAKE_PAYLOAD_JSON first, GET /issues/{id}/heartbeat-context,
#                            then the wake comment (GET /issues/{id}/comments/{commentId}) or, on a
#                            cold start, the thread (GET /issues/{id}/comments).
#     Step 7 Do the work     this agent's work is writing down what it read (work-<run>.md).
#     Step 8 Update status   PATCH /issues/{id} {"status":"done","comment":...}, the comment
#                            multi-line markdown per "Comment Style" (status line, bullets,
#                            company-prefixed links), JSON-encoded from a heredoc; the write is
#                            verified from the HTTP status and the echoed status ("Verify writes").
#     Step 9 Delegate        not needed for this task.
# A route or field the skill relies on that the server does not serve is logged as "GAP:" and
# fails the run at the end, after the rest of the procedure. Trace: agent-<run id>.log.
set -u
unset ROOST_API_URL ROOST_API_KEY ROOST_RUN_ID ROOST_AGENT_ID ROOST_TASK_ID ROOST_WAKE_REASON
. "$(dirname "$0")/lib.sh"

gaps=0
gap() {
    say "GAP: $*"
    gaps=1
}

# The string value of the first "$1": in the reply in $body (JSON-escaped, as sent).
field() {
    grep -o "\"$1\":\"[^\"]*\"" "$body" | head -n 1 | sed 's/^"[^"]*":"\(.*\)"$/\1/'
}

# The string field $2 of issue $1 in the inbox reply in $body.
inbox_field() {
    sed 's/{"id":/\
{"id":/g' "$body" | grep "^{\"id\":\"$1\"" | grep -o "\"$2\":\"[^\"]*\"" | head -n 1 |
        sed 's/^"[^"]*":"\(.*\)"$/\1/'
}

# $1 as a JSON string: the skill's "Preserve markdown line breaks" without jq.
json_string() {
    printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/	/\\t/g' |
        awk 'BEGIN { ORS = ""; print "\"" } NR > 1 { print "\\n" } { print } END { print "\"" }'
}

company="${PAPERCLIP_COMPANY_ID:?no company id in the environment}"
wake_comment="${PAPERCLIP_WAKE_COMMENT_ID:-}"
approval="${PAPERCLIP_APPROVAL_ID:-}"
payload="${PAPERCLIP_WAKE_PAYLOAD_JSON:-}"
say "wake: reason=${wake_reason:-none} task=${task:-none} comment=${wake_comment:-none}"

# Step 1 - Identity.
call GET /agents/me
[ "$code" = 200 ] || exit 1
grep -q "\"id\":\"$agent\"" "$body" || {
    say "GET /agents/me is not agent $agent"
    exit 1
}
grep -q "\"companyId\":\"$company\"" "$body" || gap "GET /agents/me: no companyId $company"
grep -q '"role":' "$body" || gap "GET /agents/me: no role"
grep -q '"chainOfCommand":' "$body" || gap "GET /agents/me: no chainOfCommand"
# "Critical Rules"/"Budget": above 80% of the monthly budget, critical tasks only.
budget=$(grep -o '"budgetMonthlyCents":[0-9]*' "$body" | head -n 1 | cut -d: -f2)
spent=$(grep -o '"spentMonthlyCents":[0-9]*' "$body" | head -n 1 | cut -d: -f2)
[ -n "$budget" ] || gap "GET /agents/me: no budgetMonthlyCents"
[ -n "$spent" ] || gap "GET /agents/me: no spentMonthlyCents"
critical_only=no
if [ "${budget:-0}" -gt 0 ] && [ $((${spent:-0} * 100)) -gt $((budget * 80)) ]; then
    critical_only=yes
    say "over 80% of the budget: critical tasks only"
fi

# Step 2 - Approval follow-up (when triggered).
if [ -n "$approval" ]; then
    call GET "/approvals/$approval"
    [ "$code" = 200 ] || gap "GET /approvals/$approval -> $code"
    call GET "/approvals/$approval/issues"
    [ "$code" = 200 ] || gap "GET /approvals/$approval/issues -> $code"
fi

# Step 3 - Get assignments.
call GET /agents/me/inbox-lite
[ "$code" = 200 ] || exit 1

# Step 4 - Pick work.
if [ -n "$task" ] && [ -n "$(inbox_status "$task")" ]; then
    pick="$task"
else
    [ -n "$task" ] && say "$task is not in my inbox"
    pick=$(inbox_first in_progress)
    [ -z "$pick" ] && [ -n "$wake_comment" ] && pick=$(inbox_first in_review)
    [ -z "$pick" ] && pick=$(inbox_first todo)
fi
if [ -z "$pick" ]; then
    say "nothing assigned: exit the heartbeat"
    [ $gaps = 0 ]
    exit
fi
task="$pick"
if [ $critical_only = yes ] && [ "$(inbox_field "$task" priority)" != critical ]; then
    say "$task is not critical: exit the heartbeat"
    [ $gaps = 0 ]
    exit
fi

# Step 5 - Checkout.
call POST "/issues/$task/checkout" \
    "{\"agentId\":\"$agent\",\"expectedStatuses\":[\"todo\",\"backlog\",\"blocked\",\"in_review\"]}"
case $code in
    200) ;;
    409)
        say "409 on checkout: owned by another agent; never retried"
        [ $gaps = 0 ]
        exit
        ;;
    *) exit 1 ;;
esac

# Step 6 - Understand context.
if [ -n "$payload" ] && [ "$payload" != null ]; then
    say "wake payload: $payload"
fi
call GET "/issues/$task/heartbeat-context"
[ "$code" = 200 ] || exit 1
identifier=$(field identifier)
[ -n "$identifier" ] || gap "GET /issues/$task/heartbeat-context: no issue identifier"
grep -q '"commentCursor":' "$body" || gap "GET /issues/$task/heartbeat-context: no commentCursor"
cp "$body" "context-$run.json"
if [ -n "$wake_comment" ]; then
    call GET "/issues/$task/comments/$wake_comment"
    [ "$code" = 200 ] || gap "GET /issues/$task/comments/$wake_comment -> $code"
else
    call GET "/issues/$task/comments"
    [ "$code" = 200 ] || gap "GET /issues/$task/comments -> $code"
fi

# Step 7 - Do the work.
prefix=${identifier%-*}
{
    echo "# Work of run $run on $identifier"
    cat "context-$run.json"
} > "work-$run.md"

# Step 8 - Update status and communicate ("Comment Style", "Verify writes - never infer them").
comment=$(
    cat << MD
Done

- Checked out [$identifier](/$prefix/issues/$identifier) in [run $run](/$prefix/agents/$agent/runs/$run)
- Read the heartbeat context and the thread, wrote work-$run.md
MD
)
call PATCH "/issues/$task" "{\"status\":\"done\",\"comment\":$(json_string "$comment")}"
if [ "$code" != 200 ] || ! grep -q '"status":"done"' "$body"; then
    say "the status write FAILED: $code"
    exit 1
fi
if [ $gaps != 0 ]; then
    say "done, with gaps"
    exit 1
fi
say "done"
