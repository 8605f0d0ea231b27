/* --maxmemory's arithmetic (memory_limit.h). */
#include "memory_limit.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A run of decimal digits at *p, advanced past it: false when there is
 * none or it does not fit 64 bits. */
static bool digits(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (!isdigit((unsigned char)*s))
		return false;
	for (; isdigit((unsigned char)*s); s++) {
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return true;
}

bool memory_parse_bytes(const char *text, uint64_t *out)
{
	static const struct {
		const char *name;
		uint64_t mul;
	} units[] = {
		{"", 1},
		{"k", 1000},
		{"kb", 1024},
		{"m", 1000 * 1000},
		{"mb", 1024 * 1024},
		{"g", 1000 * 1000 * 1000},
		{"gb", (uint64_t)1024 * 1024 * 1024},
	};
	const char *p = text;
	uint64_t n;
	if (text == NULL || !digits(&p, &n))
		return false;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strcasecmp(p, units[i].name) != 0)
			continue;
		if (n > MEMORY_LIMIT_MAX / units[i].mul)
			return false;
		*out = n * units[i].mul;
		return true;
	}
	return false;
}

bool memory_parse_cgroup_max(const char *text, uint64_t *out)
{
	const char *p = text;
	uint64_t n;
	if (text == NULL || !digits(&p, &n))
		return false; /* "max", or nothing readable */
	while (*p == '\n' || *p == ' ')
		p++;
	if (*p != '\0')
		return false;
	*out = n;
	return true;
}

bool memory_parse_meminfo_total(const char *text, uint64_t *out)
{
	if (text == NULL)
		return false;
	for (const char *line = text; line != NULL && *line != '\0';) {
		if (strncmp(line, "MemTotal:", 9) == 0) {
			const char *p = line + 9;
			while (*p == ' ' || *p == '\t')
				p++;
			uint64_t kib;
			if (!digits(&p, &kib) || strncmp(p, " kB", 3) != 0 ||
			    kib > UINT64_MAX / 1024)
				return false;
			*out = kib * 1024;
			return true;
		}
		line = strchr(line, '\n');
		if (line != NULL)
			line++;
	}
	return false;
}

uint64_t memory_default_limit(uint64_t avail)
{
	if (avail == 0)
		return 0;
	uint64_t share = avail / 100 * MEMORY_DEFAULT_SHARE_PERCENT +
			 avail % 100 * MEMORY_DEFAULT_SHARE_PERCENT / 100;
	if (share > MEMORY_LIMIT_MAX)
		share = MEMORY_LIMIT_MAX;
	return share < MEMORY_LIMIT_MIN ? MEMORY_LIMIT_MIN : share;
}

bool memory_warn_state(uint64_t used, uint64_t limit, bool warned)
{
	if (limit == 0)
		return false;
	/* used * 100 could overflow; limit / 100 loses at most 99 bytes. */
	uint64_t warn_at = limit / 100 * MEMORY_WARN_PERCENT;
	uint64_t clear_at = limit / 100 * MEMORY_WARN_CLEAR_PERCENT;
	if (!warned)
		return used >= warn_at;
	return used >= clear_at;
}

void memory_human(uint64_t bytes, char *out, size_t cap)
{
	const char *units = "BKMGTP";
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024 && u + 1 < strlen(units)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, cap, "%" PRIu64 "B", bytes);
	else
		snprintf(out, cap, "%.2f%c", v, units[u]);
}
