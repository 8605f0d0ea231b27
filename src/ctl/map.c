/* Admin replies read as maps: alternating field names and values (ctl.h). */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static bool is_string(const redisReply *e)
{
	return e != NULL &&
	       (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS);
}

bool ctl_map_valid(const redisReply *r)
{
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
		return false;
	for (size_t i = 0; i < r->elements; i += 2) {
		const redisReply *v = r->element[i + 1];
		if (!is_string(r->element[i]))
			return false;
		if (!is_string(v) && v->type != REDIS_REPLY_INTEGER &&
		    v->type != REDIS_REPLY_NIL)
			return false;
	}
	return true;
}

static const redisReply *find(const redisReply *map, const char *field)
{
	assert(ctl_map_valid(map));
	size_t n = strlen(field);
	for (size_t i = 0; i < map->elements; i += 2) {
		const redisReply *k = map->element[i];
		if (k->len == n && memcmp(k->str, field, n) == 0)
			return map->element[i + 1];
	}
	return NULL;
}

bool ctl_map_str(const redisReply *map, const char *field, char *out,
		 size_t len)
{
	assert(len > 0);
	const redisReply *v = find(map, field);
	out[0] = '\0';
	if (v == NULL)
		return false;
	if (v->type == REDIS_REPLY_INTEGER) {
		snprintf(out, len, "%lld", v->integer);
		return true;
	}
	if (!is_string(v))
		return false;
	/* A value may hold a NUL: stop there rather than print garbage. */
	size_t n = strnlen(v->str, v->len);
	if (n >= len)
		n = len - 1;
	memcpy(out, v->str, n);
	out[n] = '\0';
	return true;
}

bool ctl_parse_u64(const char *s, uint64_t *out)
{
	if (s == NULL || s[0] < '0' || s[0] > '9')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = (uint64_t)v;
	return true;
}

void ctl_map_str_or_dash(const redisReply *map, const char *field, char *out,
			 size_t len)
{
	if (!ctl_map_str(map, field, out, len) || out[0] == '\0')
		snprintf(out, len, "-");
}

bool ctl_map_u64(const redisReply *map, const char *field, uint64_t *out)
{
	const redisReply *v = find(map, field);
	if (v != NULL && v->type == REDIS_REPLY_INTEGER) {
		if (v->integer < 0)
			return false;
		*out = (uint64_t)v->integer;
		return true;
	}
	char s[CTL_VALUE_MAX];
	if (!ctl_map_str(map, field, s, sizeof s))
		return false;
	return ctl_parse_u64(s, out);
}
