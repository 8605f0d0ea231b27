/* Network copies, a disk and a state machine for tests and the core
 * benchmark (fixture.h). */
#include "fixture.h"
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "le.h"

/* ---- messages ------------------------------------------------------------ */

/* The pipeline's own copy (one block, out->mem). */
void fx_msg_copy(struct fx_msg *out, const struct baton_msg *m)
{
	struct baton_msg_copy c;
	if (baton_msg_copy(&c, m) != 0)
		abort(); /* a test that runs out of memory cannot go on */
	out->m = c.msg;
	out->mem = c.mem;
}

void fx_msg_release(struct fx_msg *x)
{
	free(x->mem);
	memset(x, 0, sizeof *x);
}

/* ---- the disk ------------------------------------------------------------ */

static struct fx_disk *to_disk(struct baton_storage *s)
{
	return (struct fx_disk *)s;
}

static int d_load(struct baton_storage *s, struct baton_durable_state *out)
{
	struct fx_disk *d = to_disk(s);
	return d->inner->ops->load(d->inner, out);
}

static int d_submit(struct baton_storage *s, const struct baton_update *u,
		    uint64_t *seq_out)
{
	struct fx_disk *d = to_disk(s);
	int rv = d->inner->ops->submit(d->inner, u, seq_out);
	if (rv != 0)
		return rv;
	d->queued++;
	if (!d->held)
		fx_disk_complete_next(d);
	return 0;
}

struct poll_ctx {
	struct fx_disk *d;
	baton_storage_done_cb cb;
	void *data;
};

static void on_done(void *data, uint64_t seq, int status)
{
	struct poll_ctx *c = data;
	c->d->reported_n++;
	c->cb(c->data, seq, status);
}

static unsigned d_poll(struct baton_storage *s, baton_storage_done_cb cb,
		       void *data)
{
	struct fx_disk *d = to_disk(s);
	struct poll_ctx c = {d, cb, data};
	return d->inner->ops->poll(d->inner, on_done, &c);
}

static int d_snapshot_begin(struct baton_storage *s,
			    const struct baton_snapshot_header *h,
			    struct baton_snapshot_sink **out)
{
	struct fx_disk *d = to_disk(s);
	return d->inner->ops->snapshot_begin(d->inner, h, out);
}

/* The sinks are the simulated disk's; its ops serve them (the fx_disk
 * that made one is not needed to finish it). */
static const struct baton_storage_ops *sink_ops;

static int d_snapshot_write(struct baton_snapshot_sink *k, const void *buf,
			    size_t len)
{
	return sink_ops->snapshot_write(k, buf, len);
}

static int d_snapshot_commit(struct baton_snapshot_sink *k)
{
	return sink_ops->snapshot_commit(k);
}

static void d_snapshot_abort(struct baton_snapshot_sink *k)
{
	sink_ops->snapshot_abort(k);
}

static int d_snapshot_read(struct baton_storage *s, baton_index index,
			   uint64_t offset, void *buf, size_t cap,
			   size_t *n_out)
{
	struct fx_disk *d = to_disk(s);
	return d->inner->ops->snapshot_read(d->inner, index, offset, buf, cap,
					    n_out);
}

static const char *d_errmsg(const struct baton_storage *s)
{
	const struct fx_disk *d = (const struct fx_disk *)s;
	return d->inner->ops->errmsg(d->inner);
}

static void d_close(struct baton_storage *s)
{
	fx_disk_close(to_disk(s));
}

static const struct baton_storage_ops fx_disk_ops = {
	.load = d_load,
	.submit = d_submit,
	.poll = d_poll,
	.snapshot_begin = d_snapshot_begin,
	.snapshot_write = d_snapshot_write,
	.snapshot_commit = d_snapshot_commit,
	.snapshot_abort = d_snapshot_abort,
	.snapshot_read = d_snapshot_read,
	.errmsg = d_errmsg,
	.close = d_close,
};

struct baton_storage *fx_disk_open(struct fx_disk *d, baton_node_id id)
{
	d->base.ops = &fx_disk_ops;
	d->inner = sim_disk_open(&d->durable, id);
	sink_ops = d->inner->ops;
	d->queued = 0;
	d->durable_n = 0;
	d->reported_n = 0;
	return &d->base;
}

bool fx_disk_unreported(const struct fx_disk *d)
{
	return d->inner != NULL && d->reported_n < d->durable_n;
}

bool fx_disk_complete_next(struct fx_disk *d)
{
	if (d->inner == NULL || d->queued == 0)
		return false;
	sim_disk_complete_next(d->inner);
	d->queued--;
	d->durable_n++;
	return true;
}

void fx_disk_hold(struct fx_disk *d, bool held)
{
	d->held = held;
	if (!held)
		while (fx_disk_complete_next(d))
			;
}

void fx_disk_crash(struct fx_disk *d)
{
	if (d->inner == NULL)
		return;
	sim_disk_crash(d->inner);
	d->queued = 0;
	fx_disk_close(d);
}

void fx_disk_close(struct fx_disk *d)
{
	if (d->inner == NULL)
		return;
	d->inner->ops->close(d->inner);
	d->inner = NULL;
	d->queued = 0;
}

void fx_disk_free(struct fx_disk *d)
{
	fx_disk_close(d);
	sim_disk_free(&d->durable);
}

/* ---- the recording machine ----------------------------------------------- */

static struct fx_machine *to_machine(struct baton_machine *m)
{
	return (struct fx_machine *)m;
}

static int m_apply(struct baton_machine *bm, struct baton_machine_version v,
		   const struct baton_entry *e, struct baton_buf *reply)
{
	struct fx_machine *m = to_machine(bm);
	(void)v;
	if (m->refuse_from != 0 && e->index >= m->refuse_from) {
		snprintf(m->errmsg, sizeof m->errmsg,
			 "entry %llu refused by the test",
			 (unsigned long long)e->index);
		return BATON_EVERSION;
	}
	m->commands++;
	m->last = e->index;
	if (reply != NULL)
		return baton_buf_append(reply, e->buf, e->len);
	return 0;
}

static int m_snapshot(struct baton_machine *bm, struct baton_machine_version v,
		      struct baton_buf *out)
{
	struct fx_machine *m = to_machine(bm);
	(void)v;
	uint8_t head[8];
	baton_le_put_u64(head, m->commands);
	int rv = baton_buf_append(out, head, sizeof head);
	for (size_t i = 0; rv == 0 && i < m->snapshot_pad; i++)
		rv = baton_buf_append(out, "p", 1);
	return rv;
}

static int m_restore(struct baton_machine *bm, struct baton_machine_version v,
		     const uint8_t *buf, size_t len)
{
	struct fx_machine *m = to_machine(bm);
	(void)v;
	if (m->refuse_restore) {
		snprintf(m->errmsg, sizeof m->errmsg,
			 "snapshot refused by the test");
		return BATON_EVERSION;
	}
	/* Tests hand nodes snapshots of their own making: any bytes go,
	 * the count being 0 when there are fewer than 8. */
	m->commands = len >= 8 ? baton_le_get_u64(buf) : 0;
	m->restores++;
	return 0;
}

static int m_version_changed(struct baton_machine *bm, baton_index index,
			     struct baton_machine_version from,
			     struct baton_machine_version to)
{
	struct fx_machine *m = to_machine(bm);
	m->version_changes++;
	m->changed_at = index;
	m->changed_from = from.value;
	m->changed_to = to.value;
	return 0;
}

static const char *m_errmsg(const struct baton_machine *bm)
{
	return ((const struct fx_machine *)bm)->errmsg;
}

static const struct baton_machine_ops fx_machine_ops = {
	.apply = m_apply,
	.version_changed = m_version_changed,
	.snapshot = m_snapshot,
	.restore = m_restore,
	.errmsg = m_errmsg,
};

void fx_machine_init(struct fx_machine *m)
{
	memset(m, 0, sizeof *m);
	m->base.ops = &fx_machine_ops;
}

/* ---- driving a pipeline -------------------------------------------------- */

void fx_settle(struct baton_pipeline *p, const struct fx_disk *d)
{
	baton_pipeline_flush(p);
	for (;;) {
		/* A snapshot due is written whole within the turn: the
		 * scenarios look at it right after. */
		while (baton_pipeline_has_work(p))
			baton_pipeline_work(p);
		if (!fx_disk_unreported(d))
			break;
		baton_pipeline_storage_ready(p);
		baton_pipeline_flush(p);
	}
}

static void request_done(void *data, int status)
{
	(void)data;
	(void)status;
}

int fx_feed_request(struct baton_pipeline *p, const struct baton_event *ev,
		    bool *handled)
{
	*handled = true;
	switch (ev->type) {
	case BATON_EVENT_TICK:
		baton_pipeline_tick(p);
		return 0;
	case BATON_EVENT_RECEIVE:
		baton_pipeline_receive(p, ev->u.receive.msg);
		return 0;
	case BATON_EVENT_TRANSFER:
		return baton_pipeline_transfer(p, ev->u.transfer.target,
					       request_done, NULL);
	case BATON_EVENT_ADD_LEARNER:
		return baton_pipeline_add_learner(p, ev->u.member.id,
						  request_done, NULL);
	case BATON_EVENT_PROMOTE:
		return baton_pipeline_promote(p, ev->u.member.id, request_done,
					      NULL);
	case BATON_EVENT_REMOVE:
		return baton_pipeline_remove(p, ev->u.member.id, request_done,
					     NULL);
	case BATON_EVENT_VERSIONS:
		return baton_pipeline_set_versions(p, ev->u.versions.state,
						   request_done, NULL);
	case BATON_EVENT_DOWNGRADE:
		return baton_pipeline_downgrade(p, ev->u.downgrade.op,
						ev->u.downgrade.target,
						request_done, NULL);
	case BATON_EVENT_PEER_CLOSED:
		baton_pipeline_peer_closed(p, ev->u.peer_closed.id);
		return 0;
	default:
		*handled = false;
		return 0;
	}
}
