// Who a child runs as, and with which capabilities.
//
// A Credentials is settled in the parent, before vfork (make_credentials():
// every check that can fail, every allocation), and applied in the child
// between vfork and exec (apply_credentials(): system calls only). libcap does
// every capability operation.
//
// Capability sets are bit masks (bit N: capability N), as the kernel shows
// them in /proc/PID/status (CapBnd, CapPrm, CapEff, CapInh, CapAmb).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace trainit {

using CapMask = std::uint64_t;

[[nodiscard]] constexpr CapMask cap_bit(int cap) noexcept {
  return CapMask{1} << cap;
}

// Every capability the running kernel knows.
[[nodiscard]] CapMask all_caps() noexcept;

// "CAP_IPC_LOCK,CAP_SYS_PTRACE" (a name with or without "CAP_", any case, or
// a number) into a mask; the error names the word it does not know.
[[nodiscard]] Result<CapMask> parse_cap_list(std::string_view list);
// The mask as text: "all", "none", or its names ("CAP_IPC_LOCK,CAP_SYS_PTRACE").
[[nodiscard]] std::string cap_list_text(CapMask caps);

// A process's five sets.
struct CapSets {
  CapMask bounding = 0;
  CapMask permitted = 0;
  CapMask effective = 0;
  CapMask inheritable = 0;
  CapMask ambient = 0;
  bool operator==(const CapSets&) const = default;
};
// This process's sets.
[[nodiscard]] CapSets own_cap_sets() noexcept;

// --caps: what the ranks keep.
enum class CapsPolicy {
  kKeep,  // what the container gave trainit (as the kernel passes it across exec)
  kDrop,  // nothing: empty bounding, permitted, effective, inheritable, ambient sets
  kList,  // these only, in every set (ambient too, so that they survive exec as any user)
};
struct CapsRequest {
  CapsPolicy policy = CapsPolicy::kKeep;
  CapMask list = 0;  // kList
};

// A user to switch to: ids settled (init/exec/privileges.h resolves names).
struct UserIds {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, the primary one among them
};

// What a process started as `user` (nullptr: trainit's own user) with `caps`
// gets from the kernel once it has exec'd an ordinary program (no file
// capabilities, not set-user-ID), given that trainit's own sets are `own`.
[[nodiscard]] CapSets rank_cap_sets(const CapSets& own, uid_t own_uid, const UserIds* user,
                                    const CapsRequest& caps) noexcept;

class Credentials {
 public:
  // Nothing to change: the child runs as trainit does.
  Credentials() = default;
  // Credentials for `user` (nullptr: stay trainit's) and `caps`, with
  // PR_SET_NO_NEW_PRIVS when `no_new_privs`. The error, one line, says what
  // trainit lacks to give them (CAP_SETUID to switch users, CAP_SETPCAP to
  // narrow the bounding set, a listed capability it does not hold itself).
  static Result<Credentials> make(const UserIds* user, const CapsRequest& caps, bool no_new_privs);

  Credentials(Credentials&&) noexcept;
  Credentials& operator=(Credentials&&) noexcept;
  Credentials(const Credentials&) = delete;
  Credentials& operator=(const Credentials&) = delete;
  ~Credentials();

  // Whether applying them changes anything.
  [[nodiscard]] bool empty() const noexcept { return !switch_user_ && !set_caps_ && !no_new_privs_; }

  // In the child, after vfork: system calls only (the raw ones for the ids,
  // so that no libc wrapper signals threads that are the parent's). Returns 0
  // or -errno.
  [[nodiscard]] int apply() const noexcept;

 private:
  bool switch_user_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::vector<gid_t> groups_;
  bool set_caps_ = false;
  CapMask bounding_drop_ = 0;  // dropped from the bounding set
  CapMask ambient_ = 0;        // raised into the ambient set (cleared first)
  bool keep_caps_ = false;     // SECBIT_KEEP_CAPS across the switch of user
  unsigned secbits_ = 0;       // the securebits with KEEP_CAPS, when keep_caps_
  void* target_ = nullptr;     // cap_t: the permitted, effective and inheritable sets
  bool no_new_privs_ = false;
};

// Narrows trainit's own capabilities to `keep` (permitted and effective;
// inheritable emptied) and its bounding set to `bounding` (what processes it
// starts later may still get). Returns 0 or -errno.
[[nodiscard]] int narrow_own_caps(CapMask keep, CapMask bounding) noexcept;

// What trainit still does once its setup is past that takes a capability.
struct StillToDo {
  bool more_spawns = false;       // restarts to come: it starts processes again
  bool hands_over_files = false;  // and makes files for them at each start
  bool runs_ahead = false;        // runs ahead of the fair class (base/urgent.h) from time to time
};

// trainit's own capabilities once its setup is past: it keeps CAP_KILL (its
// processes may run as another user, or change their own); while
// `still.more_spawns` (restarts to come), what starting them takes: CAP_SETUID
// and CAP_SETGID when `switches_user` (and CAP_CHOWN when
// `still.hands_over_files`: files made for them at each start), CAP_SETPCAP
// and the listed capabilities when `caps` narrows their sets; with
// `still.runs_ahead`, CAP_SYS_NICE, which it runs ahead of the fair
// scheduling class with (base/urgent.h; it is never passed on). Its bounding
// set keeps only what processes it starts later may hold. Returns 0 or
// -errno.
[[nodiscard]] int narrow_own_caps_after_setup(const CapsRequest& caps, bool switches_user, StillToDo still) noexcept;

}  // namespace trainit
