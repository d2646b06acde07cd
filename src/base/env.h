// The one child-environment filter: which variables a child never inherits
// from trainit. trainit plan shows the same environment the run gives.
//
// And the names trainit owns besides its options' TRAINIT_<OPTION> (those
// come from init/exec/cli.h's table): the documented variables that are no
// option, and tini's three.
#pragma once

#include <string_view>

namespace trainit {

// tini's variables, which trainit reads as tini does (init/exec/cli.cpp).
inline constexpr std::string_view kTiniVariables[] = {"TINI_VERBOSITY", "TINI_SUBREAPER", "TINI_KILL_PROCESS_GROUP"};

// trainit's documented variables that are not options: no warning for them
// (init/exec/cli.cpp warns about any other TRAINIT_* name that is not an option's
// variable). `passed_on`: a child inherits it (the ranks read it).
struct DocumentedVariable {
  std::string_view name;
  bool passed_on;
};
inline constexpr DocumentedVariable kDocumentedVariables[] = {
    {"TRAINIT_JOB_SECRET", false},              // the shared secret of the hosts' control channel
    {"TRAINIT_COLL_TIMEOUT", true},             // how long a rank's collective waits: the ranks read it
    {"TRAINIT_COLL_FD", false},                 // set by trainit for each rank: its collective arena
    {"TRAINIT_LOCAL_RANK", false},              // set by trainit for each rank
    {"TRAINIT_LOCAL_SIZE", false},              // set by trainit for each rank
    {"TRAINIT_COLL_ID", false},                 // set by trainit for each rank: the arena's job-unique id
    {"TRAINIT_COLL_HEAP", true},                // a standalone communicator's heap: the ranks read it
    {"TRAINIT_COLL_BACKEND", true},             // the backend of a rank's communicators (host, cuda, ascend, ...)
    {"TRAINIT_COLL_DEVICE_STAGING", true},      // a device communicator's staging bytes: the ranks read it
    {"TRAINIT_COLL_DEVICE_ONE_SHOT", true},     // the largest device allreduce a rank makes in one step
    {"TRAINIT_COLL_DEVICE_BLOCKS", true},       // the blocks a device call is split between
    {"TRAINIT_COLL_DEVICE_BLOCK_BYTES", true},  // a device call runs on a block per this many bytes
    {"TRAINIT_COLL_DEVICE_LAUNCH", true},       // 0: a device call is driven from the host, not launched
    {"TRAINIT_COLL_DEVICE", true},              // the device a backend plugin opens, over the platform's variables
    {"TRAINIT_COLL_PEER_FDS", false},           // set by trainit for each rank: a socket to each local peer
    {"TRAINIT_COLL_LIBRARY", true},             // libtrainit_coll.so's path for the Python module in the ranks
    {"TRAINIT_FAKEDEV_FAULT", true},            // the fake device's faults, for tests: its plugin reads it
};

inline constexpr std::string_view kTrainitPrefix = "TRAINIT_";

// Whether `entry` ("NAME=value", or a bare NAME) is one of trainit's
// supervisor's variables: NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID. A child
// that inherited them would talk to trainit's supervisor as if it were
// trainit (its READY=1, its WATCHDOG=1 or none: systemd would kill the job).
[[nodiscard]] constexpr bool is_supervisor_variable(std::string_view entry) noexcept {
  const std::string_view name = entry.substr(0, entry.find('='));
  return name == "NOTIFY_SOCKET" || name == "WATCHDOG_USEC" || name == "WATCHDOG_PID";
}

// Whether a child must not inherit `entry` ("NAME=value", or a bare NAME):
// the supervisor's variables, and trainit's own configuration: every
// TRAINIT_* name (the options' variables, the control channel's secret, a
// typo of them, a stale TRAINIT_LOCAL_RANK from an outer trainit) but the
// documented ones the ranks read, and tini's variables. A child that is
// itself trainit or tini starts from its own defaults.
[[nodiscard]] constexpr bool is_withheld_from_children(std::string_view entry) noexcept {
  const std::string_view name = entry.substr(0, entry.find('='));
  if (is_supervisor_variable(name)) {
    return true;
  }
  for (std::string_view tini : kTiniVariables) {
    if (name == tini) {
      return true;
    }
  }
  if (!name.starts_with(kTrainitPrefix)) {
    return false;
  }
  for (const DocumentedVariable& v : kDocumentedVariables) {
    if (name == v.name) {
      return !v.passed_on;
    }
  }
  return true;
}

}  // namespace trainit
