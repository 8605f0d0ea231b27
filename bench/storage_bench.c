/*
 * Storage benchmark: durable appends per second through the real storage
 * (group commit, one fdatasync per group) next to a plain fdatasync loop on
 * the same disk in the same run, the appends that go on while a big
 * application snapshot commits in the background, the time to recover a
 * log of 1,000,000 entries, and the cost of a restart whose last segment
 * is mostly preallocated zeros. See docs/benchmarks.md.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "baton/storage.h"

#define ENTRY_BYTES 256u
#define ADAPTIVE_IN_FLIGHT 64u
#define RECOVERY_ENTRIES 1000000u
#define RECOVERY_ENTRY_BYTES 128u
#define SNAPSHOT_BYTES (64u << 20)
#define SNAPSHOT_CHUNK_BYTES (1u << 20)
#define RESTART_LOG_BYTES (4u << 20)
#define RESTART_ENTRY_BYTES 4096u
#define RESTART_OPENS 21u
#define RESTART_OPENS_MAX 64u

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "bench-storage: %s: %s\n", what, detail);
	exit(1);
}

static char base_dir[512];
static double seconds_per_test = 2.0;
/* The storage's snapshot queue (0: its default); --quick makes it smaller
 * than the snapshot, so that a smoke run (make tsan) goes through the
 * queue's BATON_EAGAIN and notify. */
static uint64_t snapshot_queue_bytes;

static void subdir(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", base_dir, name);
}

/* ---- the baseline: pwrite 256 bytes + fdatasync, in a loop ---- */
struct rate {
	double per_s;
	double latency_ms;
};

static struct rate raw_sync_rate(void)
{
	char path[600];
	subdir(path, sizeof path, "raw");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || posix_fallocate(fd, 0, 64 << 20) != 0)
		die("raw file", path);
	fdatasync(fd);
	uint8_t buf[ENTRY_BYTES];
	memset(buf, 0xab, sizeof buf);
	uint64_t n = 0;
	double t0 = now_s(), t;
	do {
		if (pwrite(fd, buf, sizeof buf,
			   (off_t)(n * sizeof buf) % (60 << 20)) !=
			    (ssize_t)sizeof buf ||
		    fdatasync(fd) != 0)
			die("raw write", path);
		n++;
		t = now_s();
	} while (t - t0 < seconds_per_test);
	close(fd);
	unlink(path);
	return (struct rate){(double)n / (t - t0), (t - t0) * 1e3 / (double)n};
}

/* ---- the storage ---- */
struct bench_store {
	struct baton_storage *s;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	uint64_t notified;
	uint64_t done;
};

static void notify(void *data)
{
	struct bench_store *b = data;
	pthread_mutex_lock(&b->mu);
	b->notified++;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

static void on_done(void *data, uint64_t seq, int status)
{
	struct bench_store *b = data;
	if (status != 0)
		die("completion", baton_strerror(status));
	/* Sequence numbers are 1, 2, 3, ... and complete in order. */
	if (seq != b->done + 1)
		die("completion", "out of order or missing");
	b->done++;
}

static void store_open(struct bench_store *b, const char *name)
{
	char dir[600];
	subdir(dir, sizeof dir, name);
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = dir;
	o.notify = notify;
	o.notify_data = b;
	if (snapshot_queue_bytes != 0)
		o.snapshot_queue_bytes = snapshot_queue_bytes;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cond, NULL);
	b->notified = b->done = 0;
	char err[512];
	if (baton_fs_storage_open(&o, &b->s, err, sizeof err) != 0)
		die("open", err);
	struct baton_durable_state d;
	if (b->s->ops->load(b->s, &d) != 0)
		die("load", b->s->ops->errmsg(b->s));
	baton_durable_state_free(&d);
}

static void store_close(struct bench_store *b)
{
	b->s->ops->close(b->s);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cond);
}

static struct baton_entry *make_entries(uint32_t n, uint32_t len)
{
	struct baton_entry *e = calloc(n, sizeof *e);
	uint8_t *payload = malloc(len);
	if (e == NULL || payload == NULL)
		die("memory", "entries");
	memset(payload, 0x5c, len);
	for (uint32_t i = 0; i < n; i++) {
		e[i].term = 1;
		e[i].type = BATON_ENTRY_COMMAND;
		e[i].len = len;
		e[i].buf = payload; /* shared: the storage copies */
	}
	return e;
}

static void submit(struct bench_store *b, struct baton_entry *e, uint32_t n,
		   baton_index *next)
{
	for (uint32_t i = 0; i < n; i++)
		e[i].index = (*next)++;
	struct baton_update u = {
		.entries = e, .n_entries = n, .persist_needed = true};
	uint64_t seq;
	int rv = b->s->ops->submit(b->s, &u, &seq);
	if (rv != 0)
		die("submit", baton_strerror(rv));
}

/* Flush what was submitted and collect the completions: all `submitted`
 * (0: do not check). */
static void flush_all(struct bench_store *b, uint64_t submitted)
{
	if (baton_fs_storage_flush(b->s) != 0)
		die("flush", b->s->ops->errmsg(b->s));
	b->s->ops->poll(b->s, on_done, b);
	if (submitted > 0 && b->done != submitted)
		die("completion", "flush returned, completions missing");
}

struct append_result {
	double entries_per_s;
	double latency_ms; /* per update, closed loop */
	double entries_per_sync;
	double syncs_per_s;
};

/* One proposer: submit an update of `batch` entries, wait, repeat. */
static struct append_result closed_loop(uint32_t batch)
{
	char name[32];
	snprintf(name, sizeof name, "batch-%u", batch);
	struct bench_store b;
	store_open(&b, name);
	struct baton_entry *e = make_entries(batch, ENTRY_BYTES);
	baton_index next = 1;
	uint64_t updates = 0;
	double t0 = now_s(), t;
	do {
		submit(&b, e, batch, &next);
		flush_all(&b, ++updates);
		t = now_s();
	} while (t - t0 < seconds_per_test);
	struct baton_fs_stats st;
	baton_fs_storage_stats(b.s, &st);
	store_close(&b);
	free(e[0].buf);
	free(e);
	double el = t - t0;
	return (struct append_result){
		(double)(next - 1) / el, el * 1e3 / (double)updates,
		(double)(next - 1) / (double)st.syncs, (double)st.syncs / el};
}

/* Many proposers: keep ADAPTIVE_IN_FLIGHT single-entry updates in flight,
 * so the writer's groups form by themselves. */
static struct append_result adaptive(void)
{
	struct bench_store b;
	store_open(&b, "adaptive");
	struct baton_entry *e = make_entries(1, ENTRY_BYTES);
	baton_index next = 1;
	uint64_t submitted = 0;
	double t0 = now_s(), t;
	do {
		while (submitted - b.done < ADAPTIVE_IN_FLIGHT) {
			submit(&b, e, 1, &next);
			submitted++;
		}
		pthread_mutex_lock(&b.mu);
		while (b.notified == 0)
			pthread_cond_wait(&b.cond, &b.mu);
		b.notified = 0;
		pthread_mutex_unlock(&b.mu);
		b.s->ops->poll(b.s, on_done, &b);
		t = now_s();
	} while (t - t0 < seconds_per_test);
	flush_all(&b, submitted);
	double el = now_s() - t0;
	struct baton_fs_stats st;
	baton_fs_storage_stats(b.s, &st);
	store_close(&b);
	free(e[0].buf);
	free(e);
	return (struct append_result){(double)b.done / el, 0,
				      (double)b.done / (double)st.syncs,
				      (double)st.syncs / el};
}

/* How writing a snapshot went, as a loop sees it. */
struct write_result {
	double longest_write_ms; /* the longest snapshot_write call */
	uint64_t refusals;	 /* BATON_EAGAIN: the queue was full */
};

/* Until notify fires after it had fired `seen` times. */
static void wait_notified(struct bench_store *b, uint64_t seen)
{
	pthread_mutex_lock(&b->mu);
	while (b->notified == seen)
		pthread_cond_wait(&b->cond, &b->mu);
	pthread_mutex_unlock(&b->mu);
}

/* Write an application snapshot at `index` of `bytes` bytes; not committed.
 * A write refused with BATON_EAGAIN waits for the storage's notify, as a
 * node's loop does. */
static struct baton_snapshot_sink *snapshot_written(struct bench_store *b,
						    baton_index index,
						    size_t bytes,
						    struct write_result *r)
{
	struct baton_snapshot_header h = {0};
	h.meta.index = index;
	h.meta.term = 1;
	h.meta.config.n = 1;
	h.meta.config.members[0].id = 1;
	h.meta.config.members[0].role = BATON_VOTER;
	h.meta.config_index = 1;
	baton_version_state_initial(&h.meta.versions);
	struct baton_snapshot_sink *k;
	if (b->s->ops->snapshot_begin(b->s, &h, &k) != 0)
		die("snapshot_begin", b->s->ops->errmsg(b->s));
	uint8_t *chunk = malloc(SNAPSHOT_CHUNK_BYTES);
	if (chunk == NULL)
		die("memory", "snapshot");
	memset(chunk, 0xa7, SNAPSHOT_CHUNK_BYTES);
	for (size_t off = 0; off < bytes;) {
		size_t n = bytes - off < SNAPSHOT_CHUNK_BYTES
				   ? bytes - off
				   : SNAPSHOT_CHUNK_BYTES;
		pthread_mutex_lock(&b->mu);
		uint64_t seen = b->notified;
		pthread_mutex_unlock(&b->mu);
		double t0 = now_s();
		int rv = b->s->ops->snapshot_write(k, chunk, n);
		double ms = (now_s() - t0) * 1e3;
		if (ms > r->longest_write_ms)
			r->longest_write_ms = ms;
		if (rv == BATON_EAGAIN) {
			r->refusals++;
			wait_notified(b, seen);
			continue;
		}
		if (rv != 0)
			die("snapshot_write", b->s->ops->errmsg(b->s));
		off += n;
	}
	free(chunk);
	return k;
}

struct background_result {
	double commit_s;   /* from start to the end of its wait */
	uint64_t appended; /* single-entry updates durable meanwhile */
	uint64_t reads;	   /* whole chunks of the old snapshot read */
	struct write_result write;
};

/* The loop of a node while its snapshot of `bytes` commits in the
 * background: single-entry updates in flight as in adaptive(), the
 * previous snapshot read for a follower, snapshot_commit_wait at each
 * notify. The log's group commits must go on meanwhile. */
static struct background_result snapshot_in_background(size_t bytes)
{
	struct bench_store b;
	store_open(&b, "snapshot");
	struct background_result r = {0};
	struct write_result small = {0};
	struct baton_snapshot_sink *k = snapshot_written(&b, 1, 4096, &small);
	if (b.s->ops->snapshot_commit(k) != 0)
		die("snapshot_commit", b.s->ops->errmsg(b.s));
	k = snapshot_written(&b, 2, bytes, &r.write);
	struct baton_entry *e = make_entries(1, ENTRY_BYTES);
	baton_index next = 3;
	uint64_t submitted = 0;
	uint8_t chunk[4096];
	bool old_gone = false;
	double t0 = now_s();
	if (b.s->ops->snapshot_commit_start(k) != 0)
		die("snapshot_commit_start", b.s->ops->errmsg(b.s));
	int rv = BATON_EAGAIN;
	while (rv == BATON_EAGAIN) {
		while (submitted - b.done < ADAPTIVE_IN_FLIGHT) {
			submit(&b, e, 1, &next);
			submitted++;
		}
		size_t n;
		if (!old_gone) {
			int read = b.s->ops->snapshot_read(b.s, 1, 0, chunk,
							   sizeof chunk, &n);
			old_gone = read == BATON_ENOTFOUND;
			r.reads += read == 0;
		}
		pthread_mutex_lock(&b.mu);
		while (b.notified == 0)
			pthread_cond_wait(&b.cond, &b.mu);
		b.notified = 0;
		pthread_mutex_unlock(&b.mu);
		b.s->ops->poll(b.s, on_done, &b);
		rv = b.s->ops->snapshot_commit_wait(k, false);
	}
	r.commit_s = now_s() - t0;
	r.appended = b.done;
	if (rv != 0)
		die("snapshot commit", b.s->ops->errmsg(b.s));
	flush_all(&b, 0);
	store_close(&b);
	free(e[0].buf);
	free(e);
	return r;
}

struct restart_result {
	double wall_ms, cpu_ms; /* medians */
	uint64_t entries;
};

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, uint32_t n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return v[n / 2];
}

/* Write `n` entries in big batches, then time open + load. */
static double recovery_seconds(uint32_t n, uint64_t *segments)
{
	struct bench_store b;
	store_open(&b, "recovery");
	uint32_t batch = 4096;
	struct baton_entry *e = make_entries(batch, RECOVERY_ENTRY_BYTES);
	baton_index next = 1;
	uint64_t submitted = 0;
	for (uint32_t done = 0; done < n; done += batch) {
		submit(&b, e, n - done < batch ? n - done : batch, &next);
		submitted++;
	}
	flush_all(&b, submitted);
	struct baton_fs_stats st;
	baton_fs_storage_stats(b.s, &st);
	*segments = st.segments;
	store_close(&b);
	free(e[0].buf);
	free(e);

	/* A restart after a crash finds the log in the page cache too, so
	 * this measures the scan, the checksums and rebuilding the entries
	 * (open + load), not the disk's read speed. */
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	char dir[600];
	subdir(dir, sizeof dir, "recovery");
	o.dir = dir;
	struct baton_storage *s;
	char err[512];
	double t0 = now_s();
	if (baton_fs_storage_open(&o, &s, err, sizeof err) != 0)
		die("reopen", err);
	struct baton_durable_state d;
	if (s->ops->load(s, &d) != 0)
		die("load", s->ops->errmsg(s));
	double t = now_s() - t0;
	if (d.n_entries != n) {
		fprintf(stderr,
			"bench-storage: recovery: loaded %u entries, wrote "
			"%u\n",
			d.n_entries, n);
		exit(1);
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct baton_entry *x = &d.entries[i];
		if (x->index != (baton_index)i + 1 || x->term != 1 ||
		    x->type != BATON_ENTRY_COMMAND ||
		    x->len != RECOVERY_ENTRY_BYTES)
			die("recovery", "a loaded entry differs from the one "
					"written");
	}
	baton_durable_state_free(&d);
	s->ops->close(s);
	return t;
}

/* Fill a store's first segment with `bytes` of entries, then time a
 * restart (open + load) `opens` times: most of the segment is its zeroed,
 * preallocated tail, as on a node that restarts in a rolling upgrade. CPU
 * time counts too, since a restart competes with the running nodes. */
static struct restart_result restart_cost(uint64_t bytes, uint32_t opens)
{
	struct bench_store b;
	store_open(&b, "restart");
	uint32_t per_update = 64;
	struct baton_entry *e = make_entries(per_update, RESTART_ENTRY_BYTES);
	baton_index next = 1;
	uint64_t submitted = 0;
	for (uint64_t done = 0; done < bytes;
	     done += (uint64_t)per_update * RESTART_ENTRY_BYTES) {
		submit(&b, e, per_update, &next);
		submitted++;
	}
	flush_all(&b, submitted);
	store_close(&b);
	free(e[0].buf);
	free(e);

	double wall_ms[RESTART_OPENS_MAX], cpu_ms[RESTART_OPENS_MAX];
	if (opens > RESTART_OPENS_MAX)
		opens = RESTART_OPENS_MAX;
	for (uint32_t i = 0; i < opens; i++) {
		struct baton_fs_options o;
		baton_fs_options_default(&o);
		char dir[600];
		subdir(dir, sizeof dir, "restart");
		o.dir = dir;
		struct baton_storage *s;
		char err[512];
		double c0 = cpu_s(), t0 = now_s();
		if (baton_fs_storage_open(&o, &s, err, sizeof err) != 0)
			die("reopen", err);
		struct baton_durable_state d;
		if (s->ops->load(s, &d) != 0)
			die("load", s->ops->errmsg(s));
		wall_ms[i] = (now_s() - t0) * 1e3;
		cpu_ms[i] = (cpu_s() - c0) * 1e3;
		if (d.n_entries != next - 1)
			die("restart", "loaded another number of entries");
		baton_durable_state_free(&d);
		s->ops->close(s);
	}
	return (struct restart_result){median(wall_ms, opens),
				       median(cpu_ms, opens), next - 1};
}

static void usage(void)
{
	printf("usage: bench-storage [--dir DIR] [--seconds S] [--quick]\n"
	       "\n"
	       "Durable appends per second (256-byte entries; batches of 1, "
	       "16,\n"
	       "256, and adaptive group commit with %u in flight) next to a\n"
	       "plain pwrite+fdatasync loop on the same disk, the appends\n"
	       "that go on while a %u MiB snapshot commits in the\n"
	       "background, the time to recover a log of %u entries, and\n"
	       "the cost of a restart with %u MiB of log in a 64 MiB "
	       "segment.\n"
	       "\n"
	       "  --dir DIR    where to write (default: a new directory under\n"
	       "               /var/tmp, removed at the end)\n"
	       "  --seconds S  length of each measurement (default 2)\n"
	       "  --quick      a smoke run: 0.2 s each, a 4 MiB snapshot, "
	       "20,000-entry\n"
	       "               recovery\n",
	       ADAPTIVE_IN_FLIGHT, SNAPSHOT_BYTES >> 20, RECOVERY_ENTRIES,
	       RESTART_LOG_BYTES >> 20);
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	uint32_t recovery_entries = RECOVERY_ENTRIES;
	size_t snapshot_bytes = SNAPSHOT_BYTES;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
			seconds_per_test = atof(argv[++i]);
		} else if (strcmp(argv[i], "--quick") == 0) {
			seconds_per_test = 0.2;
			recovery_entries = 20000;
			snapshot_bytes = 4u << 20;
			snapshot_queue_bytes = 1u << 20;
		} else {
			usage();
			return strcmp(argv[i], "--help") == 0 ? 0 : 2;
		}
	}
	bool made = dir == NULL;
	if (made) {
		snprintf(base_dir, sizeof base_dir,
			 "/var/tmp/baton-bench-XXXXXX");
		if (mkdtemp(base_dir) == NULL)
			die("mkdtemp", base_dir);
	} else {
		snprintf(base_dir, sizeof base_dir, "%s", dir);
	}
	printf("bench-storage in %s, %.1f s per measurement\n\n", base_dir,
	       seconds_per_test);
	struct rate raw = raw_sync_rate();
	printf("raw pwrite(256 B)+fdatasync: %.0f syncs/s, %.3f ms each\n\n",
	       raw.per_s, raw.latency_ms);
	printf("%-10s %14s %12s %14s %10s\n", "batch", "entries/s", "syncs/s",
	       "entries/sync", "vs raw");
	uint32_t batches[] = {1, 16, 256};
	for (size_t i = 0; i < 3; i++) {
		struct append_result r = closed_loop(batches[i]);
		char ratio[64];
		if (batches[i] == 1)
			snprintf(ratio, sizeof ratio, "%.2fx latency (%.3f ms)",
				 r.latency_ms / raw.latency_ms, r.latency_ms);
		else
			snprintf(ratio, sizeof ratio, "%.1fx rate",
				 r.entries_per_s / raw.per_s);
		printf("%-10u %14.0f %12.0f %14.1f %s\n", batches[i],
		       r.entries_per_s, r.syncs_per_s, r.entries_per_sync,
		       ratio);
	}
	struct append_result a = adaptive();
	printf("%-10s %14.0f %12.0f %14.1f %.1fx rate\n", "adaptive",
	       a.entries_per_s, a.syncs_per_s, a.entries_per_sync,
	       a.entries_per_s / raw.per_s);
	struct background_result bg = snapshot_in_background(snapshot_bytes);
	printf("\nsnapshot of %zu MiB committed in the background in %.3f s; "
	       "meanwhile %llu appends durable (%.0f/s), %llu reads of the "
	       "previous snapshot\n",
	       snapshot_bytes >> 20, bg.commit_s,
	       (unsigned long long)bg.appended,
	       (double)bg.appended / bg.commit_s, (unsigned long long)bg.reads);
	printf("writing it in %u KiB writes: the longest write call took "
	       "%.3f ms, %llu refused (queue full)\n",
	       SNAPSHOT_CHUNK_BYTES >> 10, bg.write.longest_write_ms,
	       (unsigned long long)bg.write.refusals);
	uint64_t segments = 0;
	double rec = recovery_seconds(recovery_entries, &segments);
	printf("\nrecovery of %u entries of %u B (%llu segments): %.3f s "
	       "(%.0f entries/s)\n",
	       recovery_entries, RECOVERY_ENTRY_BYTES,
	       (unsigned long long)segments, rec,
	       (double)recovery_entries / rec);
	struct restart_result rs =
		restart_cost(RESTART_LOG_BYTES, RESTART_OPENS);
	printf("restart with %u MiB of log in a 64 MiB segment (%llu entries "
	       "of %u B): %.1f ms, %.1f ms of CPU (median of %u opens)\n",
	       RESTART_LOG_BYTES >> 20, (unsigned long long)rs.entries,
	       RESTART_ENTRY_BYTES, rs.wall_ms, rs.cpu_ms, RESTART_OPENS);
	if (made) {
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", base_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "bench-storage: could not remove %s\n",
				base_dir);
	}
	return 0;
}
