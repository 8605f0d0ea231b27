/*
 * The map's lifecycle and its two entry points: kv_apply() for committed
 * writes, kv_read() for local reads.
 */
#include <assert.h>
#include <stdlib.h>

#include "internal.h"
#include "resp.h"

int kv_create(struct baton_kv **out)
{
	struct baton_kv *kv = calloc(1, sizeof *kv);
	if (kv == NULL)
		return BATON_ENOMEM;
	int rv = kv__table_init(&kv->table, 0);
	if (rv != 0) {
		free(kv);
		return rv;
	}
	baton_buf_init(&kv->scratch);
	*out = kv;
	return 0;
}

void kv_destroy(struct baton_kv *kv)
{
	if (kv == NULL)
		return;
	kv__table_free(&kv->table);
	baton_buf_free(&kv->scratch);
	free(kv);
}

uint64_t kv_dbsize(const struct baton_kv *kv)
{
	return kv->table.count;
}

int kv_apply(struct baton_kv *kv, struct baton_machine_version v,
	     const uint8_t *payload, size_t len, struct baton_buf *reply)
{
	if (v.value < KV_MACHINE_VERSION_MIN ||
	    v.value > KV_MACHINE_VERSION_MAX)
		return BATON_EVERSION;
	struct kv__payload p;
	int rv = kv__payload_decode(payload, len, &p);
	if (rv != 0)
		return rv;
	const struct kv__args *a = &p.args;
	const struct kv_command *c = kv_lookup(a->argv[0], a->lens[0]);
	if (c == NULL) {
		rv = BATON_EVERSION;
	} else if (!(c->flags & KV_WRITE)) {
		rv = BATON_ECORRUPT;
	} else {
		struct baton_buf *out = reply != NULL ? reply : &kv->scratch;
		size_t start = out->len;
		uint64_t count = kv->table.count;
		rv = kv__check(c, a, out);
		if (rv == BATON_EINVAL)
			rv = 0; /* refused alike everywhere: the -ERR is the
				   reply */
		else if (rv == 0)
			rv = c->run(kv, a, out);
		if (rv != 0) {
			assert(rv == BATON_ENOMEM && kv->table.count == count);
			out->len = start;
		}
		baton_buf_reset(&kv->scratch);
	}
	kv__payload_free(&p);
	return rv;
}

int kv_read(struct baton_kv *kv, int argc, const uint8_t *const *argv,
	    const size_t *lens, struct baton_buf *reply)
{
	assert(argc >= 1);
	const struct kv_command *c = kv_lookup(argv[0], lens[0]);
	if (c == NULL || !(c->flags & KV_READ)) {
		resp_error(reply, "ERR '%.*s' is not a read command",
			   (int)(lens[0] < 64 ? lens[0] : 64),
			   (const char *)argv[0]);
		return BATON_EINVAL;
	}
	struct kv__args a = {argc, argv, lens};
	size_t start = reply->len;
	int rv = kv__check(c, &a, reply);
	if (rv == BATON_EINVAL)
		return 0; /* the -ERR is the reply */
	if (rv == 0)
		rv = c->run(kv, &a, reply);
	if (rv != 0)
		reply->len = start;
	return rv;
}
