// start_sshd and wait_peers: the per-job sshd of an MPI job (plan/plan.h,
// SshdPlan), and host 0's wait for every other host's.
//
// SshdPhase makes trainit's private directory and sshd's configuration,
// generates the host keys that are missing, then starts sshd. It is up when
// it says READY=1 on the NOTIFY_SOCKET trainit serves it (Debian's does) or
// when its port takes a connection, whichever comes first: not every sshd
// speaks sd_notify. PeerSshds probes every peer's sshd port until each takes
// a connection.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "job/ranks.h"
#include "loop/loop.h"
#include "net/probe.h"
#include "notify/receiver.h"
#include "plan/plan.h"
#include "platform/environment.h"

namespace trainit {

// trainit's private directory for the job: made 0700 when missing (its
// parents through base/safe_fs.h); one that exists must be a directory of
// trainit's own user, not a symlink, and writable by nobody else (sshd
// refuses its files otherwise).
Result<void> make_private_dir(const std::string& path);

class SshdPhase {
 public:
  struct Events {
    // Between making sshd's files and starting it: false (after the job
    // failed) starts nothing.
    std::function<bool()> before_start;
    std::function<void(const std::string& why)> on_up;             // sshd takes connections (or the plan has none)
    std::function<void(int code, std::string message)> on_failed;  // it could not be started
    std::function<void(int code)> on_exit;                         // sshd ended (any time), with this code
  };

  SshdPhase(Loop& loop, Launcher& launcher, Events events)
      : loop_(loop), launcher_(launcher), events_(std::move(events)) {}

  // Makes the private directory, `dirs`, and sshd's configuration. The
  // error carries its exit code (73).
  static Result<void> prepare(const SshdPlan& sshd, const std::string& private_dir,
                              const std::vector<std::string>& dirs);
  // start_sshd: prepare() for the plan's sshd, then start(); on_up at once
  // when the plan has none. `plan` must outlive this.
  void enter(const Plan& plan, const Environment& env);
  // Generates the missing host keys, then starts sshd. `sshd` must outlive
  // this.
  void start(const SshdPlan& sshd, const Environment& env);

  // The job left start_sshd: a host key made after this starts no sshd.
  void stop_starting() { starting_ = false; }

  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  int on_keygen_exit(const std::string& key, const siginfo_t& info);
  void start_sshd();
  void up(const std::string& why);

  Loop& loop_;
  Launcher& launcher_;
  Events events_;
  const SshdPlan* plan_ = nullptr;
  bool starting_ = true;
  bool up_ = false;
  std::vector<SourceHandle> keygens_;
  size_t keygens_done_ = 0;
  SourceHandle child_;
  pid_t pid_ = 0;
  std::unique_ptr<NotifyReceiver> notify_;  // sshd's NOTIFY_SOCKET, until it is up
  SourceHandle notify_source_;
  std::unique_ptr<TcpProbe> probe_;
};

class PeerSshds {
 public:
  // Probes `port` at every address; `done` once each took a connection
  // (never when there is none: see empty()).
  PeerSshds(Loop& loop, const std::vector<in_addr>& peers, uint16_t port, const std::function<void()>& done);

  [[nodiscard]] bool empty() const { return probes_.empty(); }
  // Every sshd not answering yet, as "sshd at ADDR:PORT (why)".
  [[nodiscard]] std::vector<std::string> unanswered() const;

 private:
  std::vector<std::unique_ptr<TcpProbe>> probes_;
  size_t up_ = 0;
};

}  // namespace trainit
