/*
 * The version facts as operators read them (src/server/versions.c): the
 * release floor, the downgrade in progress, leader eligibility, the
 * election policy, who a downgrade waits for, the refusal when converting
 * down would drop TTLs, and BATON.DOWNGRADE's arguments.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "server.h"

static struct baton_release rel(const char *s)
{
	struct baton_release r;
	cr_assert_eq(baton_release_parse(s, &r), 0);
	return r;
}

Test(versions, floor_text)
{
	char buf[BATON_RELEASE_STR_MAX];
	struct baton_release none = {0, 0, 0};
	cr_assert_str_eq(versions_floor_text(none, buf), "none");
	cr_assert_str_eq(versions_floor_text(rel("1.1.0"), buf), "1.1.0");
}

Test(versions, downgrade_text)
{
	char buf[96];
	struct baton_downgrade d;
	memset(&d, 0, sizeof d);
	versions_downgrade_text(&d, buf, sizeof buf);
	cr_assert_str_eq(buf, "none");
	d.target = rel("1.0.0");
	d.prev_floor = rel("1.1.0");
	d.prev_machine.value = 2;
	d.since = 57;
	versions_downgrade_text(&d, buf, sizeof buf);
	cr_assert_str_eq(buf, "1.0.0 (from floor 1.1.0, machine 2)");
}

Test(versions, eligible_text_and_policy)
{
	char buf[256];
	versions_eligible_text(BATON_ELIGIBLE, "", buf, sizeof buf);
	cr_assert_str_eq(buf, "yes");
	versions_eligible_text(BATON_INELIGIBLE_FLOOR,
			       "rule 1: release 1.0.0 is below the release "
			       "floor 1.1.0 of the log",
			       buf, sizeof buf);
	cr_assert_str_eq(buf, "no (rule 1: release 1.0.0 is below the release "
			      "floor 1.1.0 of the log)");
	versions_eligible_text(BATON_INELIGIBLE_MINORITY, NULL, buf,
			       sizeof buf);
	cr_assert_str_eq(buf, "no (rule 2)");
	versions_eligible_text(BATON_INELIGIBLE_NOT_VOTER, "", buf, sizeof buf);
	cr_assert_str_eq(buf, "no (not a voter)");
	cr_assert_str_eq(versions_policy_name(BATON_ELECTION_ANY), "any");
	cr_assert_str_eq(versions_policy_name(BATON_ELECTION_VERSION_AWARE),
			 "version-aware");
}

Test(versions, pending_names_members_on_another_release)
{
	struct baton_version_state s;
	baton_version_state_initial(&s);
	struct baton_config c = {.n = 3};
	for (uint32_t i = 0; i < 3; i++)
		c.members[i] =
			(struct baton_member){.id = i + 1, .role = BATON_VOTER};
	s.n = 2;
	s.members[0].id = 1;
	s.members[0].profile = *baton_release_find(rel("1.0.0"));
	s.members[1].id = 2;
	s.members[1].profile = *baton_release_find(rel("1.1.0"));
	char buf[256];
	versions_pending_text(&s, &c, rel("1.0.0"), buf, sizeof buf);
	cr_assert_str_eq(buf, "node 2: 1.1.0; node 3: unknown");
	versions_pending_text(&s, &c, rel("1.1.0"), buf, sizeof buf);
	cr_assert_str_eq(buf, "node 1: 1.0.0; node 3: unknown");
	/* Cut short, never overrun. */
	char small[12];
	versions_pending_text(&s, &c, rel("1.0.0"), small, sizeof small);
	cr_assert_eq(strlen(small), sizeof small - 1);
	c.n = 2;
	s.members[1].profile = *baton_release_find(rel("1.0.0"));
	versions_pending_text(&s, &c, rel("1.0.0"), buf, sizeof buf);
	cr_assert_str_eq(buf, "");
}

Test(versions, loss_kinds)
{
	char buf[160];
	struct baton_machine_loss l;
	memset(&l, 0, sizeof l);
	versions_loss_kinds(&l, buf, sizeof buf);
	cr_assert_str_eq(buf, "none");
	l.n = 2;
	l.kinds[0] = (struct baton_machine_loss_kind){"hashes_deleted", {3}, 1};
	l.kinds[1] = (struct baton_machine_loss_kind){"ttls_dropped", {2}, 12};
	versions_loss_kinds(&l, buf, sizeof buf);
	cr_assert_str_eq(buf, "hashes_deleted:1 ttls_dropped:12");
	versions_loss_kinds(&l, buf, 10);
	cr_assert_str_eq(buf, "hashes_de");
}

/* ---- BATON.DOWNGRADE's arguments ---- */

static struct downgrade_args args;
static char err[256];

static int parse(int argc, const char *const *words)
{
	const uint8_t *argv[8];
	size_t lens[8];
	cr_assert_leq(argc, 8);
	for (int i = 0; i < argc; i++) {
		argv[i] = (const uint8_t *)words[i];
		lens[i] = strlen(words[i]);
	}
	err[0] = '\0';
	return versions_downgrade_parse(argc, argv, lens, &args, err,
					sizeof err);
}

#define PARSE(...)                                                             \
	parse((int)(sizeof((const char *const[]){__VA_ARGS__}) /               \
		    sizeof(const char *)),                                     \
	      (const char *const[]){__VA_ARGS__})

Test(downgrade_args, accepted_forms)
{
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "VALIDATE", "1.0.0"), 0);
	cr_assert_eq(args.sub, DOWNGRADE_VALIDATE);
	cr_assert_eq(baton_release_compare(args.target, rel("1.0.0")), 0);
	cr_assert_not(args.force);
	cr_assert_eq(PARSE("baton.downgrade", "enable", "1.0.0", "force"), 0);
	cr_assert_eq(args.sub, DOWNGRADE_ENABLE);
	cr_assert(args.force);
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "VALIDATE", "1.1.0", "FORCE"), 0);
	cr_assert(args.force);
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "Cancel", "1.0.0"), 0);
	cr_assert_eq(args.sub, DOWNGRADE_CANCEL);
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "STATUS"), 0);
	cr_assert_eq(args.sub, DOWNGRADE_STATUS);
}

Test(downgrade_args, refused_forms_say_why)
{
	cr_assert_eq(PARSE("BATON.DOWNGRADE"), -1);
	cr_assert(strstr(err, "ERR usage: BATON.DOWNGRADE VALIDATE|ENABLE") ==
		  err);
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "UPGRADE", "1.0.0"), -1);
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "ENABLE"), -1);
	cr_assert_str_eq(err, "ERR usage: BATON.DOWNGRADE ENABLE <release> "
			      "[FORCE]");
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "CANCEL", "1.0.0", "FORCE"), -1);
	cr_assert_str_eq(err, "ERR usage: BATON.DOWNGRADE CANCEL <release>");
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "ENABLE", "1.0.0", "NOW"), -1);
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "STATUS", "1.0.0"), -1);
	cr_assert_str_eq(err, "ERR usage: BATON.DOWNGRADE STATUS");
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "ENABLE", "1.0"), -1);
	cr_assert_str_eq(err, "ERR '1.0' is not a release (major.minor.patch)");
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "ENABLE", "0.0.0"), -1);
	cr_assert_eq(PARSE("BATON.DOWNGRADE", "VALIDATE",
			   "1.0.0.0000000000000000000000000000000000000"),
		     -1);
	cr_assert(strstr(err, "is not a release") != NULL);
}
