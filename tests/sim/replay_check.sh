#!/bin/sh
# A replay must be bit-for-bit identical: run the same seeds twice and
# compare the hash of every trace line.
set -eu
sim=$1
for seed in 7 42 1234; do
	a=$("$sim" --swarm --seed "$seed" --trace-hash --quiet | grep 'trace hash')
	b=$("$sim" --swarm --seed "$seed" --trace-hash --quiet | grep 'trace hash')
	if [ "$a" != "$b" ]; then
		echo "seed $seed replays differently: $a vs $b"
		exit 1
	fi
	echo "seed $seed: $a (identical twice)"
done
