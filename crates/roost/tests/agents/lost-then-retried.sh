#!/bin/sh
# For the test that kills a worker mid-run. The retry of a lost run (wake reason
# process_lost_retry) runs the ordinary loop (paperclip-loop.sh). Any other run checks its issue
# out, writes its key, run id and pid to run-<run id>.env, and waits: the test kills its worker.
# Like an agent that saves its work when told to stop, it outlives the SIGTERM a dying worker
# may send it. When the test then creates go-<run id> (the run is lost by then), it tries to
# finish the issue anyway and writes the HTTP codes it got to late-<run id>.codes.
set -u
here=$(dirname "$0")
if [ "${ROOST_WAKE_REASON:-${PAPERCLIP_WAKE_REASON:-}}" = process_lost_retry ]; then
    exec sh "$here/paperclip-loop.sh"
fi
. "$here/lib.sh"

call POST "/issues/$task/checkout" "{\"agentId\":\"$agent\",\"expectedStatuses\":[\"todo\",\"backlog\"]}"
[ "$code" = 200 ] || exit 1
term=no
trap 'term=yes' TERM
printf 'key=%s\nrun=%s\npid=%s\n' "$key" "$run" "$$" > "run-$run.tmp"
mv "run-$run.tmp" "run-$run.env"

# Bounded, so that nothing outlives a test that died: about a minute.
waited=0
while [ ! -e "go-$run" ]; do
    waited=$((waited + 1))
    [ $waited -le 600 ] || exit 1
    sleep 0.1
done
call POST "/issues/$task/comments" "{\"body\":\"Late news from run $run.\"}"
comment=$code
call PATCH "/issues/$task" '{"status":"done"}'
patch=$code
printf 'comment=%s\npatch=%s\nsigterm=%s\n' "$comment" "$patch" "$term" > "late-$run.tmp"
mv "late-$run.tmp" "late-$run.codes"
