/*
 * What the key-value machine holds in memory (kv_memory_bytes, kv.h):
 * every allocation of src/kv goes through these wrappers, which count the
 * bytes the allocator really gave (malloc_usable_size, so its rounding is
 * in the figure), and the bucket arrays mapped from the system are
 * counted where they are mapped (table.c). One process-wide counter, kept
 * with relaxed atomics: it is read as a figure, never to order memory.
 *
 * Why count here rather than ask the allocator (mallinfo2): mallinfo2
 * walks every free chunk of every arena, milliseconds on a fragmented heap,
 * too slow to ask before every write; this is one atomic add per
 * allocation.
 */
#define _GNU_SOURCE /* malloc_usable_size */
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

static _Atomic uint64_t held_bytes;

static void add(size_t n)
{
	atomic_fetch_add_explicit(&held_bytes, (uint64_t)n,
				  memory_order_relaxed);
}

static void sub(size_t n)
{
	atomic_fetch_sub_explicit(&held_bytes, (uint64_t)n,
				  memory_order_relaxed);
}

void *kv__malloc(size_t n)
{
	void *p = malloc(n);
	if (p != NULL)
		add(malloc_usable_size(p));
	return p;
}

void *kv__calloc(size_t n, size_t size)
{
	void *p = calloc(n, size);
	if (p != NULL)
		add(malloc_usable_size(p));
	return p;
}

void *kv__realloc(void *p, size_t n)
{
	size_t before = p != NULL ? malloc_usable_size(p) : 0;
	void *q = realloc(p, n);
	if (q == NULL)
		return NULL; /* p is untouched, and so is the count */
	sub(before);
	add(malloc_usable_size(q));
	return q;
}

void kv__free(void *p)
{
	if (p == NULL)
		return;
	sub(malloc_usable_size(p));
	free(p);
}

void kv__mapped(size_t bytes, bool mapped)
{
	if (mapped)
		add(bytes);
	else
		sub(bytes);
}

uint64_t kv_memory_bytes(void)
{
	return atomic_load_explicit(&held_bytes, memory_order_relaxed);
}
