# The user-facing entry point. `make test` is what CI runs.
BUILD      ?= build
ASAN_BUILD ?= build-asan
SEEDS      ?= 500
SEED       ?= 1
ASAN_SEEDS ?= 100
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FORMAT_FILES = $(shell find src include tests bench tools -name '*.[ch]' 2>/dev/null)

.PHONY: all setup build install test e2e jepsen sim replay power-loss sanitize tsan mutants fuzz bench bench-server bench-snapshot bench-big-value bench-roll format format-check run demo clean

all: build

setup:
	@scripts/setup

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j2

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j2

# Binaries, man pages, headers, libbaton_core.a, baton.pc, the systemd unit
# template and the example config (docs/install.md):
# make install [PREFIX=/usr/local] [DESTDIR=/tmp/stage]
PREFIX ?= /usr/local
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# Only the end-to-end tests (real batond processes on loopback).
e2e: build
	BATON_BUILD=$(BUILD) /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e

# A long fault-harness run (docs/jepsen.md): make jepsen SECONDS=600
# [JEPSEN_SEED=N]; the short run and the teeth test are part of make test.
SECONDS ?= 600
jepsen: build
	BATON_BUILD=$(BUILD) JEPSEN_SECONDS=$(SECONDS) /usr/bin/python3 -m pytest \
		-q -s -p no:cacheprovider tests/jepsen -k linearizable_under_faults

# Any number of swarm seeds: make sim SEEDS=20000 [SEED=first]
sim: build
	$(BUILD)/baton-sim --swarm --seeds $(SEEDS) --first-seed $(SEED) --jobs 2

# Replay one seed with a full trace (a failing seed prints this command).
replay: build
	$(BUILD)/baton-sim --swarm --seed $(SEED) --verbose

# Any number of seeded storage faults: make power-loss SEEDS=20000 [SEED=first]
power-loss: build
	POWER_LOSS_SEEDS=$(SEEDS) POWER_LOSS_FIRST_SEED=$(SEED) \
		$(BUILD)/storage_tests --filter 'power_loss/*' --verbose=0

sanitize: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DBATON_SANITIZE=address,undefined -DBATON_SIM_SEEDS=$(ASAN_SEEDS)
	cmake --build $(ASAN_BUILD) -j2
	ctest --test-dir $(ASAN_BUILD) --output-on-failure

# The storage's writer thread under ThreadSanitizer. Criterion cannot run
# under TSan, so the storage benchmark's quick run drives the threads.
tsan: setup
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DBATON_SANITIZE=thread
	cmake --build $(TSAN_BUILD) -j2 --target bench-storage
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/bench-storage --quick

mutants: setup
	scripts/mutants

# Every fuzz target (tests/fuzz, docs/fuzzing.md), one after the other, for
# SECONDS in all (default 600), built by clang with libFuzzer, ASan and
# UBSan; fails on any finding: make fuzz SECONDS=120
fuzz: setup
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBATON_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j2 --target fuzz
	tests/fuzz/run $(FUZZ_BUILD) $(SECONDS)

bench: build
	$(BUILD)/bench-core
	$(BUILD)/bench-storage
	$(BUILD)/bench-lincheck
	$(BUILD)/bench-kv-expiry

# batond against redis-server --appendfsync always, with redis-benchmark.
bench-server: build
	BUILD=$(BUILD) bench/server_bench.sh

# SET latency while every node takes a snapshot of 1M keys / 100 MB
# (docs/benchmarks.md); a quick run: make bench-snapshot ARGS="--keys 200000"
bench-snapshot: build
	BATON_BUILD=$(BUILD) /usr/bin/python3 bench/snapshot_pause.py $(ARGS)

# SET latency while every node snapshots one 500 MB value (issue 27;
# docs/benchmarks.md); a quick run: make bench-big-value ARGS="--value-bytes 100000000"
bench-big-value: build
	BATON_BUILD=$(BUILD) /usr/bin/python3 bench/big_value_snapshot.py $(ARGS)

# Client write gaps per node restart during batonctl roll, 20 rolls of 3
# nodes and 5 of 5 (docs/benchmarks.md); a quick run: make bench-roll ARGS=--quick
bench-roll: build
	BATON_BUILD=$(BUILD) /usr/bin/python3 bench/roll $(ARGS)

format:
	clang-format -i $(FORMAT_FILES)

format-check: setup
	clang-format --dry-run -Werror $(FORMAT_FILES)

# A local 3-node cluster on 127.0.0.1, data in a temporary folder; Ctrl-C
# stops it (scripts/run-cluster). RELEASE=1.2.0 starts every node at that
# (emulated) release, to roll it with batonctl roll.
run: build
	BUILD=$(BUILD) RELEASE=$(RELEASE) scripts/run-cluster

# A rolling upgrade to watch: 3 nodes at the oldest release rolled to the
# newest one a rolling upgrade reaches (1.3.0 from a 2.0.0 binary) under
# client load, the history checked, a summary and an HTML
# timeline; the page's path is the last line (scripts/demo).
demo: build
	BUILD=$(BUILD) scripts/demo

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
