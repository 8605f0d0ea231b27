/* Printing a verdict and the explanation of a violation. */
#include <inttypes.h>

#include "internal.h"

/* Bytes of a value shown before it is cut. */
#define REPORT_VALUE_BYTES 100u

static void print_bytes(FILE *out, const uint8_t *p, size_t len, size_t total)
{
	fputc('"', out);
	for (size_t i = 0; i < len && i < REPORT_VALUE_BYTES; i++) {
		uint8_t c = p[i];
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c > 0x7e)
			fprintf(out, "\\x%02x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
	if (total > REPORT_VALUE_BYTES)
		fprintf(out, "...(%zu bytes)", total);
}

static void print_value(FILE *out, const struct lincheck_history *h,
			struct lincheck_value v)
{
	if (v.tag == LINCHECK_ABSENT)
		fputs(h->missing_reads_empty ? "\"\"" : "(missing)", out);
	else if (v.tag == LINCHECK_PRESENT)
		print_bytes(out, lincheck_value_bytes(h, v), v.len, v.len);
	else
		fputs("?", out);
}

static void print_key(FILE *out, const struct lincheck_history *h, uint32_t key)
{
	struct lincheck_value k = h->keys[key];
	if (k.len == 0 && h->n_keys == 1)
		fputs("the register", out);
	else {
		fputs("key ", out);
		print_value(out, h, k);
	}
}

static void print_op(FILE *out, const struct lincheck_history *h,
		     const struct lincheck_op *op)
{
	fprintf(out, "client %-4" PRIu64 " %s", op->client,
		lincheck_kind_name(op->kind));
	bool ok = op->status == LINCHECK_OK;
	switch (op->kind) {
	case LINCHECK_GET:
		break;
	case LINCHECK_SET:
	case LINCHECK_APPEND:
		fputc(' ', out);
		print_value(out, h, op->arg);
		break;
	case LINCHECK_INCR:
		fprintf(out, " by %" PRId64, op->delta);
		break;
	case LINCHECK_CAS:
		fputc(' ', out);
		print_value(out, h, op->arg);
		fputs(" to ", out);
		print_value(out, h, op->arg2);
		break;
	default:
		break;
	}
	if (ok && op->kind == LINCHECK_GET) {
		fputs(" -> ", out);
		print_value(out, h, op->out);
	} else if (ok && op->kind == LINCHECK_CAS) {
		fputs(op->out_int == 1 ? " -> swapped" : " -> not swapped",
		      out);
	} else if (ok && op->out_known) {
		fprintf(out, " -> %" PRId64, op->out_int);
	}
	static const char *const status[] = {"pending", "ok", "fail", "info"};
	fprintf(out, "  [%s", status[op->status]);
	const char *unit = h->times_are_events ? "" : " ns";
	if (!h->times_are_events)
		fprintf(out, ", invoked %" PRId64 "%s", op->invoke_time, unit);
	fprintf(out, ", line %u", op->invoke_line);
	if (op->complete_line == 0)
		fputs(", never completed", out);
	else if (h->times_are_events)
		fprintf(out, " to %u", op->complete_line);
	else
		fprintf(out, ", completed %" PRId64 "%s, line %u",
			op->complete_time, unit, op->complete_line);
	if (op->status == LINCHECK_INFO)
		fputs(", indeterminate", out);
	fputs("]", out);
}

static void print_explanation(FILE *out, const struct lincheck_history *h,
			      const struct lincheck_explanation *e)
{
	fputs("  ", out);
	print_key(out, h, e->key);
	fprintf(out,
		": the longest linearizable prefix found has %u of its %u "
		"operations\n",
		e->prefix_len, e->key_ops);
	fputs("  value after that prefix: ", out);
	if (e->value_tag == LINCHECK_ABSENT)
		fputs("(missing)", out);
	else if (e->value_tag == LINCHECK_UNKNOWN)
		fputs("(holds an append that no read returned)", out);
	else
		print_bytes(out, e->value,
			    e->value_len < LINCHECK_EXPLAIN_VALUE_BYTES
				    ? e->value_len
				    : LINCHECK_EXPLAIN_VALUE_BYTES,
			    e->value_len);
	fputc('\n', out);
	if (e->n_tail > 0)
		fputs("  the prefix ends with:\n", out);
	for (uint32_t k = 0; k < e->n_tail; k++) {
		fputs("    ", out);
		print_op(out, h, &h->ops[e->tail[k]]);
		fputc('\n', out);
	}
	fputs("  then this operation must come before it completes, but "
	      "cannot:\n",
	      out);
	uint32_t shown = e->n_pending < LINCHECK_EXPLAIN_OPS_MAX
				 ? e->n_pending
				 : LINCHECK_EXPLAIN_OPS_MAX;
	for (uint32_t k = 0; k < shown; k++) {
		if (k == 1)
			fputs("  and neither can the operations concurrent "
			      "with it:\n",
			      out);
		fputs("    ", out);
		print_op(out, h, &h->ops[e->pending[k]]);
		if (e->why[k] == LINCHECK_WHY_MODEL) {
			fputs("\n      not possible in that state\n", out);
		} else if (e->why[k] == LINCHECK_WHY_UNREADABLE) {
			const struct lincheck_op *r = &h->ops[e->blocker[k]];
			fprintf(out,
				"\n      possible, but then the %s of client "
				"%" PRIu64 " at line %u could never ",
				lincheck_kind_name(r->kind), r->client,
				r->invoke_line);
			if (r->kind == LINCHECK_GET) {
				fputs("read ", out);
				print_value(out, h, r->out);
			} else {
				fprintf(out, "return %" PRId64, r->out_int);
			}
			fputc('\n', out);
		} else {
			fputs("\n      possible, but nothing can follow it\n",
			      out);
		}
	}
	if (e->n_pending > shown)
		fprintf(out, "    ... and %u more\n", e->n_pending - shown);
}

static void print_elapsed(FILE *out, const struct lincheck_result *res)
{
	if (res->elapsed_ns > 0)
		fprintf(out, ", %.3f s", (double)res->elapsed_ns / 1e9);
}

void lincheck_result_print(FILE *out, const char *name,
			   const struct lincheck_history *h,
			   const struct lincheck_result *res, bool explain)
{
	switch (res->verdict) {
	case LINCHECK_LINEARIZABLE:
		fprintf(out,
			"%s: linearizable (%u operations on %u keys searched, "
			"%" PRIu64 " configurations",
			name, res->ops_checked, res->keys_checked,
			res->configurations);
		print_elapsed(out, res);
		fputs(")\n", out);
		return;
	case LINCHECK_NOT_LINEARIZABLE:
		fprintf(out, "%s: NOT linearizable (", name);
		print_key(out, h, res->why.key);
		fprintf(out, ", %" PRIu64 " configurations",
			res->configurations);
		print_elapsed(out, res);
		fputs(")\n", out);
		if (explain)
			print_explanation(out, h, &res->why);
		return;
	default:
		fprintf(out, "%s: unknown: %s while checking ", name,
			lincheck_strerror(res->unknown_reason));
		if (res->unknown_key < h->n_keys)
			print_key(out, h, res->unknown_key);
		fprintf(out, " (%" PRIu64 " configurations",
			res->configurations);
		print_elapsed(out, res);
		fputs(")\n", out);
		return;
	}
}
