// Least privilege, the pure parts: --user against passwd and group texts,
// capability lists, what the kernel leaves a rank of each --caps, and the
// secrets trainit hides.
#include "privileges.h"

#include <gtest/gtest.h>
#include <linux/capability.h>

#include "base/redact.h"

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

TEST(Secrets, TheLoggerWritesNoSecretAndCutsAtItsBuffer) {
  add_secret("a-logged-secret");
  char out[16];
  const size_t n = redact_into("x a-logged-secret y", out, sizeof out);
  EXPECT_EQ(std::string(out, n), "x <redacted> y");
  const size_t cut = redact_into("0123456789 a-logged-secret", out, sizeof out);
  EXPECT_EQ(std::string(out, cut), "0123456789 <reda");
}

TEST(Secrets, TheJsonFormOfASecretIsHiddenToo) {
  add_secret("quote\"d-secret");
  EXPECT_EQ(redact(R"({"reason": "quote\"d-secret"})"), R"({"reason": "<redacted>"})");
}

}  // namespace
}  // namespace trainit
