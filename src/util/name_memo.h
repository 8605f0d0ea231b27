/*
 * The last command name looked up, as the client sent it: a pipeline
 * repeats one command, so a lookup by name (the command tables, the
 * metrics' per-command slots) first asks whether the name is the one it
 * answered last. The answer itself is the caller's to keep beside it.
 * Names longer than the memo are simply not remembered.
 *
 * Header-only and libc-only.
 */
#ifndef BATON_UTIL_NAME_MEMO_H
#define BATON_UTIL_NAME_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Room for the longest command name (Redis's are under 20 bytes). */
#define BATON_NAME_MEMO_MAX 32u

struct baton_name_memo {
	uint8_t name[BATON_NAME_MEMO_MAX];
	size_t len; /* 0: nothing remembered */
};

/* Whether `name` is the name remembered last (byte for byte). */
static inline bool baton_name_memo_is(const struct baton_name_memo *m,
				      const uint8_t *name, size_t len)
{
	return len > 0 && len == m->len && memcmp(m->name, name, len) == 0;
}

/* Remember `name`; false (and nothing remembered) if it does not fit, so
 * that the caller keeps its previous answer only for the previous name. */
static inline bool baton_name_memo_set(struct baton_name_memo *m,
				       const uint8_t *name, size_t len)
{
	if (len == 0 || len > sizeof m->name) {
		m->len = 0;
		return false;
	}
	memcpy(m->name, name, len);
	m->len = len;
	return true;
}

#endif
