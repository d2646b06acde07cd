// spawn: what a start of the job needs before its ranks run, then the ranks.
//
// At every start (the first and each restart), in this order: the ranks'
// directories, the plan's files (written once), this start's error files
// (error_file.h), with --preflight devices each local device's check
// (device_preflight.h), the collective arena (arena_watch.h), then every
// process of this host's plan. Once they run, trainit keeps only the
// privileges the rest of the job needs, and every host of several but
// host 0 waits ahead of the fair class (base/urgent.h).
//
// On several hosts the devices are checked earlier, before the host checks
// in at the barrier (check_devices_at_barrier), so that no rank starts on
// any host before every device passed; that start's spawn does not check
// them again.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/urgent.h"
#include "exec/job_settings.h"
#include "exec/pid1.h"
#include "job/arena_watch.h"
#include "job/device_preflight.h"
#include "job/ranks.h"
#include "log/relay.h"
#include "loop/loop.h"
#include "plan/plan.h"
#include "platform/environment.h"

namespace trainit {

class SpawnPhase {
 public:
  struct Events {
    std::function<void(int code, std::string message)> on_failed;  // the start cannot go on
    std::function<void(size_t ranks)> on_started;                  // every process of the plan runs
    RankSet::ExitFn on_rank_exit;                                  // with the rank's own account of a failure
  };

  // `plan` and `env` are the runner's and outlive this.
  SpawnPhase(Loop& loop, const Pid1& pid1, LogRelay& relay, Plan& plan, const Environment& env, SpawnSettings settings,
             Events events);

  // The state spawn: everything above, from the loop; on_started or
  // on_failed once.
  void enter();
  // host_barrier: this start's devices, in the ranks' working directories;
  // `then` once they passed (at once without --preflight devices).
  void check_devices_at_barrier(std::function<void()> then);
  // The next start's arena, made while the host waits at the barrier.
  void prepare_arena() { arena_.prepare(local_rank_count()); }
  // Writes the plan's files (a host that spawns nothing: before it checks
  // in). False after on_failed said why.
  bool write_plan_files();
  // Once the job's processes run (a host whose only one is sshd: then).
  void narrow_own_privileges();
  // The job stops: a device check or arena preflight under way is killed,
  // nothing of it acts later; every collective in flight is aborted; a rank
  // that ends from now on was stopped.
  void stop();

  [[nodiscard]] Launcher& launcher() { return launcher_; }
  [[nodiscard]] RankSet& ranks() { return ranks_; }
  [[nodiscard]] const RankSet& ranks() const { return ranks_; }
  [[nodiscard]] ArenaWatch& arena() { return arena_; }

 private:
  void on_rank_exit(Rank& rank, const std::string& how);
  void check_devices(std::function<void()> then);
  bool make_job_dirs();
  void spawn_ranks();
  [[nodiscard]] bool job_owns_files() const;
  // A working directory, or one a file the plan writes lies within.
  [[nodiscard]] bool is_needed_dir(const std::string& dir) const;
  [[nodiscard]] unsigned local_rank_count() const;

  Loop& loop_;
  const Pid1& pid1_;
  LogRelay& relay_;  // a log directory that cannot be made is its error: the ranks go on, on the console
  Plan& plan_;
  const Environment& env_;
  SpawnSettings settings_;
  Events events_;
  Launcher launcher_;
  RankSet ranks_;
  ArenaWatch arena_;
  std::unique_ptr<DevicePreflight> devices_;  // this start's, from its start to the next
  bool devices_checked_ = false;              // this start's devices passed at the barrier
  bool privileges_narrowed_ = false;
  struct timespec error_files_since_ {};  // this start's error files: what is written since is the ranks'
  // While set, this thread runs ahead of the fair class: every host of
  // several but host 0, once its ranks run.
  std::optional<UrgentSection> ahead_;
};

}  // namespace trainit
