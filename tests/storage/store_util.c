#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_util.h"

void tmpdir_make(char *out, size_t cap)
{
	snprintf(out, cap, "/tmp/baton-storage-XXXXXX");
	cr_assert_not_null(mkdtemp(out));
}

void tmpdir_remove(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

void payload_fill(uint8_t *buf, uint32_t len, baton_index index,
		  baton_term term)
{
	uint64_t x = index * 0x9e3779b97f4a7c15ull ^ term;
	for (uint32_t i = 0; i < len; i++) {
		x ^= x >> 31;
		x *= 0xbf58476d1ce4e5b9ull;
		buf[i] = (uint8_t)(x >> 56);
	}
}

struct baton_entry *entries_make(baton_index first, uint32_t n, baton_term term,
				 uint32_t len)
{
	struct baton_entry *e = calloc(n > 0 ? n : 1, sizeof *e);
	cr_assert_not_null(e);
	for (uint32_t i = 0; i < n; i++) {
		e[i].index = first + i;
		e[i].term = term;
		e[i].type = BATON_ENTRY_COMMAND;
		e[i].len = len;
		e[i].buf = malloc(len > 0 ? len : 1);
		cr_assert_not_null(e[i].buf);
		payload_fill(e[i].buf, len, e[i].index, term);
	}
	return e;
}

void entries_free(struct baton_entry *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(e[i].buf);
	free(e);
}

bool entry_intact(const struct baton_entry *e, uint32_t len)
{
	if (e->len != len || e->type != BATON_ENTRY_COMMAND)
		return false;
	uint8_t *want = malloc(len > 0 ? len : 1);
	payload_fill(want, len, e->index, e->term);
	bool ok = memcmp(want, e->buf, len) == 0;
	free(want);
	return ok;
}

struct baton_storage *store_open(const char *dir, uint64_t segment_bytes,
				 struct baton_vfs *vfs)
{
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = dir;
	if (segment_bytes)
		o.segment_bytes = segment_bytes;
	o.vfs = vfs;
	struct baton_storage *s = NULL;
	char err[512] = "";
	int rv = baton_fs_storage_open(&o, &s, err, sizeof err);
	cr_assert_eq(rv, 0, "open %s: %s (%s)", dir, baton_err_name(rv), err);
	return s;
}

int store_open_fail(const char *dir, struct baton_vfs *vfs, char *err,
		    size_t errlen)
{
	struct baton_fs_options o;
	baton_fs_options_default(&o);
	o.dir = dir;
	o.vfs = vfs;
	struct baton_storage *s = NULL;
	int rv = baton_fs_storage_open(&o, &s, err, errlen);
	if (rv == 0)
		s->ops->close(s);
	return rv;
}

uint64_t file_size(const char *path)
{
	struct stat st;
	cr_assert_eq(stat(path, &st), 0, "%s", path);
	return (uint64_t)st.st_size;
}

void file_peek(const char *path, uint64_t off, void *buf, size_t n)
{
	int fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(pread(fd, buf, n, (off_t)off), (ssize_t)n, "%s", path);
	close(fd);
}

void file_poke(const char *path, uint64_t off, const void *buf, size_t n)
{
	int fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(pwrite(fd, buf, n, (off_t)off), (ssize_t)n, "%s", path);
	close(fd);
}

struct wait {
	uint64_t seq;
	int status;
	bool seen;
	uint64_t last_seq;
};

static void on_done(void *data, uint64_t seq, int status)
{
	struct wait *w = data;
	cr_assert_gt(seq, w->last_seq, "completions out of order");
	w->last_seq = seq;
	if (seq == w->seq) {
		w->status = status;
		w->seen = true;
	}
}

int store_write(struct baton_storage *s, const struct baton_update *u)
{
	struct wait w = {0};
	int rv = s->ops->submit(s, u, &w.seq);
	if (rv != 0)
		return rv;
	baton_fs_storage_flush(s);
	s->ops->poll(s, on_done, &w);
	cr_assert(w.seen, "submission %llu never completed",
		  (unsigned long long)w.seq);
	return w.status;
}

int store_append(struct baton_storage *s, baton_index truncate_from,
		 const struct baton_entry *e, uint32_t n)
{
	struct baton_update u = {0};
	u.truncate_from = truncate_from;
	u.entries = e;
	u.n_entries = n;
	u.persist_needed = true;
	return store_write(s, &u);
}

int store_hard_state(struct baton_storage *s, baton_term term,
		     baton_node_id vote)
{
	struct baton_update u = {0};
	u.hard_state_changed = true;
	u.hs_term = term;
	u.hs_vote = vote;
	u.persist_needed = true;
	return store_write(s, &u);
}

int store_snapshot_write(struct baton_storage *s, struct baton_snapshot_sink *k,
			 const void *buf, size_t len)
{
	/* The queue drains by itself: try again a little later, without
	 * needing the storage's notify (10 s at most). */
	for (int i = 0; i < 10000; i++) {
		int rv = s->ops->snapshot_write(k, buf, len);
		if (rv != BATON_EAGAIN)
			return rv;
		struct timespec ts = {0, 1000000L};
		nanosleep(&ts, NULL);
	}
	cr_assert_fail("the snapshot queue did not drain within 10 s");
	return BATON_EAGAIN;
}

int store_snapshot_written(struct baton_storage *s, baton_index index,
			   baton_term term, size_t len,
			   struct baton_snapshot_sink **out)
{
	struct baton_snapshot_header h = {0};
	h.meta.index = index;
	h.meta.term = term;
	h.meta.config.n = 1;
	h.meta.config.members[0].id = 1;
	h.meta.config.members[0].role = BATON_VOTER;
	h.meta.config_index = 1;
	baton_version_state_initial(&h.meta.versions);
	struct baton_snapshot_sink *k;
	int rv = s->ops->snapshot_begin(s, &h, &k);
	if (rv != 0)
		return rv;
	uint8_t *data = malloc(len > 0 ? len : 1);
	payload_fill(data, (uint32_t)len, index, term);
	size_t half = len / 2;
	rv = store_snapshot_write(s, k, data, half);
	if (rv == 0)
		rv = store_snapshot_write(s, k, data + half, len - half);
	free(data);
	if (rv != 0) {
		s->ops->snapshot_abort(k);
		return rv;
	}
	*out = k;
	return 0;
}

int store_snapshot(struct baton_storage *s, baton_index index, baton_term term,
		   size_t len)
{
	struct baton_snapshot_sink *k;
	int rv = store_snapshot_written(s, index, term, len, &k);
	return rv != 0 ? rv : s->ops->snapshot_commit(k);
}

void store_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}
