#include "job/spawn.h"

#include <fmt/core.h>
#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "base/exit_code.h"
#include "base/log.h"
#include "base/safe_fs.h"
#include "exec/privileges.h"
#include "job/error_file.h"
#include "job/sshd.h"
#include "job/status_file.h"
#include "os/text.h"

namespace trainit {

using exit_code::kCantCreate;

SpawnPhase::SpawnPhase(Loop& loop, const Pid1& pid1, LogRelay& relay, Plan& plan, const Environment& env,
                       SpawnSettings settings, Events events)
    : loop_(loop),
      pid1_(pid1),
      relay_(relay),
      plan_(plan),
      env_(env),
      settings_(std::move(settings)),
      events_(std::move(events)),
      launcher_(pid1, relay),
      ranks_(loop, launcher_, relay, [this](Rank& rank, const std::string& how) { on_rank_exit(rank, how); }),
      arena_(loop, settings_.arena, settings_.preflight.timeout, events_.on_failed) {}

void SpawnPhase::enter() {
  ahead_.reset();  // a restart's spawn: its vfork children must not wait behind it
  ranks_.clear();  // a restart's: the last start's ranks are reaped
  if (!make_job_dirs() || !write_plan_files()) {
    return;
  }
  // The ranks' TORCHELASTIC_ERROR_FILEs (the torchrun modes), each this
  // start's: read from now on only when written since (error_file.h).
  error_files_since_ = file_clock_now();
  prepare_error_files(plan_.private_dir, plan_.processes, job_owns_files());
  if (plan_.rank_table) {
    // An Ascend rank table's pages back to the kernel (megabytes for a
    // large job). Not without one: malloc_trim walks every free chunk
    // (a fifth of a torchrun host's spawn at 1,024 hosts, by perf).
    plan_.rank_table.reset();
    ::malloc_trim(0);
  }
  check_devices([this] {
    arena_.create(local_rank_count(), [this](const Result<void>& r) {
      if (!r) {
        events_.on_failed(r.error().exit_code, r.error().message);
      } else {
        spawn_ranks();
      }
    });
  });
}

void SpawnPhase::check_devices_at_barrier(std::function<void()> then) {
  if (!settings_.preflight.devices) {
    then();
    return;
  }
  // The checks run in the ranks' working directories.
  if (!make_job_dirs()) {
    return;
  }
  check_devices([this, then = std::move(then)] {
    devices_checked_ = true;  // this start's spawn checks them no more
    then();
  });
}

void SpawnPhase::stop() {
  ranks_.stopping();
  devices_.reset();
  arena_.cancel();
  arena_.abort("the job is stopping");
}

// A rank that ends aborts the arena's collectives: its peers would wait for
// it. A failing rank's own account follows its end, where it left one
// (error_file.h).
void SpawnPhase::on_rank_exit(Rank& rank, const std::string& how) {
  if (rank.spec->rank) {
    arena_.abort(fmt::format("{} exited", rank.spec->name));
  }
  events_.on_rank_exit(rank, rank.state == RankState::kFailed
                                 ? how + root_cause_of(*rank.spec, plan_.private_dir, error_files_since_)
                                 : how);
}

// --preflight devices: each local device proves itself before any rank
// starts (device_preflight.h), at every start, from the loop: `then` once
// they passed, on_failed on a failure. stop() kills the checks.
void SpawnPhase::check_devices(std::function<void()> then) {
  if (!settings_.preflight.devices || std::exchange(devices_checked_, false)) {
    then();
    return;
  }
  std::vector<const ProcessSpec*> ranks;
  for (const auto& spec : plan_.processes) {
    if (spec.rank) {
      ranks.push_back(&spec);
    }
  }
  if (ranks.empty()) {
    log_warning("--preflight devices: this host starts no rank of its own (mode {}): no device to check",
                mode_name(plan_.mode));
    then();
    return;
  }
  auto check = find_device_check(settings_.preflight.device_check);
  if (!check) {
    events_.on_failed(check.error().exit_code, check.error().message);
    return;
  }
  devices_ = std::make_unique<DevicePreflight>(
      loop_, pid1_, DevicePreflightSettings{*check, preflight_backend(env_, plan_.mode), settings_.preflight.timeout},
      [this, then = std::move(then)](const Result<void>& r) {
        if (!r) {
          events_.on_failed(r.error().exit_code, r.error().message);
        } else {
          then();
        }
      });
  if (auto r = devices_->start(ranks); !r) {
    devices_.reset();
    events_.on_failed(r.error().exit_code, r.error().message);
  }
}

// The ranks' directories. A rank cannot start without its working
// directory, nor the job without the directory of a file it writes (a
// converted rank table); without a log directory it can, on the console
// (the log relay reports the files). False after on_failed said why.
bool SpawnPhase::make_job_dirs() {
  for (const auto& dir : plan_.dirs) {
    // The job's processes write into the directories made for them
    // (--user); one that was there already stays whose it was.
    auto made = safe_fs::make_dirs(dir, 0755, job_owns_files() ? safe_fs::Give::kJob : safe_fs::Give::kTrainit);
    if (made) {
      continue;
    }
    if (is_needed_dir(dir)) {
      events_.on_failed(kCantCreate, fmt::format("cannot create directory {}: {}", dir, made.error().message));
      return false;
    }
    relay_.report(
        0, Error{fmt::format("cannot create log directory {}: {}", dir, made.error().message), made.error().errnum});
  }
  return true;
}

// What was written (a copy of the rank table among it, up to 16 MiB) is
// not needed again: PID 1 runs the job at its usual size, whatever the
// table's.
bool SpawnPhase::write_plan_files() {
  // Some sit in trainit's private directory (mpi), which only start_sshd
  // makes otherwise: a single MPI host starts no sshd.
  if (auto r = make_private_dir(plan_.private_dir); !r) {
    events_.on_failed(kCantCreate, r.error().message);
    return false;
  }
  // mpirun and the orteds run as the job's user (--user): they reach their
  // files by name in trainit's directory, never list it.
  const bool to_job = job_owns_files();
  if (!plan_.private_dir.empty() && to_job) {
    auto dir = safe_fs::open_dir(plan_.private_dir);
    if (!dir || ::fchmod(dir->get(), 0711) != 0) {
      events_.on_failed(kCantCreate, fmt::format("cannot open {} to the job's user: {}", plan_.private_dir,
                                                 dir ? errno_string(errno) : dir.error().message));
      return false;
    }
  }
  for (const auto& file : plan_.files) {
    // The job's files in trainit's directory (hostfile, tune file, ssh
    // config) are for the job's user to read; sshd's stay trainit's.
    const bool job_file = to_job && !plan_.private_dir.empty() && file.path.rfind(plan_.private_dir + "/", 0) == 0;
    if (auto r = write_file_atomically(file.path, file.content, file.mode,
                                       job_file ? safe_fs::Give::kJob : safe_fs::Give::kTrainit);
        !r) {
      events_.on_failed(kCantCreate, r.error().message);
      return false;
    }
  }
  plan_.files = {};
  return true;
}

void SpawnPhase::spawn_ranks() {
  ranks_.reserve(plan_.processes.size());
  for (const auto& spec : plan_.processes) {
    std::optional<ArenaSeat> seat = spec.rank ? arena_.next_seat() : std::nullopt;
    if (auto r = ranks_.spawn(spec, seat ? &*seat : nullptr); !r) {
      events_.on_failed(r.error().exit_code, r.error().message);
      return;
    }
  }
  // Every host but host 0 waits for the job's end ahead of the fair class
  // once its ranks run: a stop from host 0, a rank's exit or a lost peer is
  // taken when it comes, not after the scheduler has served every task
  // woken before it (with 1,024 simulated hosts on 2 cores, hosts woken by
  // the stop waited up to 0.5 s for a CPU; ahead, the last took it 0.13 s
  // after the failing rank's exit). Host 0 stays in the fair class: the
  // heartbeats of every host reach it, and its fan-outs run ahead anyway.
  // Only after the ranks started: a vfork child, in the fair class, would
  // otherwise wait behind its parent (and behind every host's trainit) to
  // exec. Before narrowing: it takes CAP_SYS_NICE.
  if (plan_.hosts && plan_.hosts->hosts > 1 && plan_.hosts->index != 0) {
    ahead_.emplace();
  }
  narrow_own_privileges();
  events_.on_started(ranks_.size());
}

// Once the job's processes run, trainit keeps only what the rest of the
// job needs of its capabilities: sshd has started, directories and files
// are made; a restart spawns again, and makes the processes' error files
// for them again; host 0 still writes the stop to every host.
void SpawnPhase::narrow_own_privileges() {
  if (privileges_narrowed_ || pid1_.privileges == nullptr) {
    return;
  }
  privileges_narrowed_ = true;
  const bool several = plan_.hosts && plan_.hosts->hosts > 1;
  pid1_.privileges->narrow_own({.more_spawns = plan_.restarts.has_value(),
                                .hands_over_files = true,
                                // host 0's fan-outs, every host's wait ahead after a restart
                                .runs_ahead = several && (plan_.hosts->index == 0 || plan_.restarts.has_value())});
}

bool SpawnPhase::job_owns_files() const {
  return pid1_.privileges != nullptr && pid1_.privileges->switches_user();
}

// Whether `dir` is, or holds, some rank's working directory.
bool SpawnPhase::is_needed_dir(const std::string& dir) const {
  const auto within = [&dir](const std::string& path) {
    return path == dir ||
           (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
  };
  return std::any_of(plan_.processes.begin(), plan_.processes.end(),
                     [&](const ProcessSpec& p) { return within(p.cwd); }) ||
         std::any_of(plan_.files.begin(), plan_.files.end(), [&](const FileSpec& f) { return within(f.path); });
}

unsigned SpawnPhase::local_rank_count() const {
  return static_cast<unsigned>(
      std::count_if(plan_.processes.begin(), plan_.processes.end(), [](const ProcessSpec& p) { return p.rank; }));
}

}  // namespace trainit
