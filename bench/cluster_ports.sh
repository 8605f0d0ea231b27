# Sourced by the shell benchmarks that start scripts/run-cluster: a base
# port whose client (base..base+2), peer (base+1000..) and metrics
# (base+2000..) ports are all free, below the ephemeral range (as
# scripts/run-cluster's own). Needs HOST and a die() function.

port_in_use() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

free_base_port() {
	local base p busy
	for _ in $(seq 1 50); do
		base=$((20000 + RANDOM % 10000))
		busy=0
		for p in $base $((base + 1)) $((base + 2)) $((base + 1000)) \
			$((base + 1001)) $((base + 1002)) $((base + 2000)) \
			$((base + 2001)) $((base + 2002)); do
			if port_in_use "$p"; then
				busy=1
				break
			fi
		done
		((busy)) || {
			echo "$base"
			return
		}
	done
	die "no free ports found"
}
