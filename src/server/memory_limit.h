/*
 * --maxmemory's arithmetic (memory.c, docs/operations.md "Memory"),
 * free of files and the server so that unit tests can throw anything at
 * it (tests/server/test_memory_limit.c).
 */
#ifndef BATON_SERVER_MEMORY_LIMIT_H
#define BATON_SERVER_MEMORY_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The default bound is this share of the memory the process may use (the
 * cgroup's limit, else the machine's): the rest is for what the bound
 * does not count (the allocator's free lists, client buffers, a
 * snapshot's or a backup's work), and those grow with the data too. */
#define MEMORY_DEFAULT_SHARE_PERCENT 50u
/* A warning in the log when usage crosses this share of the bound, and
 * another once it fell back under MEMORY_WARN_CLEAR_PERCENT (so a usage
 * hovering at the line warns once, not at every write). */
#define MEMORY_WARN_PERCENT 80u
#define MEMORY_WARN_CLEAR_PERCENT 75u
/* The smallest bound (below it a node could not even hold its own
 * configuration), and the largest (2^62: beyond any machine). */
#define MEMORY_LIMIT_MIN ((uint64_t)1 << 20)
#define MEMORY_LIMIT_MAX ((uint64_t)1 << 62)

/* Redis's memory units: a whole number of bytes, or with a unit, in any
 * case: k, m, g (1000, 1000^2, 1000^3) or kb, mb, gb (1024, 1024^2,
 * 1024^3), as "700mb" or "1gb". 0 is fine (no bound). True with *out;
 * false for anything else, or a value above MEMORY_LIMIT_MAX. */
bool memory_parse_bytes(const char *text, uint64_t *out);

/* The cgroup v2 memory.max file's text: a number of bytes (true, *out) or
 * "max" (false: no limit); false also for anything unreadable. */
bool memory_parse_cgroup_max(const char *text, uint64_t *out);

/* MemTotal of /proc/meminfo's text, in bytes: true with *out, false when
 * absent or malformed. */
bool memory_parse_meminfo_total(const char *text, uint64_t *out);

/* The default bound for a process that may use `avail` bytes (the
 * smaller of the cgroup's limit and the machine's memory):
 * MEMORY_DEFAULT_SHARE_PERCENT of it, at least MEMORY_LIMIT_MIN; 0 (no
 * bound) when avail is 0 (unknown). */
uint64_t memory_default_limit(uint64_t avail);

/* The 80 % warning's state after usage `used` under bound `limit`, given
 * whether it had warned: true while warned (crossed MEMORY_WARN_PERCENT,
 * not yet back under MEMORY_WARN_CLEAR_PERCENT). limit 0: never. */
bool memory_warn_state(uint64_t used, uint64_t limit, bool warned);

/* "1.50M", as Redis's bytesToHuman, into out. */
void memory_human(uint64_t bytes, char *out, size_t cap);

#endif /* BATON_SERVER_MEMORY_LIMIT_H */
