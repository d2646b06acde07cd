// Least privilege: who the job's processes run as (--user), what
// capabilities they keep (--caps, --no-new-privs), what trainit itself keeps
// once its setup is past, and which values it never writes (secrets).
//
// Everything that can fail is settled once, before anything starts: a user
// that does not resolve, or one trainit has no right to switch to, is a
// one-line error and exit 64. The processes' credentials are then applied
// between vfork and exec (proc/credentials.h).
//
// A static binary cannot use NSS: users and groups are read from /etc/passwd
// and /etc/group, as the image ships them (the platform's images name
// ma-user there).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/redact.h"
#include "base/result.h"
#include "exec/cli.h"
#include "plan/plan.h"
#include "proc/credentials.h"

namespace trainit {

struct Account {
  std::string name;  // empty: a uid /etc/passwd does not name
  UserIds ids;
  std::string home;  // "/" for a uid /etc/passwd does not name
};

// --user's value (NAME, UID, NAME:GROUP, UID:GID) against the texts of
// /etc/passwd and /etc/group. The groups are the primary one and every group
// that lists the user by name. The error names what did not resolve.
[[nodiscard]] Result<Account> resolve_account(std::string_view spec, std::string_view passwd, std::string_view group);
// The same against this machine's files.
[[nodiscard]] Result<Account> resolve_account(std::string_view spec);

// The privileges a run gives its processes, settled from the options.
class JobPrivileges {
 public:
  // The error is one line: the user does not resolve, trainit may not switch
  // to it, or it lacks a capability --caps lists. Nothing asked (the
  // default), nothing to check: exec mode's start touches no more code.
  static Result<JobPrivileges> settle(const Options& options) {
    if (options.run_user.empty() && options.caps.policy == CapsPolicy::kKeep && !options.no_new_privs) {
      return JobPrivileges{};
    }
    return settle_asked(options);
  }

  // For spawn(); nullptr when the processes run as trainit does.
  [[nodiscard]] const Credentials* credentials() const noexcept {
    return credentials_.empty() ? nullptr : &credentials_;
  }
  [[nodiscard]] bool switches_user() const noexcept { return account_.has_value(); }
  [[nodiscard]] const Account* account() const noexcept { return account_ ? &*account_ : nullptr; }

  // USER, LOGNAME and HOME of `env` ("NAME=value" entries) set to the
  // account's (replaced where present); nothing without --user.
  void set_identity(std::vector<std::string>& env) const;

  // trainit's own capabilities once its setup is past
  // (narrow_own_caps_after_setup(): CAP_KILL, and what `still` takes). Logs
  // what it keeps at debug level; a failure is a warning, never fatal.
  void narrow_own(StillToDo still) const {
    if (int r = narrow_own_caps_after_setup(caps_, switches_user(), still); r < 0) {
      log_warning("cannot drop trainit's own capabilities: {}", errno_string(-r));
    } else if (log_enabled(Level::kDebug)) {
      const CapSets now = own_cap_sets();
      log_debug("trainit keeps capabilities {} (bounding set {})", cap_list_text(now.permitted),
                cap_list_text(now.bounding));
    }
  }

  // What `trainit plan` shows.
  [[nodiscard]] PrivilegesPlan plan() const;

 private:
  static Result<JobPrivileges> settle_asked(const Options& options);

  std::optional<Account> account_;
  CapsRequest caps_;
  bool no_new_privs_ = false;
  Credentials credentials_;
};

// Registers the values trainit must never write (base/redact.h): those of
// variables of `envp` whose names look secret (is_secret_name), or match one
// of `patterns` (globs), TRAINIT_JOB_SECRET's among them. trainit's own
// option variables are settings, not secrets (TRAINIT_SSH_AUTHORIZED_KEYS is
// a path).
inline void register_secrets(const char* const* envp, const std::vector<std::string>& patterns) {
  register_secret_variables(envp, patterns, names_an_option);
}

}  // namespace trainit
