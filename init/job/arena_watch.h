// The collective arena of a start of the job, and the watch over it while
// the ranks run (job/coll_arena.h).
//
// A host with more than one local rank gets a fresh arena at each start,
// after a preflight; each rank takes a seat in it. When a rank ends or the
// job stops, the arena is aborted: every collective in flight returns
// -ECONNABORTED instead of waiting for a peer that is gone. While the ranks
// run it is checked every second: a rank that broke it stops the job (76:
// every rank's collectives are in doubt); with a hang timeout, ranks in one
// collective for longer are reported (each rank once), and with the stop
// action the job stops (75).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/time.h"
#include "exec/job_settings.h"
#include "job/coll_arena.h"
#include "job/ranks.h"
#include "loop/loop.h"

namespace trainit {

// A SOCK_SEQPACKET socketpair between every two of `ranks` local ranks:
// [i * ranks + j] is rank i's end towards rank j (empty where i == j).
Result<std::vector<Fd>> peer_socket_mesh(unsigned ranks);

class ArenaWatch {
 public:
  // The job must stop: its exit code and cause.
  using FailFn = std::function<void(int code, std::string message)>;

  // `preflight_timeout`: the bound of each arena's preflight.
  ArenaWatch(Loop& loop, ArenaSettings settings, Duration preflight_timeout, FailFn on_failure)
      : loop_(loop), settings_(settings), preflight_timeout_(preflight_timeout), on_failure_(std::move(on_failure)) {}

  // The outcome of making an arena: the error names what failed (exit code 71).
  using ReadyFn = std::function<void(Result<void>)>;

  // A fresh arena for `local_ranks` ranks, after its preflight (from the
  // loop: nothing waits); none when the arena is off or there are fewer
  // than two. `ready` is called once with the outcome, from the loop or at
  // once: the one prepare() made for as many ranks, if any.
  void create(unsigned local_ranks, ReadyFn ready);
  // Makes the next start's arena now, while the host waits for something
  // else (the other hosts, at the barrier): the preflight and the commit of
  // every page take about 10 ms for two ranks, then hidden in the wait.
  // Its outcome, an error too, is create()'s: a failure is still reported
  // where it always was, when the ranks are about to start.
  void prepare(unsigned local_ranks);
  // The job stops: a preflight under way is killed, `ready` never called.
  void cancel();
  // The next rank's seat, with its sockets to its peers; nullopt without an
  // arena.
  [[nodiscard]] std::optional<ArenaSeat> next_seat();

  // Every collective in flight returns -ECONNABORTED, now and later.
  void abort(std::string_view why);
  // The ranks run: check every period.
  void watch();
  // The ranks stop: no more checks.
  void stop_watching() { timer_.reset(); }

  // Takes one look now: false after on_failure was called.
  bool check();

  [[nodiscard]] bool exists() const { return arena_.has_value(); }
  [[nodiscard]] Duration period() const;

 private:
  bool check_hangs();
  void make(unsigned local_ranks);
  void on_preflight(const Result<void>& preflight);
  int commit_step();
  // The preflight and the commit are both done: the outcome.
  void finish_make();
  // peer_socks_ for this start's ranks (none past kMaxPeerSockRanks, or
  // when the descriptors run out: a warning).
  void make_peer_sockets(unsigned local_ranks);

  Loop& loop_;
  ArenaSettings settings_;
  Duration preflight_timeout_;
  FailFn on_failure_;
  std::optional<CollArena> arena_;
  unsigned next_local_rank_ = 0;
  std::optional<unsigned> prepared_for_;      // prepare()'s local ranks, until create() takes it
  std::unique_ptr<CollPreflight> preflight_;  // under way
  // Bytes of the arena committed between two turns of the loop: a few
  // milliseconds' work.
  static constexpr size_t kCommitStep = size_t{16} << 20;

  std::optional<Result<CollArena>> made_;         // the arena, while its preflight runs and its commit goes on
  SourceHandle commit_;                           // the commit's steps, while it goes on
  std::optional<Result<void>> preflight_result_;  // the preflight's, while the commit goes on
  std::optional<Result<void>> outcome_;           // make()'s, until create() takes it
  ReadyFn ready_;                                 // create()'s, while the outcome is not there
  std::string id_;                                // TRAINIT_COLL_ID
  std::vector<Fd> peer_socks_;                    // ranks x ranks: [i * ranks + j], rank i's end towards j
  std::vector<unsigned> hangs_reported_;
  SourceHandle timer_;
};

}  // namespace trainit
