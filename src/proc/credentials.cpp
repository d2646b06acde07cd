#include "proc/credentials.h"

#include <fmt/core.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <utility>

namespace trainit {
namespace {

// cap_t, as Credentials keeps it (its header does not include libcap's).
cap_t as_cap(void* p) noexcept {
  return static_cast<cap_t>(p);
}

int cap_count() noexcept {
  return std::min(static_cast<int>(cap_max_bits()), 64);
}

bool has(CapMask set, int cap) noexcept {
  return (set & cap_bit(cap)) != 0;
}

// The effective set of this process, which is what the kernel checks.
bool can(cap_value_t cap) noexcept {
  return has(own_cap_sets().effective, cap);
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::toupper(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

Result<cap_value_t> cap_of_name(std::string_view word) {
  std::string name(word);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool number = std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c); });
  if (!number && name.rfind("cap_", 0) != 0) {
    name.insert(0, "cap_");
  }
  cap_value_t cap = 0;
  if (name.empty() || cap_from_name(name.c_str(), &cap) != 0 || cap < 0) {
    return Error{fmt::format("'{}' is no capability (CAP_IPC_LOCK, CAP_SYS_PTRACE, ...)", word), EINVAL};
  }
  if (cap >= cap_count()) {
    return Error{fmt::format("{}: this kernel does not know it", upper(word)), EINVAL};
  }
  return cap;
}

// The ids of this process's supplementary groups, sorted.
std::vector<gid_t> own_groups() {
  int n = ::getgroups(0, nullptr);
  std::vector<gid_t> groups(n > 0 ? static_cast<size_t>(n) : 0);
  if (n > 0) {
    n = ::getgroups(n, groups.data());
    groups.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

}  // namespace

CapMask all_caps() noexcept {
  const int n = cap_count();
  return n >= 64 ? ~CapMask{0} : (CapMask{1} << n) - 1;
}

Result<CapMask> parse_cap_list(std::string_view list) {
  CapMask caps = 0;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view word = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (word.empty()) {
      continue;
    }
    auto cap = cap_of_name(word);
    if (!cap) {
      return cap.error();
    }
    caps |= cap_bit(*cap);
  }
  if (caps == 0) {
    return Error{"expected keep, drop or capabilities such as CAP_IPC_LOCK,CAP_SYS_PTRACE", EINVAL};
  }
  return caps;
}

std::string cap_list_text(CapMask caps) {
  if (caps == 0) {
    return "none";
  }
  if (caps == all_caps()) {
    return "all";
  }
  std::string text;
  for (int cap = 0; cap < 64; ++cap) {
    if (!has(caps, cap)) {
      continue;
    }
    char* name = cap_to_name(cap);
    text += text.empty() ? "" : ",";
    text += name != nullptr ? upper(name) : std::to_string(cap);
    cap_free(name);
  }
  return text;
}

CapSets own_cap_sets() noexcept {
  CapSets sets;
  const int n = cap_count();
  const CapMask valid = n >= 64 ? ~CapMask{0} : (CapMask{1} << n) - 1;
  // Permitted, effective and inheritable in one capget(2), where libcap's
  // cap_get_flag() asks for them a capability at a time.
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (capget(&header, data) == 0) {
    const auto mask = [valid](uint32_t low, uint32_t high) { return (CapMask{high} << 32 | low) & valid; };
    sets.permitted = mask(data[0].permitted, data[1].permitted);
    sets.effective = mask(data[0].effective, data[1].effective);
    sets.inheritable = mask(data[0].inheritable, data[1].inheritable);
  }
  // The bounding and ambient sets have no call that reads them whole: one
  // prctl(2) per capability. A capability is ambient only while permitted
  // and inheritable (the kernel keeps it so): only those are asked, most
  // often none.
  for (int cap = 0; cap < n; ++cap) {
    const CapMask bit = cap_bit(cap);
    if (cap_get_bound(cap) == 1) {
      sets.bounding |= bit;
    }
    if (has(sets.permitted & sets.inheritable, cap) && cap_get_ambient(cap) == 1) {
      sets.ambient |= bit;
    }
  }
  return sets;
}

CapSets rank_cap_sets(const CapSets& own, uid_t own_uid, const UserIds* user, const CapsRequest& caps) noexcept {
  const bool root = (user != nullptr ? user->uid : own_uid) == 0;
  CapSets before = own;  // the child's sets just before exec
  switch (caps.policy) {
    case CapsPolicy::kKeep:
      if (user != nullptr && own_uid == 0 && !root) {
        // Leaving uid 0 empties permitted, effective and ambient.
        before.permitted = before.effective = before.ambient = 0;
      }
      break;
    case CapsPolicy::kDrop:
      before = CapSets{};
      break;
    case CapsPolicy::kList:
      before = CapSets{caps.list, caps.list, caps.list, caps.list, caps.list};
      break;
  }
  // execve: root's programs count as holding every capability the bounding
  // set allows (and lose the ambient set); anyone else's get the ambient set.
  CapSets after;
  after.bounding = before.bounding;
  after.inheritable = before.inheritable;
  if (root) {
    after.permitted = before.inheritable | before.bounding;
    after.effective = after.permitted;
  } else {
    after.ambient = before.ambient & before.permitted & before.inheritable;
    after.permitted = after.effective = after.ambient;
  }
  return after;
}

Result<Credentials> Credentials::make(const UserIds* user, const CapsRequest& caps, bool no_new_privs) {
  Credentials c;
  const CapSets own = own_cap_sets();
  if (user != nullptr) {
    std::vector<gid_t> groups = user->groups;
    std::sort(groups.begin(), groups.end());
    const bool same = user->uid == ::getuid() && user->uid == ::geteuid() && user->gid == ::getgid() &&
                      user->gid == ::getegid() && groups == own_groups();
    if (!same) {
      if (user->uid != ::geteuid() && !can(CAP_SETUID)) {
        return Error{fmt::format("cannot run the job as uid {}: trainit runs as uid {} without CAP_SETUID", user->uid,
                                 ::geteuid()),
                     EPERM};
      }
      if (!can(CAP_SETGID)) {
        return Error{fmt::format("cannot give the job gid {} and its groups: trainit lacks CAP_SETGID", user->gid),
                     EPERM};
      }
      c.switch_user_ = true;
      c.uid_ = user->uid;
      c.gid_ = user->gid;
      c.groups_ = std::move(groups);
    }
  }
  if (caps.policy != CapsPolicy::kKeep) {
    const CapMask want = caps.policy == CapsPolicy::kList ? caps.list : 0;
    if (CapMask missing = want & ~(own.permitted & own.bounding); missing != 0) {
      return Error{fmt::format("--caps {}: trainit does not hold it itself (its permitted and bounding sets: {})",
                               cap_list_text(missing), cap_list_text(own.permitted & own.bounding)),
                   EPERM};
    }
    c.set_caps_ = true;
    c.bounding_drop_ = own.bounding & ~want;
    if (c.bounding_drop_ != 0 && !can(CAP_SETPCAP)) {
      return Error{
          "--caps: emptying the ranks' bounding set of what they may not keep needs CAP_SETPCAP, which "
          "trainit lacks",
          EPERM};
    }
    c.ambient_ = want;
    c.keep_caps_ = c.switch_user_ && want != 0;
    c.secbits_ = cap_get_secbits() | SECBIT_KEEP_CAPS;
    cap_t target = cap_init();
    if (target == nullptr) {
      return Error{"--caps: out of memory", ENOMEM};
    }
    c.target_ = target;
    for (int cap = 0; cap < cap_count(); ++cap) {
      if (has(want, cap)) {
        const cap_value_t value = cap;
        for (cap_flag_t flag : {CAP_PERMITTED, CAP_EFFECTIVE, CAP_INHERITABLE}) {
          (void)cap_set_flag(target, flag, 1, &value, CAP_SET);
        }
      }
    }
  }
  c.no_new_privs_ = no_new_privs;
  return c;
}

Credentials::Credentials(Credentials&& other) noexcept
    : switch_user_(other.switch_user_),
      uid_(other.uid_),
      gid_(other.gid_),
      groups_(std::move(other.groups_)),
      set_caps_(other.set_caps_),
      bounding_drop_(other.bounding_drop_),
      ambient_(other.ambient_),
      keep_caps_(other.keep_caps_),
      secbits_(other.secbits_),
      target_(std::exchange(other.target_, nullptr)),
      no_new_privs_(other.no_new_privs_) {}

Credentials& Credentials::operator=(Credentials&& other) noexcept {
  if (this != &other) {
    Credentials moved(std::move(other));
    std::swap(target_, moved.target_);
    switch_user_ = moved.switch_user_;
    uid_ = moved.uid_;
    gid_ = moved.gid_;
    groups_ = std::move(moved.groups_);
    set_caps_ = moved.set_caps_;
    bounding_drop_ = moved.bounding_drop_;
    ambient_ = moved.ambient_;
    keep_caps_ = moved.keep_caps_;
    secbits_ = moved.secbits_;
    no_new_privs_ = moved.no_new_privs_;
  }
  return *this;
}

Credentials::~Credentials() {
  cap_free(as_cap(target_));
}

int Credentials::apply() const noexcept {
  // The bounding set first: dropping from it needs CAP_SETPCAP, which the
  // switch of user takes away.
  for (int cap = 0; set_caps_ && cap < 64; ++cap) {
    if (has(bounding_drop_, cap) && cap_drop_bound(cap) != 0) {
      return -errno;
    }
  }
  if (keep_caps_ && cap_set_secbits(secbits_) != 0) {
    return -errno;
  }
  if (switch_user_) {
    // Raw system calls: glibc's wrappers would ask every thread of the
    // process to follow, and in a vfork child those are the parent's.
    if (::syscall(SYS_setgroups, groups_.size(), groups_.data()) != 0 ||
        ::syscall(SYS_setresgid, gid_, gid_, gid_) != 0 || ::syscall(SYS_setresuid, uid_, uid_, uid_) != 0) {
      return -errno;
    }
  }
  if (set_caps_) {
    if (cap_set_proc(as_cap(target_)) != 0 || cap_reset_ambient() != 0) {
      return -errno;
    }
    for (int cap = 0; cap < 64; ++cap) {
      if (has(ambient_, cap) && cap_set_ambient(cap, CAP_SET) != 0) {
        return -errno;
      }
    }
  }
  if (no_new_privs_ && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return -errno;
  }
  return 0;
}

namespace {

// narrow_own_caps() from the sets `own` read a moment before.
int narrow_caps(const CapSets& own, CapMask keep, CapMask bounding) noexcept {
  int result = 0;
  if (has(own.effective, CAP_SETPCAP)) {
    for (int cap = 0; cap < 64; ++cap) {
      if (has(own.bounding & ~bounding, cap) && cap_drop_bound(cap) != 0 && result == 0) {
        result = -errno;
      }
    }
  }
  cap_t target = cap_init();
  if (target == nullptr) {
    return -ENOMEM;
  }
  for (int cap = 0; cap < 64; ++cap) {
    if (has(keep & own.permitted, cap)) {
      const cap_value_t value = cap;
      (void)cap_set_flag(target, CAP_PERMITTED, 1, &value, CAP_SET);
      (void)cap_set_flag(target, CAP_EFFECTIVE, 1, &value, CAP_SET);
    }
  }
  if (cap_set_proc(target) != 0 && result == 0) {
    result = -errno;
  }
  cap_free(target);
  return result;
}

}  // namespace

int narrow_own_caps_after_setup(const CapsRequest& caps, bool switches_user, StillToDo still) noexcept {
  const CapSets own = own_cap_sets();
  CapMask keep = cap_bit(CAP_KILL);
  CapMask bounding = keep;
  switch (caps.policy) {
    case CapsPolicy::kKeep:
      bounding = own.bounding;  // later processes get what the container gave
      break;
    case CapsPolicy::kDrop:
      break;
    case CapsPolicy::kList:
      bounding |= caps.list;
      break;
  }
  if (still.more_spawns) {
    if (switches_user) {
      keep |= cap_bit(CAP_SETUID) | cap_bit(CAP_SETGID) | (still.hands_over_files ? cap_bit(CAP_CHOWN) : 0);
    }
    if (caps.policy != CapsPolicy::kKeep) {
      keep |= cap_bit(CAP_SETPCAP) | caps.list;
    }
    bounding |= keep;
  }
  if (still.runs_ahead) {
    keep |= cap_bit(CAP_SYS_NICE);  // trainit's own: not added to the bounding set
  }
  return narrow_caps(own, keep, bounding);
}

int narrow_own_caps(CapMask keep, CapMask bounding) noexcept {
  return narrow_caps(own_cap_sets(), keep, bounding);
}

}  // namespace trainit
