#!/usr/bin/env bash
# Roost side by side with etcd on this machine, in one run (issue 8).
#
# Installs etcd from Debian's packages if it is missing (needs root), builds the release
# binaries, then runs `roost-bench etcd-checkout`, which starts a 3-member etcd cluster and a
# 3-node Roost cluster (`roost server` processes) on loopback with their data under one
# temporary directory, runs the same checkout/release workload on both at 1, 16, 64 and 256
# clients, each point REPEAT times with the systems' order alternating, measures failover
# (kill -9 of the leader to the first acknowledged checkout) on both, and prints one table with
# both systems (medians) and the ratio (with its range over the repeats).
#
# TLS selects the transport, the same for both systems:
#   TLS=both  (the default) the plaintext table, then the TLS table: two runs, fresh clusters
#   TLS=off   plaintext only
#   TLS=on    TLS only: every listener of both systems (client and peer) serves TLS with
#             certificates from `roost cert` (a CA per system); etcd requires client
#             certificates (--client-cert-auth, --peer-client-cert-auth), and the bench
#             presents one to both systems (`roost-bench etcd-checkout --tls`)
#
#   bench/etcd-vs-roost.sh                         # the full run (about 8 minutes per mode once built)
#   CLIENTS=1,64 SECONDS_PER_POINT=5 TRIALS=3 REPEAT=1 TLS=off bench/etcd-vs-roost.sh    # a quick look
#
# Extra arguments go to `roost-bench etcd-checkout` (e.g. --lease-per-checkout, --json).
# Every process and directory it creates is removed on exit, also on an error or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-1,16,64,256}
SECONDS_PER_POINT=${SECONDS_PER_POINT:-10}
TRIALS=${TRIALS:-10}
REPEAT=${REPEAT:-3}
TLS=${TLS:-both}
case "$TLS" in
    both) MODES="off on" ;;
    off | on) MODES=$TLS ;;
    *)
        echo "TLS=$TLS: use both, off or on" >&2
        exit 2
        ;;
esac

if ! command -v etcd > /dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "etcd is not installed; run this as root to install it (apt-get install etcd-server etcd-client)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y etcd-server etcd-client
fi
if pgrep -x etcd > /dev/null; then
    # Debian's package enables etcd.service where systemd runs: it would share the CPU.
    echo "warning: an etcd is already running (pid $(pgrep -x etcd | tr '\n' ' ')); it competes for the CPU" >&2
fi

# Two builds: built together, roost-bench's roost-testkit would turn on roost-server's test-util
# feature (test hooks) in the measured `roost` binary too.
cargo build --release -p roost
cargo build --release -p roost-bench
BIN="${CARGO_TARGET_DIR:-target}/release/roost-bench"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/etcd-vs-roost.XXXXXX")
BENCH_PID=

# Kills every process whose command line names $WORK (the etcd members and roost servers keep
# their data and configs there), then removes it.
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$BENCH_PID" ] && kill -0 "$BENCH_PID" 2> /dev/null; then
        kill -TERM "$BENCH_PID" 2> /dev/null || true
        wait "$BENCH_PID" 2> /dev/null || true
    fi
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        local left=""
        for proc in /proc/[0-9]*; do
            if tr '\0' ' ' 2> /dev/null < "$proc/cmdline" | grep -qF -- "$WORK"; then
                left="$left ${proc#/proc/}"
            fi
        done
        [ -z "$left" ] && break
        # shellcheck disable=SC2086
        kill -KILL $left 2> /dev/null || true
        sleep 0.5
    done
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Two benchmarks on one machine distort each other: wait for any other holder of this lock.
exec 9> /tmp/roost-bench.lock
if ! flock -n 9; then
    echo "waiting for another benchmark to release /tmp/roost-bench.lock..." >&2
    flock 9
fi

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)," \
    "$(etcd --version | head -1), data in $WORK ($(df --output=source,fstype "$WORK" | tail -1 | tr -s ' '))" >&2

# What else uses the CPU right now (other work on the machine distorts both systems).
busy() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
report_busy() {
    local b0 t0 b1 t1
    read -r b0 t0 < <(busy)
    sleep 3
    read -r b1 t1 < <(busy)
    echo "machine busy before the run: $(( 100 * (b1 - b0) / (t1 - t0 + 1) ))% of $(nproc) cores (3 s)" >&2
}

# The bench runs both clusters as its children (they die with it) with their data (and, with
# TLS, their certificates) under $WORK. One run per mode, each on fresh clusters.
for mode in $MODES; do
    tls_flag=()
    if [ "$mode" = on ]; then
        tls_flag=(--tls)
    fi
    echo "== TLS $mode ==" >&2
    report_busy
    if [ "$mode" != "${MODES%% *}" ]; then
        echo # a blank line between the two runs' tables
    fi
    TMPDIR="$WORK" "$BIN" etcd-checkout --clients "$CLIENTS" --seconds "$SECONDS_PER_POINT" \
        --trials "$TRIALS" --repeat "$REPEAT" "${tls_flag[@]}" "$@" &
    BENCH_PID=$!
    wait "$BENCH_PID"
    BENCH_PID=
done
