/*
 * The baton history format: writer. Events come out ordered by time, then
 * by the line they came from, so a history read from a baton file whose
 * lines were in time order is written back in the same order. What the
 * format cannot say (Porcupine's "a missing key reads as the empty
 * string") is not written.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct event {
	int64_t time;
	uint32_t line;
	uint32_t op;
	uint8_t completion;
};

static int event_cmp(const void *a, const void *b)
{
	const struct event *x = a;
	const struct event *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->op != y->op)
		return x->op < y->op ? -1 : 1;
	return (int)x->completion - (int)y->completion;
}

static bool put_value(FILE *f, const struct lincheck_history *h,
		      struct lincheck_value v)
{
	if (v.tag == LINCHECK_ABSENT)
		return fputs("\t-", f) >= 0;
	if (v.tag != LINCHECK_PRESENT)
		return fputs("\t?", f) >= 0;
	return fputs("\t=", f) >= 0 &&
	       lincheck__escape_write(f, lincheck_value_bytes(h, v), v.len);
}

static bool put_int(FILE *f, bool known, int64_t v)
{
	if (!known)
		return fputs("\t?", f) >= 0;
	return fprintf(f, "\t%lld", (long long)v) >= 0;
}

static bool put_invoke(FILE *f, const struct lincheck_history *h,
		       const struct lincheck_op *op)
{
	switch (op->kind) {
	case LINCHECK_SET:
	case LINCHECK_APPEND:
		return put_value(f, h, op->arg);
	case LINCHECK_INCR:
		return put_int(f, true, op->delta);
	case LINCHECK_CAS:
		return put_value(f, h, op->arg) && put_value(f, h, op->arg2);
	default:
		return true;
	}
}

static bool put_ok(FILE *f, const struct lincheck_history *h,
		   const struct lincheck_op *op)
{
	switch (op->kind) {
	case LINCHECK_GET:
		return put_value(f, h, op->out);
	case LINCHECK_SET:
		return true;
	default:
		return put_int(f, op->out_known, op->out_int);
	}
}

static bool put_event(FILE *f, const struct lincheck_history *h,
		      const struct event *e)
{
	static const char *const types[] = {"invoke", "ok", "fail", "info"};
	const struct lincheck_op *op = &h->ops[e->op];
	struct lincheck_value key = h->keys[op->key];
	uint8_t type = e->completion ? op->status : LINCHECK_PENDING;
	if (fprintf(f, "%lld\t%llu\t%s\t%s\t", (long long)e->time,
		    (unsigned long long)op->client, types[type],
		    lincheck_kind_name(op->kind)) < 0 ||
	    !lincheck__escape_write(f, lincheck_value_bytes(h, key), key.len))
		return false;
	bool ok = true;
	if (type == LINCHECK_PENDING)
		ok = put_invoke(f, h, op);
	else if (type == LINCHECK_OK)
		ok = put_ok(f, h, op);
	return ok && fputc('\n', f) != EOF;
}

int lincheck_write_baton(FILE *out, const struct lincheck_history *h)
{
	struct event *events = NULL;
	if (h->n_ops > 0) {
		events = calloc((size_t)h->n_ops * 2, sizeof(*events));
		if (events == NULL)
			return LINCHECK_ENOMEM;
	}
	size_t n = 0;
	for (uint32_t i = 0; i < h->n_ops; i++) {
		const struct lincheck_op *op = &h->ops[i];
		events[n++] =
			(struct event){op->invoke_time, op->invoke_line, i, 0};
		if (op->complete_time >= 0 && op->status != LINCHECK_PENDING)
			events[n++] = (struct event){op->complete_time,
						     op->complete_line, i, 1};
	}
	if (n > 0)
		qsort(events, n, sizeof(*events), event_cmp);
	bool ok = fprintf(out, "baton-history\t%u\n",
			  LINCHECK_BATON_FORMAT_VERSION) >= 0;
	for (size_t i = 0; ok && i < n; i++)
		ok = put_event(out, h, &events[i]);
	free(events);
	return ok && fflush(out) == 0 ? 0 : LINCHECK_EIO;
}
