// Least privilege, the pure parts: --user against passwd and group texts,
// capability lists, what the kernel leaves a rank of each --caps, and the
// secrets trainit hides.
#include "exec/privileges.h"

#include <gtest/gtest.h>
#include <linux/capability.h>

#include "base/redact.h"
#include "os/text.h"

namespace trainit {
namespace {

constexpr std::string_view kPasswd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "# a comment\n"
    "ma-user:x:1000:100::/home/ma-user:/bin/bash\n"
    "broken:x:notanumber:1::/:/bin/sh\n"
    "short:x:1001\n"
    "nohome:x:1002:1002:::/bin/sh\n";
constexpr std::string_view kGroup =
    "root:x:0:\n"
    "users:x:100:\n"
    "video:x:44:ma-user,other\n"
    "render:x:105:other,ma-user\n"
    "ma-user-not:x:106:ma-user-x\n"
    "ascend:x:1003:\n";

TEST(ResolveAccount, ANameGivesItsIdsHomeAndEveryGroupListingIt) {
  auto a = resolve_account("ma-user", kPasswd, kGroup);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->name, "ma-user");
  EXPECT_EQ(a->ids.uid, 1000u);
  EXPECT_EQ(a->ids.gid, 100u);
  EXPECT_EQ(a->ids.groups, (std::vector<gid_t>{100, 44, 105}));
  EXPECT_EQ(a->home, "/home/ma-user");
}

TEST(ResolveAccount, AUidNamedInPasswdIsThatUser) {
  auto a = resolve_account("1000", kPasswd, kGroup);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->name, "ma-user");
  EXPECT_EQ(a->ids.gid, 100u);
}

TEST(ResolveAccount, AGroupByNameOrIdReplacesThePrimaryOne) {
  auto a = resolve_account("ma-user:ascend", kPasswd, kGroup);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->ids.gid, 1003u);
  EXPECT_EQ(a->ids.groups, (std::vector<gid_t>{1003, 44, 105}));
  a = resolve_account("ma-user:7", kPasswd, kGroup);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->ids.gid, 7u);
}

TEST(ResolveAccount, UidAndGidNotInPasswdRunWithHomeSlash) {
  auto a = resolve_account("4242:4343", kPasswd, kGroup);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->name, "");
  EXPECT_EQ(a->ids.uid, 4242u);
  EXPECT_EQ(a->ids.gid, 4343u);
  EXPECT_EQ(a->ids.groups, (std::vector<gid_t>{4343}));
  EXPECT_EQ(a->home, "/");
}

TEST(ResolveAccount, WhatDoesNotResolveIsNamed) {
  auto a = resolve_account("nobody-here", kPasswd, kGroup);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message, "--user nobody-here: no user 'nobody-here' in /etc/passwd");
  a = resolve_account("4242", kPasswd, kGroup);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message, "--user 4242: /etc/passwd names no user with uid 4242; give its group too (4242:GID)");
  a = resolve_account("ma-user:nogroup-here", kPasswd, kGroup);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message, "--user ma-user:nogroup-here: no group 'nogroup-here' in /etc/group");
  // Malformed entries are skipped, never half-read.
  EXPECT_FALSE(resolve_account("broken", kPasswd, kGroup));
  EXPECT_FALSE(resolve_account("short", kPasswd, kGroup));
  a = resolve_account("nohome", kPasswd, kGroup);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->home, "/");
}

TEST(CapList, NamesInAnyCaseWithOrWithoutCapPrefix) {
  auto caps = parse_cap_list("CAP_IPC_LOCK, sys_ptrace");
  ASSERT_TRUE(caps) << caps.error().message;
  EXPECT_EQ(*caps, cap_bit(CAP_IPC_LOCK) | cap_bit(CAP_SYS_PTRACE));
  EXPECT_EQ(cap_list_text(*caps), "CAP_IPC_LOCK,CAP_SYS_PTRACE");
  EXPECT_EQ(cap_list_text(0), "none");
  EXPECT_EQ(cap_list_text(all_caps()), "all");
}

TEST(CapList, AnUnknownNameIsRefusedByName) {
  auto caps = parse_cap_list("CAP_IPC_LOCK,CAP_FLY");
  ASSERT_FALSE(caps);
  EXPECT_EQ(caps.error().message, "'CAP_FLY' is no capability (CAP_IPC_LOCK, CAP_SYS_PTRACE, ...)");
  EXPECT_FALSE(parse_cap_list(","));
}

// What a rank's sets are after exec, as the kernel computes them.
TEST(RankCapSets, EachPolicyForRootAndForAnotherUser) {
  const CapSets root{.bounding = all_caps(), .permitted = all_caps(), .effective = all_caps()};
  const UserIds user{1000, 100, {100}};
  const CapMask list = cap_bit(CAP_IPC_LOCK);

  CapSets keep_root = rank_cap_sets(root, 0, nullptr, {CapsPolicy::kKeep, 0});
  EXPECT_EQ(keep_root.permitted, all_caps());
  EXPECT_EQ(keep_root.effective, all_caps());
  CapSets keep_user = rank_cap_sets(root, 0, &user, {CapsPolicy::kKeep, 0});
  EXPECT_EQ(keep_user.permitted, 0u);
  EXPECT_EQ(keep_user.bounding, all_caps());

  EXPECT_EQ(rank_cap_sets(root, 0, nullptr, {CapsPolicy::kDrop, 0}), CapSets{});
  EXPECT_EQ(rank_cap_sets(root, 0, &user, {CapsPolicy::kDrop, 0}), CapSets{});

  CapSets list_root = rank_cap_sets(root, 0, nullptr, {CapsPolicy::kList, list});
  EXPECT_EQ(list_root.bounding, list);
  EXPECT_EQ(list_root.permitted, list);
  CapSets list_user = rank_cap_sets(root, 0, &user, {CapsPolicy::kList, list});
  EXPECT_EQ(list_user, (CapSets{list, list, list, list, list}));
}

// CAP_SYS_PTRACE given to another user's processes lets them read PID 1's
// memory (the job secret included): only with --allow-job-ptrace, and a
// one-line refusal (exit 64) that says so without it. Root's own job, or
// any job without the capability, needs no opt-in.
TEST(JobPrivileges, CapSysPtraceForAnotherUserNeedsTheExplicitOptIn) {
  Options options;
  options.run_user = "1234:100";
  options.caps = {CapsPolicy::kList, cap_bit(CAP_IPC_LOCK) | cap_bit(CAP_SYS_PTRACE)};
  auto refused = JobPrivileges::settle(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().errnum, EINVAL);
  EXPECT_NE(refused.error().message.find("PID 1's memory"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("--allow-job-ptrace"), std::string::npos) << refused.error().message;
  EXPECT_EQ(refused.error().message.find('\n'), std::string::npos);

  options.caps = {CapsPolicy::kList, cap_bit(CAP_IPC_LOCK)};
  auto no_ptrace = JobPrivileges::settle(options);
  EXPECT_TRUE(no_ptrace.ok() || no_ptrace.error().errnum == EPERM) << no_ptrace.error().message;

  options.caps = {CapsPolicy::kList, cap_bit(CAP_SYS_PTRACE)};
  options.allow_job_ptrace = true;
  auto allowed = JobPrivileges::settle(options);
  EXPECT_TRUE(allowed.ok() || allowed.error().errnum == EPERM) << allowed.error().message;  // EPERM: not root

  options.allow_job_ptrace = false;
  options.run_user = "0:0";
  auto root = JobPrivileges::settle(options);
  EXPECT_TRUE(root.ok() || root.error().errnum == EPERM) << root.error().message;
}

TEST(Secrets, SecretLookingNamesAndPatternsAreHiddenOptionVariablesAreNot) {
  const char* envp[] = {"HF_TOKEN=tok-abcdef",
                        "AWS_CREDENTIAL_FILE=/run/creds-file",
                        "MY_WANDB=wandb-value-1",
                        "TRAINIT_SSH_AUTHORIZED_KEYS=/etc/keys-path",
                        "TRAINIT_JOB_SECRET=shared-secret-9",
                        "SHORT_KEY=abc",
                        "PATH=/usr/bin",
                        nullptr};
  register_secrets(envp, {"*_WANDB"});
  EXPECT_EQ(redact("a tok-abcdef b"), "a <redacted> b");
  EXPECT_EQ(redact("/run/creds-file"), "<redacted>");
  EXPECT_EQ(redact("wandb-value-1"), "<redacted>");
  EXPECT_EQ(redact("shared-secret-9!"), "<redacted>!");
  EXPECT_EQ(redact("/etc/keys-path"), "/etc/keys-path");  // an option's value, a setting
  EXPECT_EQ(redact("abc /usr/bin"), "abc /usr/bin");      // too short to hide; not secret
}

TEST(Secrets, RedactPatternsAreGlobs) {
  EXPECT_TRUE(glob_match("WANDB_*", "WANDB_API"));
  EXPECT_TRUE(glob_match("WANDB_*", "WANDB_"));
  EXPECT_FALSE(glob_match("WANDB_*", "MY_WANDB_API"));
  EXPECT_TRUE(glob_match("*_KEYRING_?", "MY_KEYRING_1"));
  EXPECT_FALSE(glob_match("*_KEYRING_?", "MY_KEYRING_12"));
  EXPECT_TRUE(glob_match("A*B*C", "AxxBxxBxxC"));
  EXPECT_TRUE(glob_match("EXACT", "EXACT"));
  EXPECT_FALSE(glob_match("EXACT", "EXACTLY"));
}

TEST(Secrets, TheLoggerWritesNoSecretAndCutsAtItsBuffer) {
  add_secret("a-logged-secret");
  char out[16];
  const size_t n = redact_into("x a-logged-secret y", out, sizeof out);
  EXPECT_EQ(std::string(out, n), "x <redacted> y");
  const size_t cut = redact_into("0123456789 a-logged-secret", out, sizeof out);
  EXPECT_EQ(std::string(out, cut), "0123456789 <reda");
}

// Text escaped before it is redacted (a byte outside printable ASCII as
// \xNN, quotes and backslashes as in a quoted message) still hides it.
TEST(Secrets, TheEscapedFormsOfASecretAreHiddenToo) {
  const std::string secret =
      "w\xc3\xa4"
      "chter\"\\-7";  // wächter"\-7
  add_secret(secret);
  EXPECT_EQ(redact("a " + one_line(secret) + " b"), "a <redacted> b") << one_line(secret);
  EXPECT_EQ(redact("a " + quote_for_message(secret) + " b"), "a \"<redacted>\" b") << quote_for_message(secret);
  // nlohmann::json's dump with ensure_ascii (the status file): \u00e4.
  EXPECT_EQ(redact(R"({"cause": "w\u00e4chter\"\\-7"})"), R"({"cause": "<redacted>"})");
}

// A message that quotes foreign text hides a secret in it before it cuts
// the text: no beginning of the secret is shown.
TEST(Secrets, AQuotedMessageHidesASecretBeforeItCutsIt) {
  const std::string secret = "cut-secret-0123456789";
  add_secret(secret);
  const std::string quoted = quote_for_message(std::string(70, 'x') + secret, 80);
  EXPECT_EQ(quoted.find("cut-sec"), std::string::npos) << quoted;
  EXPECT_NE(quoted.find("<redacted>"), std::string::npos) << quoted;
  EXPECT_EQ(one_line("a\n" + secret), "a\\x0a<redacted>");
}

TEST(Secrets, TheJsonFormOfASecretIsHiddenToo) {
  add_secret("quote\"d-secret");
  EXPECT_EQ(redact(R"({"reason": "quote\"d-secret"})"), R"({"reason": "<redacted>"})");
}

}  // namespace
}  // namespace trainit
