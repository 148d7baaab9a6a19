#!/bin/sh
# An agent that comments on its issue every 100 ms with its run-scoped key until it is stopped,
# and writes the time (ms since the epoch) it got SIGTERM to stopped-<run id>. The retry of a
# lost run exits at once. Used by the worker cut-off tests.
trap 'date +%s%3N > "stopped-$ROOST_RUN_ID"; exit 0' TERM
[ "$ROOST_WAKE_REASON" = process_lost_retry ] && exit 0
while true; do
  curl -s -m 1 -o /dev/null -X POST -H "Authorization: Bearer $ROOST_API_KEY" \
    -H 'Content-Type: application/json' -d '{"body":"tick"}' \
    "$ROOST_API_URL/api/issues/$ROOST_TASK_ID/comments"
  sleep 0.1
done
