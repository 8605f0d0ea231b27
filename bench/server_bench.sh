#!/usr/bin/env bash
# baton against redis-server with every write fsynced, on this machine, in
# one run: a 3-node baton cluster (scripts/run-cluster on free ports; the
# benchmark talks to the leader) and `redis-server --appendonly yes
# --appendfsync always`, both driven by redis-benchmark with 256-byte values
# over 100,000 random keys at -c 1, -c 50 and -c 50 -P 16. Prints requests
# per second for SET and GET and the ratio baton/redis.
#
#   bench/server_bench.sh                  # each run sized for ~6 s
#   SECONDS_PER_RUN=10 bench/server_bench.sh
#   REQUESTS=50000 bench/server_bench.sh   # a fixed -n for every run
#   REPEAT=3 bench/server_bench.sh         # median of 3 alternating runs
#   BUILD=build bench/server_bench.sh      # where batond and batonctl are
#
# A short probe run (PROBE_REQUESTS) measures each server's rate first, and
# the real run's -n is that rate times SECONDS_PER_RUN, within
# [MIN_REQUESTS, MAX_REQUESTS]. Everything started here (the cluster, the
# redis-server, their temporary folders) is stopped and removed on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$ROOT/$BUILD"
SECONDS_PER_RUN=${SECONDS_PER_RUN:-6}
REQUESTS=${REQUESTS:-}
REPEAT=${REPEAT:-1}
PROBE_REQUESTS=${PROBE_REQUESTS:-2000}
MIN_REQUESTS=${MIN_REQUESTS:-2000}
MAX_REQUESTS=${MAX_REQUESTS:-5000000}
VALUE_BYTES=256
KEYSPACE=100000
HOST=127.0.0.1
CASES=("-c 1" "-c 50" "-c 50 -P 16")

die() {
	echo "server_bench: $*" >&2
	exit 1
}

for tool in redis-benchmark redis-server redis-cli; do
	command -v "$tool" >/dev/null || die "$tool not found (apt-get install redis-server redis-tools)"
done
[[ -x $BUILD/batond && -x $BUILD/batonctl ]] ||
	die "$BUILD/batond or $BUILD/batonctl missing: make build first"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-bench.XXXXXX")
CLUSTER_PID=""
REDIS_PID=""

cleanup() {
	trap '' INT TERM
	if [[ -n $CLUSTER_PID ]] && kill -0 "$CLUSTER_PID" 2>/dev/null; then
		kill -TERM "$CLUSTER_PID" 2>/dev/null || true # it stops its nodes
		wait "$CLUSTER_PID" 2>/dev/null || true
	fi
	if [[ -n $REDIS_PID ]] && kill -0 "$REDIS_PID" 2>/dev/null; then
		kill -TERM "$REDIS_PID" 2>/dev/null || true
		wait "$REDIS_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=bench/cluster_ports.sh
. "$ROOT/bench/cluster_ports.sh"

start_baton() {
	local base deadline
	base=$(free_base_port)
	BUILD="$BUILD" BASE_PORT="$base" TMPDIR="$WORK" \
		"$ROOT/scripts/run-cluster" >"$WORK/cluster.out" 2>&1 &
	CLUSTER_PID=$!
	deadline=$((SECONDS + 30))
	until grep -q "leads" "$WORK/cluster.out"; do
		kill -0 "$CLUSTER_PID" 2>/dev/null || {
			cat "$WORK/cluster.out" >&2
			die "the baton cluster did not start"
		}
		((SECONDS < deadline)) || die "the baton cluster elected no leader in 30 s"
		sleep 0.2
	done
	BATON_PORT=$("$BUILD/batonctl" -p "$base" status | awk '$3 == "leader" { split($2, a, ":"); print a[2]; exit }')
	[[ -n $BATON_PORT ]] || die "cannot tell which baton node leads"
}

start_redis() {
	local deadline
	REDIS_PORT=$(free_base_port)
	mkdir -p "$WORK/redis"
	redis-server --port "$REDIS_PORT" --bind "$HOST" --appendonly yes \
		--appendfsync always --save '' --dir "$WORK/redis" \
		--logfile "$WORK/redis/redis.log" --daemonize no &
	REDIS_PID=$!
	deadline=$((SECONDS + 10))
	until redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; do
		((SECONDS < deadline)) || die "redis-server did not start"
		sleep 0.1
	done
}

# rps PORT TEST N CASE...: requests per second of one redis-benchmark run.
rps() {
	local port=$1 test=$2 n=$3
	shift 3
	# shellcheck disable=SC2068
	redis-benchmark -h "$HOST" -p "$port" -t "$test" -n "$n" -d "$VALUE_BYTES" \
		-r "$KEYSPACE" $@ --csv 2>"$WORK/bench.err" |
		awk -F'"' -v t="${test^^}" '$2 == t { print $4; exit }'
}

# size PORT TEST CASE: the -n for a run of ~SECONDS_PER_RUN, from a probe.
size() {
	local port=$1 test=$2 case=$3 rate
	if [[ -n $REQUESTS ]]; then
		echo "$REQUESTS"
		return
	fi
	rate=$(rps "$port" "$test" "$PROBE_REQUESTS" $case)
	[[ -n $rate ]] || die "redis-benchmark failed on port $port: $(cat "$WORK/bench.err")"
	awk -v r="$rate" -v s="$SECONDS_PER_RUN" -v lo="$MIN_REQUESTS" \
		-v hi="$MAX_REQUESTS" 'BEGIN { n = int(r * s); if (n < lo) n = lo; if (n > hi) n = hi; print n }'
}

median() {
	tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

echo "starting a 3-node baton cluster and redis-server (appendfsync always) in $WORK ..."
start_baton
start_redis
declare -A PORT=([baton]=$BATON_PORT [redis]=$REDIS_PORT)
echo "baton leader at $HOST:$BATON_PORT, redis-server at $HOST:$REDIS_PORT"
echo "redis-benchmark -d $VALUE_BYTES -r $KEYSPACE, ~${SECONDS_PER_RUN} s per run${REQUESTS:+ (-n $REQUESTS)}, median of $REPEAT"
echo

declare -A RESULT
for case in "${CASES[@]}"; do
	for test in set get; do
		declare -A N=() RATES=()
		for server in baton redis; do
			N[$server]=$(size "${PORT[$server]}" "$test" "$case")
		done
		# Alternate the two servers, so that a noisy moment hits both.
		for rep in $(seq 1 "$REPEAT"); do
			for server in baton redis; do
				rate=$(rps "${PORT[$server]}" "$test" "${N[$server]}" $case)
				[[ -n $rate ]] || die "redis-benchmark failed against $server: $(cat "$WORK/bench.err")"
				RATES[$server]+=" $rate"
				printf '  %-6s %-12s %-4s %12s req/s  (-n %s, run %d of %d)\n' "$server" \
					"$case" "${test^^}" "$rate" "${N[$server]}" "$rep" "$REPEAT"
			done
		done
		for server in baton redis; do
			RESULT[$server,$case,$test]=$(echo "${RATES[$server]}" | median)
		done
	done
done

echo
printf '%-12s %-4s %14s %14s %12s\n' "clients" "op" "baton req/s" "redis req/s" "baton/redis"
[[ $REPEAT == 1 ]] || echo "(medians of $REPEAT runs)"
for case in "${CASES[@]}"; do
	for test in set get; do
		b=${RESULT[baton,$case,$test]}
		r=${RESULT[redis,$case,$test]}
		printf '%-12s %-4s %14.0f %14.0f %11.2fx\n' "$case" "${test^^}" "$b" "$r" \
			"$(awk -v b="$b" -v r="$r" 'BEGIN { print (r > 0 ? b / r : 0) }')"
	done
done
echo
ratio=$(awk -v b="${RESULT[baton,-c 50,set]}" -v r="${RESULT[redis,-c 50,set]}" 'BEGIN { printf "%.2f", (r > 0 ? b / r : 0) }')
if awk -v x="$ratio" 'BEGIN { exit !(x >= 0.5) }'; then
	echo "target (SET at -c 50 >= 0.5x fsync-always redis-server): met, ${ratio}x"
else
	echo "target (SET at -c 50 >= 0.5x fsync-always redis-server): NOT met, ${ratio}x"
fi
