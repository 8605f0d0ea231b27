/*
 * relay-make-golden DIR [--hex]: writes the golden frames of the relay
 * protocol (golden_frames.c) into DIR/<name>.bin, once. A file already
 * there is never rewritten: it is compared with what the encoder makes
 * now, and a difference is an error (the encoder changed a frozen byte).
 * --hex also prints each frame in hex, for docs/relay-protocol.md.
 *
 * Run once when a golden frame is added:
 *   build/relay-make-golden tests/relay/golden
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_frames.h"

static uint8_t frame_buf[1u << 16];
static uint8_t file_buf[1u << 16];

static void print_hex(const char *name, const uint8_t *p, size_t len)
{
	printf("%s (%zu bytes):\n", name, len);
	for (size_t i = 0; i < len; i++)
		printf("%02x%s", p[i],
		       (i + 1) % 16 == 0 || i + 1 == len ? "\n" : " ");
}

/* 0: written or the same; 1: differs or unreadable. */
static int one(const char *dir, const struct golden_frame *g, int hex)
{
	size_t len;
	struct baton_relay_err err;
	int rv = baton_relay_encode(&g->frame, g->dir, frame_buf,
				    sizeof frame_buf, &len, &err);
	if (rv != 0) {
		fprintf(stderr, "%s: encode: %d (%s)\n", g->name, rv, err.text);
		return 1;
	}
	if (hex)
		print_hex(g->name, frame_buf, len);
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.bin", dir, g->name);
	size_t n = golden_read(dir, g->name, file_buf, sizeof file_buf);
	if (n != SIZE_MAX) {
		if (n == len && memcmp(file_buf, frame_buf, len) == 0)
			return 0;
		fprintf(stderr,
			"%s: the encoder no longer gives its %zu bytes (%zu "
			"now): a frozen frame changed; fix the encoder, never "
			"the file\n",
			path, n, len);
		return 1;
	}
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(frame_buf, 1, len, f) != len ||
	    fclose(f) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return 1;
	}
	printf("wrote %s (%zu bytes)\n", path, len);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--hex"))) {
		fprintf(stderr, "usage: relay-make-golden DIR [--hex]\n");
		return 2;
	}
	size_t n;
	const struct golden_frame *g = golden_frames(&n);
	int failed = 0;
	for (size_t i = 0; i < n; i++)
		failed |= one(argv[1], &g[i], argc == 3);
	return failed;
}
