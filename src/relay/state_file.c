/*
 * DIR/relay-state: the last durable view number and the active flag.
 */
#include "state_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "baton/assert.h"
#include "baton/errors.h"
#include "file_header.h"
#include "le.h"

static const struct baton__file_kind state_kind = {
	"BTNRELAY", "relay state file", RELAY_STATE_FORMAT, RELAY_STATE_LEN};

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

void relay_state_encode(const struct relay_state *s, uint8_t *out)
{
	BATON_ASSERT(s != NULL && out != NULL);
	baton__file_header_start(out, &state_kind, RELAY_STATE_LEN);
	baton_le_put_u64(out + 16, s->view_number);
	baton_le_put_u32(out + 24, s->active ? 1u : 0u);
	baton__file_header_seal(out, RELAY_STATE_LEN);
	BATON_ASSERT(baton_le_get_u64(out + 16) == s->view_number);
}

int relay_state_decode(const uint8_t *b, size_t n, const char *path,
		       struct relay_state *out, char *err, size_t errlen)
{
	BATON_ASSERT(b != NULL && out != NULL);
	struct baton__file_head head;
	int rc = baton__file_header_check(&state_kind, b, n, path, &head, err,
					  errlen);
	if (rc != 0)
		return rc;
	BATON_ASSERT(head.header_len >= RELAY_STATE_LEN);
	uint32_t active = baton_le_get_u32(b + 24);
	if (active > 1)
		return fail(err, errlen, BATON_ECORRUPT,
			    "%s: active is %u, not 0 or 1 (damaged)", path,
			    active);
	out->view_number = baton_le_get_u64(b + 16);
	out->active = active == 1;
	return 0;
}

int relay_state_load(const char *dir, struct relay_state *out, bool *found,
		     char *err, size_t errlen)
{
	BATON_ASSERT(dir != NULL && found != NULL);
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, RELAY_STATE_FILE);
	memset(out, 0, sizeof(*out));
	*found = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return fail(err, errlen, BATON_EIO, "%s: cannot open: %s", path,
			    strerror(errno));
	/* Room for a longer (newer) header, so its version is what is
	 * reported, not a truncation. */
	uint8_t b[4096];
	ssize_t n = read(fd, b, sizeof(b));
	int saved = errno;
	close(fd);
	if (n < 0)
		return fail(err, errlen, BATON_EIO, "%s: cannot read: %s", path,
			    strerror(saved));
	*found = true;
	return relay_state_decode(b, (size_t)n, path, out, err, errlen);
}

static int write_all(int fd, const uint8_t *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int relay_state_store(const char *dir, const struct relay_state *s, char *err,
		      size_t errlen)
{
	BATON_ASSERT(dir != NULL && s != NULL);
	char path[4096], tmp[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, RELAY_STATE_FILE);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	uint8_t b[RELAY_STATE_LEN];
	relay_state_encode(s, b);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(err, errlen, BATON_EIO, "%s: cannot create: %s",
			    tmp, strerror(errno));
	if (write_all(fd, b, sizeof(b)) != 0 || fsync(fd) != 0) {
		int saved = errno;
		close(fd);
		return fail(err, errlen, BATON_EIO,
			    "%s: cannot write or fsync: %s", tmp,
			    strerror(saved));
	}
	close(fd);
	if (rename(tmp, path) != 0)
		return fail(err, errlen, BATON_EIO,
			    "cannot rename %s to %s: %s", tmp, path,
			    strerror(errno));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) != 0) {
		int saved = errno;
		if (dfd >= 0)
			close(dfd);
		return fail(err, errlen, BATON_EIO, "%s: cannot fsync: %s", dir,
			    strerror(saved));
	}
	close(dfd);
	return 0;
}
