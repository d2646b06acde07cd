// spawn, running, stopping: the processes of a job on this host.
//
// Launcher starts one process of the plan (a rank, sshd, ssh-keygen): its
// environment, its own process group or session, its output through the log
// relay when the plan asks, and, for a rank that shares a collective arena,
// its seat in it. RankSet holds this start's ranks: it watches each to its
// end, and signals them, each rank's group newest first, then whatever else
// is ours.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "exec/pid1.h"
#include "job/status_file.h"
#include "log/relay.h"
#include "loop/loop.h"
#include "plan/plan.h"

namespace trainit {

// A rank's place in its host's collective arena (init/job/coll_arena.h), given
// to it as TRAINIT_COLL_FD, TRAINIT_LOCAL_RANK, TRAINIT_LOCAL_SIZE and
// TRAINIT_COLL_ID.
struct ArenaSeat {
  int fd = -1;
  unsigned local_rank = 0;
  unsigned local_size = 0;
  std::string id;
  // A socket to each local peer for swapping device handles
  // (TRAINIT_COLL_PEER_FDS; -1 at the rank's own index), none past
  // kMaxPeerSockRanks ranks. The seat owns them: once the rank is started
  // they close here, so that only the two ranks of a pair hold it.
  std::vector<Fd> peer_socks;
};

struct Started {
  pid_t pid = 0;
  size_t log = LogRelay::kConsole;  // its index in the log relay, when it has one
};

class Launcher {
 public:
  Launcher(const Pid1& pid1, LogRelay& relay) : pid1_(pid1), relay_(relay) {}

  // Who a process runs as: the job's user (--user, --caps), or trainit's own
  // (sshd, which switches users itself, and its host keys).
  enum class As { kJob, kTrainit };

  // Starts `spec`. The error names it, and carries the exit code its
  // failure calls for (127/126 when exec failed, else 71).
  Result<Started> start(const ProcessSpec& spec, const ArenaSeat* seat = nullptr, As as = As::kJob);

 private:
  const Pid1& pid1_;
  LogRelay& relay_;
  size_t relay_logs_ = 0;  // processes given to the log relay so far
};

struct Rank {
  const ProcessSpec* spec = nullptr;
  pid_t pid = 0;
  size_t log = LogRelay::kConsole;  // its index in the log relay
  SourceHandle child;               // until it is reaped: its pid, and its group's id, are its own
  RankState state = RankState::kRunning;
  int code = -1;
  [[nodiscard]] bool running() const { return state == RankState::kRunning; }
  // Its rank number, -1 for a process of the plan that is none.
  [[nodiscard]] int number() const { return spec->rank ? static_cast<int>(*spec->rank) : -1; }
};

class RankSet {
 public:
  // A rank ended: `what` says how ("exited with 3", "was killed by
  // SIGSEGV"); its state says whether it failed on its own or was stopped.
  using ExitFn = std::function<void(Rank& rank, const std::string& what)>;

  RankSet(Loop& loop, Launcher& launcher, LogRelay& relay, ExitFn on_exit)
      : loop_(loop), launcher_(launcher), relay_(relay), on_exit_(std::move(on_exit)) {}

  // Starts `spec` (which must outlive the rank) and watches it.
  Result<void> spawn(const ProcessSpec& spec, const ArenaSeat* seat);
  // Forgets the ranks of the last start (all reaped).
  void clear() {
    ranks_.clear();
    stopping_ = false;
  }
  // trainit stops the job: a rank that ends from now on is stopped, whatever
  // its code.
  void stopping() { stopping_ = true; }
  void reserve(size_t n) { ranks_.reserve(n); }

  [[nodiscard]] bool empty() const { return ranks_.empty(); }
  [[nodiscard]] size_t size() const { return ranks_.size(); }
  [[nodiscard]] bool any_running() const;
  [[nodiscard]] const std::vector<Rank>& ranks() const { return ranks_; }

  // Each live rank's group, newest first (with SIGCONT after a catchable
  // signal, so that a stopped rank sees it), then every other process of
  // ours once. A rank already reaped is not signalled by its old pid: its
  // group may be empty and the id someone else's; the sweep finds what is
  // left of it.
  void signal_everything(const Pid1& pid1, int signo);
  // `signo` to every live rank's group (a forwarded signal).
  void signal_groups(int signo);

  // The ranks as the status file shows them.
  [[nodiscard]] std::vector<StatusRank> status() const;

 private:
  int on_child_exit(size_t index, const siginfo_t& info);

  Loop& loop_;
  Launcher& launcher_;
  LogRelay& relay_;
  ExitFn on_exit_;
  std::vector<Rank> ranks_;
  bool stopping_ = false;
};

}  // namespace trainit
