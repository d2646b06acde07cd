#include "exec/privileges.h"

#include <fmt/core.h>
#include <linux/capability.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "base/number.h"
#include "base/safe_fs.h"
#include "os/fs.h"

namespace trainit {
namespace {

// /etc/passwd and /etc/group are small; a larger one is not a passwd file.
constexpr size_t kMaxAccountsFile = 16 << 20;

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (size_t colon = line.find(':'); colon != std::string_view::npos; colon = line.find(':', start)) {
    fields.push_back(line.substr(start, colon - start));
    start = colon + 1;
  }
  fields.push_back(line.substr(start));
  return fields;
}

// Calls `each` with the fields of every entry of a passwd or group text
// until it returns true; skips comments and lines with fewer than `min` fields.
template <typename Fn>
void for_each_entry(std::string_view text, size_t min, Fn each) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    auto fields = fields_of(line);
    if (fields.size() >= min && each(fields)) {
      return;
    }
  }
}

std::optional<unsigned> id_of(std::string_view text) {
  // 2^32 - 1 is (uid_t)-1: "no change" to setresuid, never an id.
  auto n = parse_decimal(text, 0, 4294967294U);
  return n ? std::optional(static_cast<unsigned>(*n)) : std::nullopt;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

struct PasswdEntry {
  std::string name;
  unsigned uid = 0;
  unsigned gid = 0;
  std::string home;
};

// The entry for a name, or for a uid when `user` is digits.
std::optional<PasswdEntry> find_user(std::string_view passwd, std::string_view user) {
  std::optional<PasswdEntry> found;
  for_each_entry(passwd, 7, [&](const std::vector<std::string_view>& f) {
    auto uid = id_of(f[2]);
    auto gid = id_of(f[3]);
    if (!uid || !gid || (all_digits(user) ? id_of(user) != uid : f[0] != user)) {
      return false;
    }
    found = PasswdEntry{std::string(f[0]), *uid, *gid, std::string(f[5])};
    return true;
  });
  return found;
}

std::optional<unsigned> find_group(std::string_view group, std::string_view name) {
  if (all_digits(name)) {
    return id_of(name);
  }
  std::optional<unsigned> gid;
  for_each_entry(group, 4, [&](const std::vector<std::string_view>& f) {
    if (f[0] != name) {
      return false;
    }
    gid = id_of(f[2]);
    return gid.has_value();
  });
  return gid;
}

// The primary group, then every group listing `name` as a member.
std::vector<gid_t> groups_of(std::string_view group, std::string_view name, gid_t primary) {
  std::vector<gid_t> groups{primary};
  if (name.empty()) {
    return groups;
  }
  for_each_entry(group, 4, [&](const std::vector<std::string_view>& f) {
    std::string_view members = f[3];
    auto gid = id_of(f[2]);
    while (gid && !members.empty()) {
      const size_t comma = members.find(',');
      if (members.substr(0, comma) == name && std::find(groups.begin(), groups.end(), *gid) == groups.end()) {
        groups.push_back(*gid);
      }
      members = comma == std::string_view::npos ? std::string_view{} : members.substr(comma + 1);
    }
    return false;
  });
  return groups;
}

std::string ids_text(const Account& a) {
  std::string groups;
  for (gid_t g : a.ids.groups) {
    groups += (groups.empty() ? "" : ",") + std::to_string(g);
  }
  return fmt::format("{}(uid {}, gid {}, groups {})", a.name.empty() ? "" : a.name + " ", a.ids.uid, a.ids.gid, groups);
}

// An environment entry "NAME=..." for `name`.
bool names(const std::string& entry, std::string_view name) {
  return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 && entry[name.size()] == '=';
}

void set_variable(std::vector<std::string>& env, std::string_view name, const std::string& value) {
  const std::string entry = fmt::format("{}={}", name, value);
  auto it = std::find_if(env.begin(), env.end(), [name](const std::string& e) { return names(e, name); });
  if (it != env.end()) {
    *it = entry;
  } else {
    env.push_back(entry);
  }
}

}  // namespace

Result<Account> resolve_account(std::string_view spec, std::string_view passwd, std::string_view group) {
  const size_t colon = spec.find(':');
  const std::string_view user = spec.substr(0, colon);
  const std::string_view group_part = colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
  Account account;
  auto entry = find_user(passwd, user);
  if (entry) {
    account.name = entry->name;
    account.ids.uid = entry->uid;
    account.ids.gid = entry->gid;
    account.home = entry->home.empty() ? "/" : entry->home;
  } else if (all_digits(user) && id_of(user)) {
    if (group_part.empty()) {
      return Error{fmt::format("--user {}: /etc/passwd names no user with uid {}; give its group too ({}:GID)", spec,
                               user, user),
                   ENOENT};
    }
    account.ids.uid = *id_of(user);
    account.home = "/";
  } else {
    return Error{fmt::format("--user {}: no user '{}' in /etc/passwd", spec, user), ENOENT};
  }
  if (!group_part.empty()) {
    auto gid = find_group(group, group_part);
    if (!gid) {
      return Error{fmt::format("--user {}: no group '{}' in /etc/group", spec, group_part), ENOENT};
    }
    account.ids.gid = *gid;
  }
  account.ids.groups = groups_of(group, account.name, account.ids.gid);
  return account;
}

Result<Account> resolve_account(std::string_view spec) {
  RealFileSystem fs;
  std::string texts[2];
  const char* paths[2] = {"/etc/passwd", "/etc/group"};
  for (int i = 0; i < 2; ++i) {
    auto text = fs.read_file(paths[i], kMaxAccountsFile);
    if (!text && text.error().errnum != ENOENT) {
      return Error{fmt::format("--user {}: cannot read {}: {}", spec, paths[i], text.error().message),
                   text.error().errnum};
    }
    texts[i] = text ? std::move(*text) : std::string();
  }
  return resolve_account(spec, texts[0], texts[1]);
}

Result<JobPrivileges> JobPrivileges::settle_asked(const Options& options) {
  JobPrivileges p;
  if (!options.run_user.empty()) {
    auto account = resolve_account(options.run_user);
    if (!account) {
      return account.error();
    }
    p.account_ = std::move(*account);
    // What the job's user owns is trusted now (base/safe_fs.h).
    safe_fs::trust_job_user(p.account_->ids.uid, p.account_->ids.gid);
  }
  p.caps_ = options.caps;
  p.no_new_privs_ = options.no_new_privs;
  // A process that may ptrace PID 1 reads and writes its memory (the job
  // secret, every peer's trust) and so has root's power over it: never
  // given to another user by accident.
  if (p.account_ && p.account_->ids.uid != 0 && p.caps_.policy == CapsPolicy::kList &&
      (p.caps_.list & cap_bit(CAP_SYS_PTRACE)) != 0 && !options.allow_job_ptrace) {
    return Error{fmt::format("--caps {} with --user {}: CAP_SYS_PTRACE lets the job's processes read and write "
                             "PID 1's memory (the job secret included), root's power over trainit; "
                             "add --allow-job-ptrace to mean it",
                             cap_list_text(p.caps_.list), options.run_user),
                 EINVAL};
  }
  if (!p.account_ && p.caps_.policy == CapsPolicy::kKeep && !p.no_new_privs_) {
    return p;  // the processes run as trainit does: nothing to check or apply
  }
  auto credentials = Credentials::make(p.account_ ? &p.account_->ids : nullptr, p.caps_, p.no_new_privs_);
  if (!credentials) {
    const std::string who = p.account_ ? fmt::format("--user {}: ", options.run_user) : std::string();
    return Error{who + credentials.error().message, credentials.error().errnum};
  }
  p.credentials_ = std::move(*credentials);
  return p;
}

void JobPrivileges::set_identity(std::vector<std::string>& env) const {
  if (!account_) {
    return;
  }
  set_variable(env, "HOME", account_->home);
  const std::string name = account_->name.empty() ? std::to_string(account_->ids.uid) : account_->name;
  set_variable(env, "USER", name);
  set_variable(env, "LOGNAME", name);
}

PrivilegesPlan JobPrivileges::plan() const {
  PrivilegesPlan plan;
  if (account_) {
    plan.user = ids_text(*account_);
    plan.home = account_->home;
  }
  switch (caps_.policy) {
    case CapsPolicy::kKeep:
      plan.caps = "keep";
      break;
    case CapsPolicy::kDrop:
      plan.caps = "drop";
      break;
    case CapsPolicy::kList:
      plan.caps = cap_list_text(caps_.list);
      break;
  }
  const CapSets sets = rank_cap_sets(own_cap_sets(), ::geteuid(), account_ ? &account_->ids : nullptr, caps_);
  plan.bounding = cap_list_text(sets.bounding);
  plan.permitted = cap_list_text(sets.permitted);
  plan.effective = cap_list_text(sets.effective);
  plan.inheritable = cap_list_text(sets.inheritable);
  plan.ambient = cap_list_text(sets.ambient);
  plan.no_new_privs = no_new_privs_;
  return plan;
}

}  // namespace trainit
