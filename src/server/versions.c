/*
 * The version facts as an operator reads them (INFO "# Versions",
 * BATON.NODE, BATON.DOWNGRADE STATUS) and the arguments of
 * BATON.DOWNGRADE: text in, text out, nothing else, so tests/server
 * checks them alone.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "baton/assert.h"
#include "server.h"

static bool release_none(struct baton_release r)
{
	return r.major == 0 && r.minor == 0 && r.patch == 0;
}

const char *versions_floor_text(struct baton_release floor,
				char buf[BATON_RELEASE_STR_MAX])
{
	if (release_none(floor)) {
		snprintf(buf, BATON_RELEASE_STR_MAX, "none");
		return buf;
	}
	return baton_release_format(floor, buf);
}

void versions_downgrade_text(const struct baton_downgrade *d, char *buf,
			     size_t cap)
{
	char t[BATON_RELEASE_STR_MAX], f[BATON_RELEASE_STR_MAX];
	if (release_none(d->target)) {
		snprintf(buf, cap, "none");
		return;
	}
	snprintf(buf, cap, "%s (from floor %s, machine %u)",
		 baton_release_format(d->target, t),
		 versions_floor_text(d->prev_floor, f), d->prev_machine.value);
}

void versions_eligible_text(uint32_t eligibility, const char *why, char *buf,
			    size_t cap)
{
	if (eligibility == BATON_ELIGIBLE)
		snprintf(buf, cap, "yes");
	else if (why != NULL && why[0] != '\0')
		snprintf(buf, cap, "no (%s)", why);
	else
		snprintf(buf, cap, "no (%s)",
			 eligibility == BATON_INELIGIBLE_FLOOR ? "rule 1"
			 : eligibility == BATON_INELIGIBLE_MINORITY
				 ? "rule 2"
				 : "not a voter");
}

const char *versions_policy_name(uint32_t policy)
{
	return policy == BATON_ELECTION_ANY ? "any" : "version-aware";
}

void versions_pending_text(const struct baton_version_state *s,
			   const struct baton_config *c,
			   struct baton_release target, char *buf, size_t cap)
{
	size_t used = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < c->n && used + 1 < cap; i++) {
		baton_node_id id = c->members[i].id;
		const struct baton_member_versions *row =
			baton_version_state_find(s, id);
		char r[BATON_RELEASE_STR_MAX];
		if (row != NULL &&
		    baton_release_compare(row->profile.release, target) == 0)
			continue;
		int k = snprintf(
			buf + used, cap - used, "%snode %" PRIu64 ": %s",
			used > 0 ? "; " : "", id,
			row != NULL
				? baton_release_format(row->profile.release, r)
				: "unknown");
		if (k < 0)
			break;
		used += (size_t)k;
	}
}

void versions_loss_kinds(const struct baton_machine_loss *l, char *buf,
			 size_t cap)
{
	BATON_ASSERT(cap > 0);
	BATON_ASSERT(l->n <= BATON_MACHINE_LOSS_KINDS_MAX);
	snprintf(buf, cap, "none");
	size_t used = 0;
	for (uint32_t i = 0; i < l->n && used < cap; i++) {
		int k = snprintf(buf + used, cap - used, "%s%s:%" PRIu64,
				 i > 0 ? " " : "", l->kinds[i].name,
				 l->kinds[i].items);
		if (k < 0)
			break;
		used += (size_t)k;
	}
}

/* ---- BATON.DOWNGRADE's arguments ----------------------------------------- */

static bool arg_is(const uint8_t *arg, size_t len, const char *word)
{
	return len == strlen(word) &&
	       strncasecmp((const char *)arg, word, len) == 0;
}

static const struct {
	const char *word;
	enum downgrade_sub sub;
} subs[] = {
	{"VALIDATE", DOWNGRADE_VALIDATE},
	{"ENABLE", DOWNGRADE_ENABLE},
	{"CANCEL", DOWNGRADE_CANCEL},
	{"STATUS", DOWNGRADE_STATUS},
};

int versions_downgrade_parse(int argc, const uint8_t *const *argv,
			     const size_t *lens, struct downgrade_args *out,
			     char *err, size_t cap)
{
	memset(out, 0, sizeof *out);
	int k = -1;
	for (size_t i = 0; argc >= 2 && i < sizeof subs / sizeof subs[0]; i++)
		if (arg_is(argv[1], lens[1], subs[i].word))
			k = (int)i;
	if (k < 0) {
		snprintf(err, cap,
			 "ERR usage: BATON.DOWNGRADE VALIDATE|ENABLE <release> "
			 "[FORCE] | CANCEL <release> | STATUS");
		return -1;
	}
	out->sub = subs[k].sub;
	if (out->sub == DOWNGRADE_STATUS) {
		if (argc == 2)
			return 0;
		snprintf(err, cap, "ERR usage: BATON.DOWNGRADE STATUS");
		return -1;
	}
	bool may_force = out->sub != DOWNGRADE_CANCEL;
	if (argc == 4 && may_force && arg_is(argv[3], lens[3], "FORCE"))
		out->force = true;
	else if (argc != 3) {
		snprintf(err, cap, "ERR usage: BATON.DOWNGRADE %s <release>%s",
			 subs[k].word, may_force ? " [FORCE]" : "");
		return -1;
	}
	char r[32];
	size_t n = lens[2] < sizeof r - 1 ? lens[2] : sizeof r - 1;
	memcpy(r, argv[2], n);
	r[n] = '\0';
	if (lens[2] >= sizeof r || baton_release_parse(r, &out->target) != 0 ||
	    release_none(out->target)) {
		snprintf(err, cap,
			 "ERR '%s' is not a release (major.minor.patch)", r);
		return -1;
	}
	return 0;
}
