// resolve_peers, wait_peers and host_barrier: the hosts of a multi-host job
// find each other and meet, and the control channel that joins them from
// the barrier to the job's end (host_link.h). On one host each state is
// done at once.
//
// At the barrier, the channel opens (once: a restart's barrier reuses it),
// this host's devices are checked while its heartbeats flow, and only then
// does it check in; the next start's arena is made while it waits there.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/time.h"
#include "exec/job_settings.h"
#include "job/host_link.h"
#include "job/sshd.h"
#include "loop/loop.h"
#include "os/fs.h"
#include "plan/plan.h"
#include "platform/environment.h"

namespace trainit {

// The hosts' shared secret: `file`'s content (--job-secret-file, without
// its last newline), else TRAINIT_JOB_SECRET; empty: none. The error names
// the option.
Result<std::string> read_job_secret(const std::string& file, const Environment& env, const FileSystem& fs);

struct HostsSettings {
  PeerSettings peers;        // as the options give them
  std::string job_id;        // MA_VJ_NAME: every host's must match
  std::string secret;        // the hosts' shared secret; empty: none
  Duration device_checks{};  // the devices' preflight bound, when they are checked at the barrier
};

// The hosts' settings: the options' (the devices' bound with --preflight
// devices) and the job's name.
[[nodiscard]] HostsSettings hosts_settings(const PeerSettings& peers, const PreflightSettings& preflight,
                                           const Environment& env);

class HostsPhase {
 public:
  struct Events {
    HostLinkEvents link;  // what the channel tells the job
    // The work of `in` is complete (taken only while the job is in it).
    std::function<void(State in, const std::string& why)> on_done;
    std::function<void(int code, std::string message)> on_failed;  // the channel could not be opened
    // Every peer's name has an address: the plan is made again with them
    // where it asks. False after the job failed.
    std::function<bool()> on_resolved;
    // At the barrier: `then` once this host's devices passed.
    std::function<void(std::function<void()> then)> check_devices;
    std::function<void()> on_checked_in;
  };

  // `plan` is the runner's and outlives this.
  HostsPhase(Loop& loop, const Plan& plan, HostsSettings settings, Events events)
      : loop_(loop), plan_(plan), settings_(std::move(settings)), events_(std::move(events)) {}

  void set_secret(std::string secret) { settings_.secret = std::move(secret); }

  // resolve_peers: every peer's name.
  void resolve();
  // Host i's address.
  [[nodiscard]] const std::vector<in_addr>& addresses() const { return addrs_; }
  // wait_peers (host 0): every peer's sshd.
  void wait_sshds();
  // Why resolve_peers or wait_peers ran out of time; they stop.
  [[nodiscard]] std::string peers_timeout_cause(bool resolving);

  // host_barrier: opens the channel the first time, then checks this
  // host's devices and checks in.
  void meet();
  // The barrier's deadline: --barrier-timeout, unless the mode's own
  // rendezvous timeout says otherwise, with the devices' checks.
  [[nodiscard]] Duration barrier_deadline() const { return barrier_timeout() + settings_.device_checks; }
  // Why the barrier did not open in time.
  [[nodiscard]] std::string barrier_timeout_cause() const;

  // The channel's verbs (host_link.h); without a channel, nothing.
  void stop(const StopNotice& notice);
  // The new generation, or 0 when a stop came first or there is no channel.
  unsigned restart(const StopNotice& notice);
  void finish();
  // `sent` once the channel's last frames left, or `bound` passed, from the
  // loop (at once without a channel).
  void when_sent(Duration bound, std::function<void()> sent);

 private:
  [[nodiscard]] bool several() const { return plan_.hosts && plan_.hosts->hosts > 1; }
  [[nodiscard]] Duration barrier_timeout() const;
  void check_in();
  void last_frames_gone();

  Loop& loop_;
  const Plan& plan_;
  HostsSettings settings_;
  Events events_;
  std::unique_ptr<PeerNames> names_;
  std::vector<in_addr> addrs_;
  std::unique_ptr<PeerSshds> sshds_;
  std::unique_ptr<HostLink> link_;
  std::function<void()> sent_;  // when_sent()'s, until it is called
  SourceHandle sent_bound_;
};

}  // namespace trainit
