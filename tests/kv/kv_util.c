/* Helpers for the kv tests (kv_util.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "kv_util.h"
#include "resp.h"

static struct baton_buf reply_text;
static struct baton_machine_version version = {1};
static uint64_t stamp;

void kvt_use(uint32_t v, uint64_t stamp_ms)
{
	version.value = v;
	stamp = stamp_ms;
}

static const char *finish(void)
{
	cr_assert_eq(baton_buf_append(&reply_text, "", 1), 0);
	return (const char *)reply_text.data;
}

const char *kvt_runv(struct baton_kv *kv, int argc, const char *const *argv,
		     const size_t *lens)
{
	const uint8_t *const *args = (const uint8_t *const *)argv;
	baton_buf_reset(&reply_text);
	const struct kv_command *c = kv_lookup(args[0], lens[0]);
	if (c == NULL) {
		resp_error(&reply_text, "ERR unknown command");
		return finish();
	}
	if (kv_gate(c, argc, args, lens, version, &reply_text) != 0 ||
	    kv_check(c, argc, args, lens, &reply_text) != 0) {
		cr_assert_gt(reply_text.len, 0, "a refusal without a reply");
		return finish();
	}
	cr_assert_eq(reply_text.len, 0);
	if (c->flags & KV_WRITE) {
		struct baton_buf payload;
		baton_buf_init(&payload);
		if (version.value >= 2)
			cr_assert_eq(
				kv_encode_v2(stamp, argc, args, lens, &payload),
				0);
		else
			cr_assert_eq(kv_encode(argc, args, lens, &payload), 0);
		cr_assert_eq(kv_apply(kv, version, payload.data, payload.len,
				      &reply_text),
			     0);
		baton_buf_free(&payload);
	} else {
		cr_assert_eq(kv_read(kv, argc, args, lens, &reply_text), 0);
	}
	return finish();
}

static int split(const char *line, const char **argv, size_t *lens)
{
	int argc = 0;
	const char *p = line;
	for (;;) {
		const char *sp = strchr(p, ' ');
		size_t n = sp != NULL ? (size_t)(sp - p) : strlen(p);
		cr_assert_lt(argc, KVT_ARGS_MAX);
		argv[argc] = p;
		lens[argc] = n;
		argc++;
		if (sp == NULL)
			return argc;
		p = sp + 1;
	}
}

const char *kvt_run(struct baton_kv *kv, const char *line)
{
	const char *argv[KVT_ARGS_MAX];
	size_t lens[KVT_ARGS_MAX];
	int argc = split(line, argv, lens);
	return kvt_runv(kv, argc, argv, lens);
}

void kvt_encode(const char *line, struct baton_buf *out)
{
	const char *argv[KVT_ARGS_MAX];
	size_t lens[KVT_ARGS_MAX];
	int argc = split(line, argv, lens);
	cr_assert_eq(kv_encode(argc, (const uint8_t *const *)argv, lens, out),
		     0);
}

static int sink(void *arg, const void *buf, size_t len)
{
	return baton_buf_append(arg, buf, len);
}

void kvt_snapshot(const struct baton_kv *kv, struct baton_buf *out)
{
	baton_buf_reset(out);
	cr_assert_eq(kv_snapshot(kv, version, sink, out), 0);
}

struct baton_kv *kvt_new(void)
{
	struct baton_kv *kv = NULL;
	kvt_use(1, 0);
	cr_assert_eq(kv_create(&kv), 0);
	cr_assert_not_null(kv);
	return kv;
}

uint64_t kvt_rand(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1Du;
}
