/*
 * batonctl roll's output (progress lines or JSON events, one per line) and
 * its one child: the restart command, run with /bin/sh -c (roll.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "roll.h"

#define KILL_GRACE_MS 2000
#define OUTPUT_LINE_MAX 1024u

uint64_t roll_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void roll_sleep_ms(int ms)
{
	assert(ms >= 0);
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

void roll_out_init(struct roll_out *out, bool json)
{
	out->json = json;
	out->start_ns = roll_now_ns();
	/* Progress must reach a pipe as it happens. */
	setvbuf(stdout, NULL, _IOLBF, 0);
}

double roll_elapsed_s(const struct roll_out *out)
{
	return (double)(roll_now_ns() - out->start_ns) / 1e9;
}

void roll_emit(const struct roll_out *out, const char *event,
	       const struct roll_field *fields, size_t n_fields,
	       const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	double t = roll_elapsed_s(out);
	if (!out->json) {
		printf("[+%.1fs] %s\n", t, msg);
		fflush(stdout);
		return;
	}
	/* "mono": the system's CLOCK_MONOTONIC, comparable with what other
	 * processes of this machine read from it (a test's own record). */
	printf("{\"t\": %.3f, \"mono\": %.6f, \"event\": ", t,
	       (double)roll_now_ns() / 1e9);
	ctl_json_string(event);
	fputs(", \"message\": ", stdout);
	ctl_json_string(msg);
	for (size_t i = 0; i < n_fields; i++) {
		const struct roll_field *f = &fields[i];
		fputs(", ", stdout);
		ctl_json_string(f->key);
		fputs(": ", stdout);
		if (f->kind == ROLL_NUM)
			printf("%" PRIu64, f->num);
		else if (f->kind == ROLL_RAW)
			fputs(f->str, stdout);
		else if (f->str == NULL)
			fputs("null", stdout);
		else
			ctl_json_string(f->str);
	}
	fputs("}\n", stdout);
	fflush(stdout);
}

void roll_say(const struct roll_out *out, const char *fmt, ...)
{
	if (out->json)
		return;
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

/* Print the complete lines of buf[0..*len) with the prefix; keep the
 * rest (or flush it all when `all`, or when one line overflows). */
static void pass_lines(const struct roll_out *out, char *buf, size_t *len,
		       const char *prefix, bool all)
{
	FILE *to = out->json ? stderr : stdout;
	size_t start = 0;
	for (size_t i = 0; i < *len; i++) {
		if (buf[i] != '\n')
			continue;
		fprintf(to, "%s%.*s\n", prefix, (int)(i - start), buf + start);
		start = i + 1;
	}
	if ((all || (start == 0 && *len == OUTPUT_LINE_MAX)) && start < *len) {
		fprintf(to, "%s%.*s\n", prefix, (int)(*len - start),
			buf + start);
		start = *len;
	}
	memmove(buf, buf + start, *len - start);
	*len -= start;
	fflush(to);
}

static void kill_group(pid_t pid)
{
	/* The group of the child started below, and nothing else. */
	kill(-pid, SIGTERM);
	for (int waited = 0; waited < KILL_GRACE_MS; waited += 50) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		roll_sleep_ms(50);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

int roll_run_command(const struct roll_out *out, const char *cmd,
		     const char *prefix, int timeout_ms, char *why,
		     size_t why_len)
{
	assert(cmd != NULL && timeout_ms > 0);
	int fds[2];
	if (pipe(fds) != 0) {
		snprintf(why, why_len, "pipe: %s", strerror(errno));
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, why_len, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid); /* both sides: whichever runs first */
	close(fds[1]);
	char buf[OUTPUT_LINE_MAX];
	size_t len = 0;
	uint64_t deadline = roll_now_ns() + (uint64_t)timeout_ms * 1000000u;
	bool exited = false;
	int status = 0;
	while (!exited && roll_now_ns() < deadline) {
		/* A background child the command left behind may hold the
		 * pipe open: the command's own exit ends the wait, after the
		 * output already written is passed on. */
		exited = waitpid(pid, &status, WNOHANG) == pid;
		struct pollfd p = {.fd = fds[0], .events = POLLIN};
		while (poll(&p, 1, exited ? 0 : 100) > 0) {
			ssize_t n = read(fds[0], buf + len, sizeof buf - len);
			if (n <= 0) {
				if (!exited)
					roll_sleep_ms(20); /* EOF: wait() */
				break;
			}
			len += (size_t)n;
			pass_lines(out, buf, &len, prefix, false);
		}
	}
	pass_lines(out, buf, &len, prefix, true);
	bool timed_out = !exited;
	close(fds[0]);
	if (timed_out) {
		kill_group(pid);
		snprintf(why, why_len,
			 "it did not return within %d s (stopped it)",
			 timeout_ms / 1000);
		return -1;
	}
	if (WIFSIGNALED(status)) {
		snprintf(why, why_len, "it was killed by signal %d",
			 WTERMSIG(status));
		return 128 + WTERMSIG(status);
	}
	int code = WEXITSTATUS(status);
	snprintf(why, why_len, "it exited with status %d", code);
	return code;
}

bool roll_command_expand(const char *templ, uint64_t id, const char *release,
			 char *out, size_t len)
{
	char id_text[24];
	snprintf(id_text, sizeof id_text, "%" PRIu64, id);
	size_t at = 0;
	for (const char *p = templ; *p;) {
		const char *with = NULL;
		size_t skip = 1;
		if (strncmp(p, "{id}", 4) == 0) {
			with = id_text;
			skip = 4;
		} else if (strncmp(p, "{release}", 9) == 0) {
			with = release;
			skip = 9;
		}
		size_t n = with ? strlen(with) : 1;
		if (at + n + 1 > len)
			return false;
		memcpy(out + at, with ? with : p, n);
		at += n;
		p += skip;
	}
	out[at] = '\0';
	return true;
}
