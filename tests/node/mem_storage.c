/* The storage in memory of the node tests (mem_storage.h). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mem_storage.h"

struct mem_sink {
	struct mem_storage *s;
	struct baton_snapshot_header h;
	struct baton_buf data;
};

static int mem_load(struct baton_storage *bs, struct baton_durable_state *out)
{
	struct mem_storage *s = (struct mem_storage *)bs;
	*out = s->init;
	memset(&s->init, 0, sizeof s->init);
	return 0;
}

static int mem_submit(struct baton_storage *bs, const struct baton_update *u,
		      uint64_t *seq)
{
	(void)u;
	struct mem_storage *s = (struct mem_storage *)bs;
	*seq = ++s->submitted;
	return 0;
}

static unsigned mem_poll(struct baton_storage *bs, baton_storage_done_cb cb,
			 void *data)
{
	struct mem_storage *s = (struct mem_storage *)bs;
	unsigned n = 0;
	while (s->completed < s->submitted) {
		cb(data, ++s->completed, 0);
		n++;
	}
	return n;
}

static int mem_snapshot_begin(struct baton_storage *bs,
			      const struct baton_snapshot_header *h,
			      struct baton_snapshot_sink **out)
{
	if (((struct mem_storage *)bs)->refuse_snapshots)
		return BATON_EIO;
	struct mem_sink *k = calloc(1, sizeof *k);
	cr_assert_not_null(k);
	k->s = (struct mem_storage *)bs;
	k->h = *h;
	*out = (struct baton_snapshot_sink *)k;
	return 0;
}

static int mem_snapshot_write(struct baton_snapshot_sink *bk, const void *buf,
			      size_t len)
{
	struct mem_sink *k = (struct mem_sink *)bk;
	return baton_buf_append(&k->data, buf, len);
}

static int mem_snapshot_commit(struct baton_snapshot_sink *bk)
{
	struct mem_sink *k = (struct mem_sink *)bk;
	baton_buf_free(&k->s->snap);
	k->s->snap = k->data;
	if (k->s->has_snapshot &&
	    k->h.meta.index - k->s->snap_h.meta.index < k->s->min_gap)
		k->s->min_gap = k->h.meta.index - k->s->snap_h.meta.index;
	k->s->snap_h = k->h;
	k->s->has_snapshot = true;
	k->s->snapshots++;
	free(k);
	return 0;
}

static void mem_snapshot_abort(struct baton_snapshot_sink *bk)
{
	struct mem_sink *k = (struct mem_sink *)bk;
	baton_buf_free(&k->data);
	free(k);
}

static int mem_snapshot_read(struct baton_storage *bs, baton_index index,
			     uint64_t offset, void *buf, size_t cap,
			     size_t *n_out)
{
	(void)bs, (void)index, (void)offset, (void)buf, (void)cap;
	*n_out = 0;
	return BATON_ENOTFOUND;
}

static const char *mem_errmsg(const struct baton_storage *bs)
{
	(void)bs;
	return "memory";
}

static void mem_close(struct baton_storage *bs)
{
	(void)bs;
}

const struct baton_storage_ops mem_storage_ops = {
	.load = mem_load,
	.submit = mem_submit,
	.poll = mem_poll,
	.snapshot_begin = mem_snapshot_begin,
	.snapshot_write = mem_snapshot_write,
	.snapshot_commit = mem_snapshot_commit,
	.snapshot_abort = mem_snapshot_abort,
	.snapshot_read = mem_snapshot_read,
	.errmsg = mem_errmsg,
	.close = mem_close,
};
