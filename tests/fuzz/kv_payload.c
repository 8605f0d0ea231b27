/*
 * The state machine's payload decoder and apply (kv_apply, src/kv/
 * payload.c and commands.c): what a committed log entry makes every node
 * do. The first input byte selects the machine version (1 to 3); the rest
 * is a sequence of payloads, each a u16 little-endian length and its bytes
 * (the last one takes what is left). Each payload is applied to two maps:
 * both must answer and end alike (every node applies the same entries to
 * the same state), a refused payload must leave the map and the reply as
 * they were (kv.h), and the final map's snapshot must restore to itself.
 */
#include <string.h>

#include "fuzz.h"
#include "kv_target.h"

struct twins {
	struct baton_kv *a, *b;
	struct baton_buf reply_a, reply_b, before, after;
};

static void apply(struct twins *t, struct baton_machine_version v,
		  const uint8_t *p, size_t len)
{
	fuzz_kv_image(t->a, &t->before);
	size_t reply_len = t->reply_a.len;
	int ra = kv_apply(t->a, v, p, len, &t->reply_a);
	int rb = kv_apply(t->b, v, p, len, &t->reply_b);
	FUZZ_CHECK(ra == rb, "two maps applied a payload with %d and %d", ra,
		   rb);
	FUZZ_CHECK(fuzz_same_bytes(&t->reply_a, &t->reply_b),
		   "two maps replied differently");
	if (ra == 0)
		return;
	FUZZ_CHECK(ra == BATON_ECORRUPT || ra == BATON_EVERSION,
		   "apply returned %d (%s)", ra, kv_errmsg(t->a));
	FUZZ_CHECK(kv_errmsg(t->a)[0] != '\0', "error %d without a message",
		   ra);
	FUZZ_CHECK(t->reply_a.len == reply_len,
		   "a refused payload (%d) appended a reply", ra);
	fuzz_kv_image(t->a, &t->after);
	FUZZ_CHECK(fuzz_same_bytes(&t->before, &t->after),
		   "a refused payload (%d: %s) changed the map", ra,
		   kv_errmsg(t->a));
}

/* Both maps are the same, and the snapshot restores to the same map. */
static void check_end(struct twins *t)
{
	fuzz_kv_image(t->a, &t->before);
	fuzz_kv_image(t->b, &t->after);
	FUZZ_CHECK(fuzz_same_bytes(&t->before, &t->after),
		   "two maps that applied the same payloads differ");
	struct baton_kv *c = NULL;
	FUZZ_CHECK(kv_create(&c) == 0, "out of memory");
	int rv = kv_restore(c, (struct baton_machine_version){3},
			    t->before.data, t->before.len);
	FUZZ_CHECK(rv == 0, "a snapshot does not restore: %d (%s)", rv,
		   kv_errmsg(c));
	fuzz_kv_image(c, &t->after);
	FUZZ_CHECK(fuzz_same_bytes(&t->before, &t->after),
		   "a restored snapshot differs from the map it was made of");
	kv_destroy(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct baton_machine_version v = {1u + data[0] % 3u};
	struct twins t;
	memset(&t, 0, sizeof t);
	FUZZ_CHECK(kv_create(&t.a) == 0 && kv_create(&t.b) == 0,
		   "out of memory");
	baton_buf_init(&t.reply_a);
	baton_buf_init(&t.reply_b);
	baton_buf_init(&t.before);
	baton_buf_init(&t.after);
	for (size_t off = 1; off < size;) {
		size_t len = size - off;
		if (len >= 2) {
			size_t want = (size_t)data[off] | (size_t)data[off + 1]
								  << 8;
			off += 2;
			len = want < size - off ? want : size - off;
		} else {
			off += len;
			len = 0;
		}
		apply(&t, v, data + off, len);
		off += len;
	}
	check_end(&t);
	kv_destroy(t.a);
	kv_destroy(t.b);
	baton_buf_free(&t.reply_a);
	baton_buf_free(&t.reply_b);
	baton_buf_free(&t.before);
	baton_buf_free(&t.after);
	return 0;
}
