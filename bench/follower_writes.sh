#!/usr/bin/env bash
# SET through the leader and through a follower of a 3-node baton cluster,
# for one or more builds in alternation (docs/benchmarks.md, "Followers:
# forwarded writes"): requests per second from redis-benchmark (256-byte
# values over 100,000 random keys) at -c 50 and -c 50 -P 16, and CPU per
# operation: user+sys of the three batond processes from /proc/PID/stat
# before and after each run, divided by the requests.
#
#   bench/follower_writes.sh                      # build/, one round
#   ROUNDS=2 bench/follower_writes.sh /tmp/base /tmp/head   # alternate two builds
#   REQUESTS=200000 PIPELINED_REQUESTS=400000 bench/follower_writes.sh
#
# Each argument is a folder with batond and batonctl. Every round starts a
# fresh cluster per build (scripts/run-cluster on free ports) and stops it
# (only the processes this script started) before the next.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-1}
REQUESTS=${REQUESTS:-200000}
PIPELINED_REQUESTS=${PIPELINED_REQUESTS:-400000}
HOST=127.0.0.1
BUILDS=("$@")
((${#BUILDS[@]})) || BUILDS=("$ROOT/build")

die() {
	echo "follower_writes: $*" >&2
	exit 1
}

command -v redis-benchmark >/dev/null || die "redis-benchmark not found (apt-get install redis-tools)"
for b in "${BUILDS[@]}"; do
	[[ -x $b/batond && -x $b/batonctl ]] || die "$b/batond or $b/batonctl missing"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-follower-bench.XXXXXX")
CLUSTER_PID=""
stop_cluster() {
	if [[ -n $CLUSTER_PID ]] && kill -0 "$CLUSTER_PID" 2>/dev/null; then
		kill -TERM "$CLUSTER_PID" 2>/dev/null || true # it stops its nodes
		wait "$CLUSTER_PID" 2>/dev/null || true
	fi
	CLUSTER_PID=""
}
cleanup() {
	trap '' INT TERM
	stop_cluster
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=bench/cluster_ports.sh
. "$ROOT/bench/cluster_ports.sh"

TICK=$(getconf CLK_TCK)
cpu_ticks() {
	local sum=0 pid
	for pid in "${PIDS[@]}"; do
		sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
	done
	echo "$sum"
}

# run LABEL PORT N ARGS...: one redis-benchmark run, its rate and CPU/op.
run() {
	local label=$1 port=$2 n=$3 c0 c1 rate
	shift 3
	c0=$(cpu_ticks)
	rate=$(redis-benchmark -h "$HOST" -p "$port" -t set -n "$n" -d 256 \
		-r 100000 "$@" --csv 2>"$WORK/bench.err" |
		awk -F'"' '$2 == "SET" { print $4; exit }')
	c1=$(cpu_ticks)
	[[ -n $rate ]] || die "redis-benchmark failed: $(cat "$WORK/bench.err")"
	awk -v l="$label" -v r="$rate" -v c=$((c1 - c0)) -v t="$TICK" -v n="$n" \
		'BEGIN { printf "  %-24s %10.0f req/s %8.1f us CPU/op\n", l, r, c * 1e6 / t / n }'
}

bench_build() {
	local build=$1 base out deadline
	base=$(free_base_port)
	out="$WORK/cluster-$base.out"
	BUILD="$build" BASE_PORT="$base" TMPDIR="$WORK" \
		"$ROOT/scripts/run-cluster" >"$out" 2>&1 &
	CLUSTER_PID=$!
	deadline=$((SECONDS + 30))
	until grep -q "leads. Try" "$out"; do
		kill -0 "$CLUSTER_PID" 2>/dev/null || die "the cluster did not start: $(cat "$out")"
		((SECONDS < deadline)) || die "the cluster elected no leader in 30 s"
		sleep 0.2
	done
	mapfile -t PIDS < <(grep -o 'pid [0-9]*' "$out" | awk '{ print $2 }')
	local leader follower
	leader=$(grep ' node .*leader' "$out" | sed -E 's/.*client [^ ]*:([0-9]+) .*/\1/' | head -1)
	follower=$(grep ' node .* client ' "$out" | grep -v leader |
		sed -E 's/.*client [^ ]*:([0-9]+) .*/\1/' | head -1)
	[[ -n $leader && -n $follower && ${#PIDS[@]} -eq 3 ]] ||
		die "cannot read the cluster's ports and pids: $(cat "$out")"
	echo "$build ($(uptime | sed 's/.*load/load/'))"
	run "leader   -c 50" "$leader" "$REQUESTS" -c 50
	run "follower -c 50" "$follower" "$REQUESTS" -c 50
	run "leader   -c 50 -P 16" "$leader" "$PIPELINED_REQUESTS" -c 50 -P 16
	run "follower -c 50 -P 16" "$follower" "$PIPELINED_REQUESTS" -c 50 -P 16
	stop_cluster
}

for round in $(seq 1 "$ROUNDS"); do
	echo "round $round"
	for b in "${BUILDS[@]}"; do
		bench_build "$b"
	done
done
