#include "job/runner.h"

#include <fmt/format.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/exit_code.h"
#include "base/log.h"
#include "base/redact.h"
#include "base/safe_fs.h"
#include "base/urgent.h"
#include "exec/privileges.h"
#include "job/arena_watch.h"
#include "job/device_preflight.h"
#include "job/error_file.h"
#include "job/host_link.h"
#include "job/machine.h"
#include "job/rank_table_wait.h"
#include "job/ranks.h"
#include "job/sshd.h"
#include "job/status_file.h"
#include "loop/loop.h"
#include "net/socket.h"
#include "notify/notify.h"
#include "platform/fs.h"
#include "platform/text.h"
#include "proc/escalation.h"
#include "proc/signals.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using namespace exit_code;

// How long trainit waits, at its exit, for its last control messages (a
// stop, a release) to leave.
constexpr Duration kControlFlush = 1s;

ArenaSettings arena_settings(const Options& options) {
  ArenaSettings settings;
  settings.heap = options.coll_arena;
  settings.hang_timeout = options.hang_timeout;
  settings.hang_stop = options.hang_stop;
  settings.preflight_timeout = options.preflight_timeout;
  return settings;
}

class JobRunner {
 public:
  JobRunner(const Options& options, const Pid1& pid1, Loop& loop, Environment env, ConsoleWriter& console)
      : options_(options),
        pid1_(pid1),
        loop_(loop),
        env_(std::move(env)),
        notifier_(Notifier::from_environment()),
        relay_(loop, &console),
        escalation_(
            loop, options.grace, [this](int signo) { ranks_.signal_everything(pid1_, signo); },
            [this] {
              fire(Event::kTimedOut,
                   fmt::format("processes still ran {:.3f} s after SIGTERM: SIGKILL", seconds(options_.grace)));
            }),
        launcher_(pid1, relay_),
        ranks_(loop, launcher_, relay_, [this](Rank& rank, const std::string& what) { on_rank_exit(rank, what); }),
        arena_(loop, arena_settings(options),
               [this](int code, std::string message) { fail(code, std::move(message)); }),
        table_wait_(loop, input_,
                    RankTableWait::Events{[this](Plan plan) { on_rank_table_ready(std::move(plan)); },
                                          [this](const Error& error) { fail(kConfig, error.message); }},
                    RankTableWait::kPoll, options.rank_table_timeout) {
    relay_.set_error_handler([this](size_t rank, const Error& e) { on_log_error(rank, e); });
    input_.options = plan_options(options);
    // main() resolved the mode already (and refused a bad one): a job mode.
    auto mode = resolve_mode(options.mode, env_);
    input_.options.mode = mode ? *mode : Mode::kAscend;
    input_.argv = options.command;
    input_.env = env_;
    input_.fs = &fs_;
    status_.path = options.status_file.empty() ? default_status_path(env_) : options.status_file;
    status_.host = this_host_name(env_);
    status_.mode = std::string(mode_name(input_.options.mode.value_or(Mode::kAscend)));
  }

  void start() {
    entered_ = Clock::now();
    signals_ = loop_.add_signal(
        forwardable_signals(), [this](const signalfd_siginfo& i) { return on_signal(i); }, "signals");
    loop_.set_orphan_handler([this](const siginfo_t&) { check_all_gone(); });
    notifier_.start_watchdog(loop_);
    in_transition_ = true;
    if (auto secret = job_secret(); !secret) {
      fail(kConfig, secret.error().message);
    } else if (secret_ = std::move(*secret); input_.options.mode == Mode::kAscend) {
      go(State::kWaitRankTable, "trainit started");
    } else if (auto plan = make_plan(input_); plan) {  // nothing to wait for: planned at once
      plan_ = std::move(*plan);
      status_.mode = std::string(mode_name(plan_.mode));
      go(plan_.states.front(), "trainit started");
    } else {
      fail(kConfig, plan.error().message);
    }
    run_queue();
  }

  [[nodiscard]] int exit_code() const { return exit_code_.value_or(0); }

 private:
  // --- the machine ---------------------------------------------------------

  void fire(Event event, std::string reason) {
    events_.emplace_back(event, std::move(reason));
    if (in_transition_) {
      return;  // the transition under way takes it next
    }
    in_transition_ = true;
    run_queue();
  }

  // Takes the queued events in order; entering a state may queue more.
  void run_queue() {
    while (!events_.empty()) {
      auto [e, why] = std::move(events_.front());
      events_.pop_front();
      State to = next(state_, e, plan_);
      if (to != state_) {
        go(to, why);
      } else {
        log_debug("{} in {}: {}", event_name(e), state_name(state_), why);
      }
    }
    in_transition_ = false;
  }

  // The one place a transition happens: log, status file, STATUS=, what
  // leaving the state ends, then the new state's row: its deadline, and
  // what entering it does.
  void go(State to, const std::string& reason) {
    note_cause_state();
    // The moment of the transition, on both clocks at once: logging it and
    // leaving the state may wait for a CPU, and "since" is when it began.
    const Clock::time_point now = Clock::now();
    const double since = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (started_) {
      log_info("{} -> {} after {:.3f} s: {}", state_name(state_), state_name(to), seconds(now - entered_), reason);
      leave(state_);
    } else {
      log_info("{}: {}", state_name(to), reason);
      started_ = true;
    }
    state_ = to;
    entered_ = now;
    status_.since = since;
    reason_ = reason;
    write_status();
    notifier_.status(fmt::format("{}: {}", state_name(to), reason));
    arm_deadline(state_row(to).deadline, now);
    for (const auto& [state, enter] : kEntries) {
      if (state == to) {
        (this->*enter)();
        return;
      }
    }
    fail(kSoftware, fmt::format("state {} is not implemented", state_name(to)));  // states of modes not run yet
  }

  // The state this host was in when it learned why the job ends, and the
  // code that gives it: the cause's line says both (status_file.h).
  void note_cause_state() {
    if (exit_code_ && status_.cause_state.empty()) {
      status_.cause_state = started_ ? std::string(state_name(state_)) : std::string("start");
      status_.cause_code = *exit_code_;
    }
  }

  // A phase's work ends with its state: nothing it watched acts later.
  void leave(State from) {
    switch (from) {
      case State::kWaitRankTable:
        table_wait_.stop();
        break;
      case State::kStartSshd:
        if (sshd_) {
          sshd_->stop_starting();
        }
        break;
      case State::kRunning:
        arena_.stop_watching();
        break;
      default:
        break;
    }
  }

  void arm_deadline(Deadline deadline, Clock::time_point now) {
    deadline_.reset();
    auto arm = [&](Duration after, void (JobRunner::*expired)(), const char* name) {
      deadline_ = loop_.add_timer(
          now + after,
          [this, expired] {
            (this->*expired)();
            return 0;
          },
          name);
    };
    switch (deadline) {
      case Deadline::kNone:
      case Deadline::kGrace:  // the stop escalation's clock: it fires TimedOut with its SIGKILL
        break;
      case Deadline::kRankTable:
        arm(options_.rank_table_timeout, &JobRunner::on_rank_table_timeout, "rank table deadline");
        break;
      case Deadline::kPeers:
        arm(options_.peer_timeout, &JobRunner::on_peer_timeout, "peer deadline");
        break;
      case Deadline::kBarrier:  // every host's device preflight comes before its check-in
        arm(barrier_timeout() + (options_.preflight_devices ? options_.preflight_timeout : Duration::zero()),
            &JobRunner::on_barrier_timeout, "barrier deadline");
        break;
    }
  }

  // What entering each state does (the machine's table says what it is for).
  using Enter = void (JobRunner::*)();
  static const std::pair<State, Enter> kEntries[10];

  // --- the job's outcome ---------------------------------------------------

  // Records the first reason to stop with its exit code (the job's cause, in
  // the status file to the end), tells the other hosts, then fires Failed.
  // In a multi-host job the cause names this host (and the rank, if any).
  void fail(int code, std::string message, int rank = -1) {
    decide_here(code, message, Tell::kOtherHosts, rank);
    fire(Event::kFailed, std::move(message));
  }

  // Records the first cause of a state's timeout (not told to other hosts:
  // each has the same deadline), then fires TimedOut.
  void time_out(int code, const std::string& cause, std::string event_reason) {
    decide_here(code, cause, Tell::kNo);
    fire(Event::kTimedOut, std::move(event_reason));
  }

  enum class Tell { kNo, kOtherHosts };

  // The first cause decides how the job ends: its exit code, and its line,
  // the status file's cause to the end. A later one changes nothing: false.
  bool decide(int code, std::string line) {
    if (exit_code_) {
      return false;
    }
    exit_code_ = code;
    status_.cause = std::move(line);
    return true;
  }

  // This host's cause ("host H rank R: what"), logged as the job's error and,
  // with Tell::kOtherHosts, sent to the other hosts, when it is the first.
  void decide_here(int code, const std::string& what, Tell tell, int rank = -1) {
    if (!decide(code, where(static_cast<int>(host_index()), rank) + what)) {
      return;
    }
    log_error("{}", status_.cause);
    if (tell == Tell::kOtherHosts) {
      tell_other_hosts(StopNotice{code, static_cast<int>(host_index()), rank, what});
    }
  }

  // Where a cause happened: "host 1 (NAME) rank 3: " in a multi-host job
  // (NAME: the peer's platform name, where the plan has it), "host NAME
  // rank 3: " on one host; without " rank R" for no rank.
  [[nodiscard]] std::string where(int host, int rank) const {
    std::string at;
    if (!multi_host()) {
      at = fmt::format("host {}", status_.host);
    } else if (host >= 0 && static_cast<size_t>(host) < plan_.hosts->peers.size()) {
      at = fmt::format("host {} ({})", host, plan_.hosts->peers[static_cast<size_t>(host)]);
    } else {
      at = fmt::format("host {}", host);
    }
    return rank >= 0 ? fmt::format("{} rank {}: ", at, rank) : at + ": ";
  }

  [[nodiscard]] bool multi_host() const { return plan_.hosts && plan_.hosts->hosts > 1; }
  [[nodiscard]] unsigned host_index() const { return plan_.hosts ? plan_.hosts->index : 0; }

  // --job-secret-file's content (without its last newline), else
  // TRAINIT_JOB_SECRET; empty: none.
  [[nodiscard]] Result<std::string> job_secret() const {
    if (options_.job_secret_file.empty()) {
      return std::string(env_.get("TRAINIT_JOB_SECRET").value_or(""));
    }
    auto text = fs_.read_file(options_.job_secret_file, 4096);
    if (!text) {
      return Error{fmt::format("--job-secret-file: {}", text.error().message), text.error().errnum};
    }
    std::string secret = std::move(*text);
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
      secret.pop_back();
    }
    if (secret.empty()) {
      return Error{fmt::format("--job-secret-file: {} is empty", options_.job_secret_file), EINVAL};
    }
    add_secret(secret);  // never written, as TRAINIT_JOB_SECRET's value is not
    return secret;
  }

  // --- wait_rank_table -----------------------------------------------------

  void enter_wait_rank_table() { table_wait_.start(); }

  void on_rank_table_ready(Plan plan) {
    plan_ = std::move(plan);
    status_.host = plan_.rank_table->pod_name.empty() ? plan_.rank_table->server_id : plan_.rank_table->pod_name;
    fire(Event::kDone, fmt::format("the rank table is complete: {} here of {}",
                                   count_of(plan_.processes.size(), "rank"), plan_.rank_table->rank_size));
  }

  void on_rank_table_timeout() {
    table_wait_.stop();
    time_out(kTempFail,
             fmt::format("the rank table {} was not complete within {:.0f} s; last seen: {}", table_wait_.path(),
                         seconds(options_.rank_table_timeout), table_wait_.pending()),
             "the rank table did not complete in time");
  }

  // --- resolve_peers, host_barrier -----------------------------------------

  void enter_resolve_peers() {
    if (!multi_host()) {
      fire(Event::kDone, "a single host has no peers");
      return;
    }
    peers_ = std::make_unique<PeerNames>(
        loop_, plan_.hosts->peers, [this](std::vector<in_addr> addrs) { on_peers_resolved(std::move(addrs)); },
        options_.peer_timeout);
  }

  void on_peers_resolved(std::vector<in_addr> addrs) {
    peer_addrs_ = std::move(addrs);
    if (plan_.replan_with_addresses && !replan_with_addresses()) {
      return;
    }
    fire(Event::kDone, fmt::format("every peer name resolved ({})", count_of(peer_addrs_.size(), "host")));
  }

  // The plan again, now that the peers have addresses (the hostfile and the
  // ssh configuration name them by address).
  bool replan_with_addresses() {
    input_.peer_addresses.clear();
    for (const in_addr& addr : peer_addrs_) {
      input_.peer_addresses.push_back(ipv4_string(addr));
    }
    auto plan = make_plan(input_);
    if (!plan) {
      fail(kConfig, plan.error().message);
      return false;
    }
    plan_ = std::move(*plan);
    return true;
  }

  void on_peer_timeout() {
    std::vector<std::string> missing = peers_ ? peers_->missing() : std::vector<std::string>{};
    if (peer_sshds_) {
      for (std::string& sshd : peer_sshds_->unanswered()) {
        missing.push_back(std::move(sshd));
      }
    }
    peers_.reset();
    peer_sshds_.reset();
    time_out(kUnavailable,
             fmt::format("{} within {:.0f} s: {}",
                         state_ == State::kResolvePeers ? "peer names not resolved" : "peers not answering",
                         seconds(options_.peer_timeout), fmt::join(missing, ", ")),
             "peers did not resolve in time");
  }

  void enter_host_barrier() {
    if (!multi_host()) {
      fire(Event::kDone, "a single host needs no barrier");
      return;
    }
    if (link_) {  // a restart: the channel is up, this generation's barrier is new
      check_devices_then(&JobRunner::check_in);
      return;
    }
    HostLinkSettings settings;
    settings.host_index = host_index();
    settings.host_count = plan_.hosts->hosts;
    settings.port = plan_.hosts->control_port;
    settings.hosts = peer_addrs_;
    settings.job_id = std::string(env_.get("MA_VJ_NAME").value_or(""));
    settings.secret = secret_;
    settings.peer_loss = options_.peer_loss;
    settings.barrier_timeout = barrier_timeout();
    HostLinkEvents events;
    events.on_go = [this] {
      if (state_ == State::kHostBarrier) {
        fire(Event::kDone, "every host checked in");
      }
    };
    events.on_stop = [this](const StopNotice& notice) { on_remote_stop(notice); };
    events.on_lost = [this](unsigned host, const std::string& why) {
      fail(kUnavailable, fmt::format("host {} lost: {}", host, why));
    };
    events.on_restart = [this](unsigned generation, const StopNotice& notice) {
      on_remote_restart(generation, notice);
    };
    events.on_job_done = [this](int code, const std::string& why) { on_job_done(code, why); };
    auto link = open_host_link(loop_, settings, std::move(events));
    if (!link) {
      fail(kOsError, fmt::format("control channel: {}", link.error().message));
      return;
    }
    link_ = std::move(*link);
    // Connected (heartbeats flow): this host checks in once its devices
    // passed, so that no rank starts anywhere before every device did.
    check_devices_then(&JobRunner::check_in);
  }

  void check_in() {
    devices_checked_ = options_.preflight_devices;  // this start's spawn checks them no more
    link_->check_in();
    // Checked in: the arena is made while the other hosts come, not after.
    arena_.prepare(local_rank_count());
  }

  // Every host but host 0 waits for the job's end ahead of the fair class
  // once its ranks run: a stop from host 0, a rank's exit or a lost peer is
  // taken when it comes, not after the scheduler has served every task woken
  // before it (with 1,024 simulated hosts on 2 cores, hosts woken by the
  // stop waited up to 0.5 s for a CPU; ahead, the last took it 0.13 s after
  // the failing rank's exit). Host 0 stays in the fair class: the heartbeats
  // of every host reach it, and its fan-outs run ahead anyway. Only after
  // the ranks started: a vfork child, in the fair class, would otherwise
  // wait behind its parent (and behind every host's trainit) to exec.
  void wait_ahead_while_running() {
    if (multi_host() && host_index() != 0) {
      ahead_.emplace();
    }
  }

  // --barrier-timeout, unless the mode's own rendezvous timeout says
  // otherwise (torchrun's --rdzv_conf=timeout=, MSRUN_CLUSTER_TIME_OUT).
  [[nodiscard]] Duration barrier_timeout() const {
    if (plan_.launch && plan_.launch->rendezvous_timeout) {
      return std::chrono::seconds(*plan_.launch->rendezvous_timeout);
    }
    return options_.barrier_timeout;
  }

  void on_barrier_timeout() {
    if (!exit_code_) {
      decide_here(kTempFail,
                  link_ ? link_->barrier_timeout_cause(barrier_timeout()) : "the control channel is not open",
                  Tell::kOtherHosts);
    }
    fire(Event::kTimedOut, "the barrier did not open in time");
  }

  // Another host stopped the job: this one stops with its code and cause.
  void on_remote_stop(const StopNotice& notice) {
    if (decide(notice.exit_code, where(notice.host, notice.rank) + notice.cause)) {
      log_error("the job stops: {}", status_.cause);
    }
    fire(Event::kFailed, fmt::format("host {} stopped the job", notice.host));
  }

  // The job is over on every host: done, or failed with host 0's code.
  void on_job_done(int code, const std::string& why) {
    if (code == 0) {
      fire(Event::kDone, why);
      return;
    }
    (void)decide(code, why);
    fire(Event::kFailed, status_.cause);
  }

  void tell_other_hosts(const StopNotice& notice) {
    if (link_) {
      (void)link_->stop(notice);
    }
  }

  // --- start_sshd, wait_peers (mpi) ----------------------------------------

  void enter_start_sshd() {
    if (!plan_.sshd) {
      fire(Event::kDone, "no sshd in this plan");
      return;
    }
    if (auto r = SshdPhase::prepare(*plan_.sshd, plan_.private_dir, plan_.dirs); !r) {
      fail(r.error().exit_code, r.error().message);
      return;
    }
    // A host that spawns nothing (mpi: hosts 1..H-1) writes its plan's files
    // now, before it checks in: host 0's mpirun starts orteds here that open
    // them once the barrier is passed.
    const bool spawns = std::find(plan_.states.begin(), plan_.states.end(), State::kSpawn) != plan_.states.end();
    if (!spawns && !write_plan_files()) {
      return;
    }
    SshdPhase::Events events;
    events.on_up = [this, spawns](const std::string& why) {
      if (!spawns) {
        narrow_own_privileges();  // sshd was all this host had to start
      }
      if (state_ == State::kStartSshd) {
        fire(Event::kDone, why);
      }
    };
    events.on_failed = [this](int code, std::string message) {
      fail(code, std::move(message));
      check_all_gone();  // an ssh-keygen the stop ended may have been the last process
    };
    events.on_exit = [this](int code) {
      if (state_ < State::kStopping) {
        fail(code == 0 ? 1 : code, fmt::format("sshd (pid {}) ended with {}", sshd_->pid(), code));
      }
      check_all_gone();
    };
    sshd_ = std::make_unique<SshdPhase>(loop_, launcher_, std::move(events));
    sshd_->start(*plan_.sshd, env_);
  }

  // Host 0: every peer's sshd takes a connection.
  void enter_wait_peers() {
    peer_sshds_ = std::make_unique<PeerSshds>(loop_, peer_addrs_, plan_.sshd ? plan_.sshd->port : 22, [this] {
      if (state_ == State::kWaitPeers) {
        fire(Event::kDone, "every host's sshd takes connections");
      }
    });
    if (peer_sshds_->empty()) {
      fire(Event::kDone, "no peer to wait for");
    }
  }

  // --- spawn, running ------------------------------------------------------

  void enter_spawn() {
    ahead_.reset();  // a restart's spawn: its vfork children must not wait behind it
    if (restart_pending_) {
      prepare_restart();
    }
    if (!make_job_dirs() || !write_plan_files()) {
      return;
    }
    prepare_rank_error_files();
    if (plan_.rank_table) {
      // An Ascend rank table's pages back to the kernel (megabytes for a
      // large job). Not without one: malloc_trim walks every free chunk
      // (a fifth of a torchrun host's spawn at 1,024 hosts, by perf).
      plan_.rank_table.reset();
      ::malloc_trim(0);
    }
    check_devices_then(&JobRunner::make_arena);
  }

  // The ranks' directories. A rank cannot start without its working
  // directory; without a log directory it can, on the console (the log
  // relay reports the files). False after fail() said why.
  bool make_job_dirs() {
    const bool to_job = pid1_.privileges != nullptr && pid1_.privileges->switches_user();
    for (const auto& dir : plan_.dirs) {
      // The job's processes write into the directories made for them
      // (--user); one that was there already stays whose it was.
      auto made = safe_fs::make_dirs(dir, 0755, to_job ? safe_fs::Give::kJob : safe_fs::Give::kTrainit);
      if (made) {
        continue;
      }
      if (is_working_dir(dir)) {
        fail(kCantCreate, fmt::format("cannot create directory {}: {}", dir, made.error().message));
        return false;
      }
      on_log_error(
          0, Error{fmt::format("cannot create log directory {}: {}", dir, made.error().message), made.error().errnum});
    }
    return true;
  }

  void make_arena() {
    arena_.create(local_rank_count(), [this](const Result<void>& r) {
      if (!r) {
        fail(r.error().exit_code, r.error().message);
      } else if (state_ == State::kSpawn) {
        spawn_ranks();
      }
    });
  }

  void spawn_ranks() {
    ranks_.reserve(plan_.processes.size());
    for (const auto& spec : plan_.processes) {
      std::optional<ArenaSeat> seat = spec.rank ? arena_.next_seat() : std::nullopt;
      if (auto r = ranks_.spawn(spec, seat ? &*seat : nullptr); !r) {
        fail(r.error().exit_code, r.error().message);
        return;
      }
    }
    wait_ahead_while_running();  // before narrowing: it takes CAP_SYS_NICE
    narrow_own_privileges();
    fire(Event::kDone, fmt::format("{} started", count_of(ranks_.size(), "rank")));
  }

  // --preflight devices: each local device proves itself before any rank
  // starts (device_preflight.h), at every start; on several hosts before
  // the host checks in. From the loop: `then` once they passed, fail() on
  // a failure. The state's deadline, signals and the control channel go on
  // meanwhile; leaving the state for stopping kills the checks.
  void check_devices_then(void (JobRunner::*then)()) {
    if (!options_.preflight_devices || std::exchange(devices_checked_, false)) {
      (this->*then)();
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
      (this->*then)();
      return;
    }
    // The checks run in the ranks' working directories.
    if (state_ == State::kHostBarrier && !make_job_dirs()) {
      return;
    }
    auto check = find_device_check(options_.device_check);
    if (!check) {
      fail(check.error().exit_code, check.error().message);
      return;
    }
    const State in = state_;
    device_preflight_ = std::make_unique<DevicePreflight>(
        loop_, pid1_, DevicePreflightSettings{*check, preflight_backend(env_, plan_.mode), options_.preflight_timeout},
        [this, then, in](const Result<void>& r) {
          if (!r) {
            fail(r.error().exit_code, r.error().message);
          } else if (state_ == in) {
            (this->*then)();
          }
        });
    if (auto r = device_preflight_->start(ranks); !r) {
      device_preflight_.reset();
      fail(r.error().exit_code, r.error().message);
    }
  }

  [[nodiscard]] unsigned local_rank_count() const {
    return static_cast<unsigned>(
        std::count_if(plan_.processes.begin(), plan_.processes.end(), [](const ProcessSpec& p) { return p.rank; }));
  }

  // Once the job's processes run, trainit keeps only what the rest of the
  // job needs of its capabilities: sshd has started, directories and files
  // are made; a restart spawns again, and makes the processes' error files
  // for them again; host 0 still writes the stop to every host.
  void narrow_own_privileges() {
    if (!privileges_narrowed_ && pid1_.privileges != nullptr) {
      privileges_narrowed_ = true;
      pid1_.privileges->narrow_own({.more_spawns = plan_.restarts.has_value(),
                                    .hands_over_files = true,
                                    // host 0's fan-outs, every host's wait ahead after a restart
                                    .runs_ahead = multi_host() && (host_index() == 0 || plan_.restarts.has_value())});
    }
  }

  // The ranks' TORCHELASTIC_ERROR_FILEs (the torchrun modes), each this
  // start's: read from now on only when written since (error_file.h).
  void prepare_rank_error_files() {
    error_files_since_ = file_clock_now();
    prepare_error_files(plan_.private_dir, plan_.processes,
                        pid1_.privileges != nullptr && pid1_.privileges->switches_user());
  }

  // Writes the plan's files. What was written (a copy of the rank table
  // among it, up to 16 MiB) is not needed again: PID 1 runs the job at its
  // usual size, whatever the table's. False after fail() said why.
  bool write_plan_files() {
    // Some sit in trainit's private directory (mpi), which only start_sshd
    // makes otherwise: a single MPI host starts no sshd.
    if (auto r = make_private_dir(plan_.private_dir); !r) {
      fail(kCantCreate, r.error().message);
      return false;
    }
    // mpirun and the orteds run as the job's user (--user): they reach their
    // files by name in trainit's directory, never list it.
    const bool to_job = pid1_.privileges != nullptr && pid1_.privileges->switches_user();
    if (!plan_.private_dir.empty() && to_job) {
      auto dir = safe_fs::open_dir(plan_.private_dir);
      if (!dir || ::fchmod(dir->get(), 0711) != 0) {
        fail(kCantCreate, fmt::format("cannot open {} to the job's user: {}", plan_.private_dir,
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
        fail(kCantCreate, r.error().message);
        return false;
      }
    }
    plan_.files = {};
    return true;
  }

  // Whether `dir` is, or holds, some rank's working directory.
  [[nodiscard]] bool is_working_dir(const std::string& dir) const {
    return std::any_of(plan_.processes.begin(), plan_.processes.end(), [&](const ProcessSpec& p) {
      return p.cwd == dir ||
             (p.cwd.size() > dir.size() && p.cwd.compare(0, dir.size(), dir) == 0 && p.cwd[dir.size()] == '/');
    });
  }

  void enter_running() {
    arena_.watch();
    notifier_.send("READY=1");
    if (ranks_.empty()) {
      ranks_done();  // a host with no rank of its own (mpi: hosts 1..H-1)
    }
  }

  // Every rank of this host exited 0. One host: the job is done. Several:
  // it is done when every host's is (host 0 then releases them all); until
  // then a failure elsewhere still stops this host.
  void ranks_done() {
    if (!multi_host()) {
      fire(Event::kDone, "every rank exited 0");
      return;
    }
    log_info("{}; waiting for the other hosts",
             ranks_.empty() ? "this host runs no rank of its own" : "every rank of this host exited 0");
    if (link_) {
      link_->finish();
    }
  }

  void on_rank_exit(Rank& rank, const std::string& how) {
    if (rank.spec->rank) {
      arena_.abort(fmt::format("{} exited", rank.spec->name));
    }
    const bool stopped = state_ >= State::kStopping;  // trainit had begun to stop the job
    rank.state = stopped ? RankState::kStopped : rank.code == 0 ? RankState::kExited : RankState::kFailed;
    // A failing rank's own account, where it left one (error_file.h).
    const std::string what =
        rank.state == RankState::kFailed ? how + root_cause_of(*rank.spec, plan_.private_dir, error_files_since_) : how;
    write_status();
    if (rank.state == RankState::kFailed && state_ == State::kRunning && may_restart() &&
        restart_everywhere(rank, what)) {
      restart_pending_ = true;
      log_warning("{} (pid {}) {}; restarting the job (restart {} of {})", rank.spec->name, rank.pid, what,
                  restarts_ + 1,
                  *plan_.restarts == kUnlimitedRestarts ? std::string("unlimited") : std::to_string(*plan_.restarts));
      fire(Event::kRestart, fmt::format("{} {}", rank.spec->name, what));
    } else if (rank.state == RankState::kFailed && state_ == State::kRunning) {
      fail(rank.code, fmt::format("{} (pid {}) {}", rank.spec->name, rank.pid, what), rank.number());
    } else {
      log_info("{} (pid {}) {}", rank.spec->name, rank.pid, what);
      if (!ranks_.any_running() && state_ == State::kRunning) {
        ranks_done();
      } else {
        fire(Event::kRankExited, fmt::format("{} {}", rank.spec->name, what));
      }
    }
    check_all_gone();
  }

  // --- restarts ------------------------------------------------------------

  // Whether a rank's failure restarts the job (Plan::restarts): restarts
  // left, and nothing else ending the job.
  [[nodiscard]] bool may_restart() const { return plan_.restarts && restarts_ < *plan_.restarts && !exit_code_; }

  // Several hosts restart together: host 0 begins the next generation
  // everywhere (this host's restarts_ then follows it). False when a stop
  // came first: the failure then ends the job.
  bool restart_everywhere(const Rank& rank, const std::string& what) {
    if (!multi_host()) {
      return true;
    }
    const StopNotice notice{rank.code, static_cast<int>(host_index()), rank.number(),
                            fmt::format("{} {}", rank.spec->name, what)};
    const unsigned generation = link_ ? link_->restart(notice) : 0;
    if (generation == 0) {
      return false;
    }
    restarts_ = generation - 1;
    return true;
  }

  // Another host's rank failed: this host stops its ranks and meets the
  // others at the barrier of `generation`.
  void on_remote_restart(unsigned generation, const StopNotice& notice) {
    if (exit_code_) {
      return;  // the job is ending anyway
    }
    restarts_ = generation - 1;
    if (restart_pending_) {
      return;  // already stopping to start again
    }
    log_warning("host {}: {}; restarting the job (restart {})", notice.host, notice.cause, generation);
    if (state_ == State::kRunning) {
      restart_pending_ = true;
      fire(Event::kRestart, fmt::format("host {} restarts the job", notice.host));
    }
  }

  // spawn, again: the ranks of the last start are gone; the workers learn
  // which start this is (TORCHELASTIC_RESTART_COUNT, where the plan sets it).
  void prepare_restart() {
    restart_pending_ = false;
    ++restarts_;
    ranks_.clear();
    for (ProcessSpec& spec : plan_.processes) {
      for (EnvVar& var : spec.env) {
        if (var.name == "TORCHELASTIC_RESTART_COUNT") {
          var.value = std::to_string(restarts_);
        }
      }
    }
  }

  // --- stopping, reaping, exit ---------------------------------------------

  void enter_stopping() {
    notifier_.send("STOPPING=1");
    // A preflight under way: its processes are killed now (the loop reaps
    // them), nothing of it acts later.
    device_preflight_.reset();
    arena_.cancel();
    arena_.abort("the job is stopping");
    if (!loop_.has_children()) {
      fire(Event::kAllGone, "no process is left");
      return;
    }
    escalation_.start(SIGTERM);  // SIGKILL after the grace: TimedOut, to reaping
  }

  // The escalation sends SIGKILL, and again while anything is left.
  void enter_reaping() { check_all_gone(); }

  void check_all_gone() {
    if ((state_ == State::kStopping || state_ == State::kReaping) && !loop_.has_children()) {
      escalation_.finish();
      // A job whose end is decided (a stop, a failure, a timeout while the
      // hosts met for the restart) does not start again.
      if (state_ == State::kReaping && restart_pending_ && !exit_code_) {
        fire(Event::kRestart, "no process is left: the job starts again");
      } else {
        fire(Event::kAllGone, "no process is left");
      }
    }
  }

  // The end. The control channel's last frames (a stop, a release) leave
  // first, from the loop, for kControlFlush at most; then the logs, the
  // status file and the termination message.
  void enter_exit() {
    relay_.finish();
    exit_code_ = exit_code();  // the outcome is decided: nothing heard meanwhile changes it
    if (link_) {
      exit_wait_ = loop_.add_timer(
          Clock::now() + kControlFlush,
          [this] {
            finish_exit();
            return 0;
          },
          "the control channel's last frames");
      link_->when_sent([this] { finish_exit(); });
      return;
    }
    finish_exit();
  }

  void finish_exit() {
    if (loop_.exiting()) {
      return;  // the timer or the channel came first
    }
    exit_wait_.reset();
    relay_.flush_console(std::chrono::milliseconds(1000));
    if (uint64_t dropped = relay_.console_dropped(); dropped > 0) {
      log_warning("rank output not shown on the console (it was not read fast enough): {}", count_of(dropped, "byte"));
    }
    status_.exit_code = exit_code();
    write_status();
    write_termination_message();
    notifier_.status(fmt::format("exited with {}", exit_code()));
    log_info("exit {}", exit_code());
    loop_.exit(exit_code());
  }

  // A log file or directory that fails: reported once per job for each kind
  // of failure (16 ranks on a full disk make one line, not 16); the ranks go
  // on with the console.
  void on_log_error(size_t rank, const Error& error) {
    if (rank == LogRelay::kConsole) {
      log_warning("{}", error.message);
      return;
    }
    if (std::find(log_errors_.begin(), log_errors_.end(), error.errnum) != log_errors_.end()) {
      log_debug("{}", error.message);
      return;
    }
    log_errors_.push_back(error.errnum);
    log_warning("{}; the job goes on (reported once for every rank)", error.message);
  }

  // --- signals and status --------------------------------------------------

  int on_signal(const signalfd_siginfo& info) {
    const int signo = static_cast<int>(info.ssi_signo);
    if (signo == SIGPIPE && static_cast<pid_t>(info.ssi_pid) == ::getpid()) {
      return 0;
    }
    if (signo == SIGTERM || signo == SIGINT) {
      restart_pending_ = false;  // a stop ends the job, restarting or not
      const std::string why = fmt::format("trainit got {}", signal_name(signo));
      if (decide(kSignalBase + signo, where(static_cast<int>(host_index()), -1) + why)) {
        tell_other_hosts(StopNotice{kSignalBase + signo, static_cast<int>(host_index()), -1, why});
      }
      fire(Event::kTerm, fmt::format("got {}", signal_name(signo)));
      return 0;
    }
    ranks_.signal_groups(signo);  // other signals: to every live rank's session
    return 0;
  }

  // How the job ended, in one line, where the platform looks for it
  // (Kubernetes' termination message), once, when the file is there.
  void write_termination_message() {
    if (options_.termination_log.empty()) {
      return;
    }
    if (auto r = write_termination_log(options_.termination_log, status_.end_line()); !r) {
      if (r.error().errnum == ENOENT) {
        log_debug("{}", r.error().message);
      } else {
        log_warning("{}", r.error().message);
      }
    }
  }

  void write_status() {
    note_cause_state();
    status_.state = std::string(state_name(state_));
    status_.reason = reason_;
    status_.ranks = ranks_.status();
    if (auto r = status_.write(); !r && !status_error_reported_) {
      status_error_reported_ = true;
      log_warning("{}", r.error().message);
    }
  }

  const Options& options_;
  const Pid1& pid1_;
  Loop& loop_;
  Environment env_;
  RealFileSystem fs_;
  PlanInput input_;
  Plan plan_;
  Notifier notifier_;
  LogRelay relay_;
  Escalation escalation_;
  StatusFile status_;
  std::string secret_;  // the hosts' shared secret; empty: none
  // The machine.
  State state_ = State::kWaitRankTable;
  Clock::time_point entered_;
  std::string reason_;
  std::deque<std::pair<Event, std::string>> events_;
  bool in_transition_ = false;
  bool started_ = false;
  SourceHandle signals_, deadline_;
  SourceHandle exit_wait_;  // exit: until the control channel's last frames left
  // The outcome.
  std::optional<int> exit_code_;
  bool status_error_reported_ = false;
  std::vector<int> log_errors_;           // the errnos of log-file failures reported
  unsigned restarts_ = 0;                 // times the job was started again (Plan::restarts)
  bool restart_pending_ = false;          // the ranks are being stopped to start again
  bool privileges_narrowed_ = false;      // narrow_own_privileges() ran
  bool devices_checked_ = false;          // this start's devices passed before the host checked in
  struct timespec error_files_since_ {};  // when this start's error files were prepared
  // The phases.
  Launcher launcher_;
  RankSet ranks_;
  ArenaWatch arena_;
  RankTableWait table_wait_;
  std::unique_ptr<PeerNames> peers_;
  std::vector<in_addr> peer_addrs_;  // host i's address
  std::unique_ptr<HostLink> link_;
  std::unique_ptr<SshdPhase> sshd_;
  std::unique_ptr<PeerSshds> peer_sshds_;
  std::unique_ptr<DevicePreflight> device_preflight_;  // this start's, from its start to the next
  // While set, this thread runs ahead of the fair class (base/urgent.h):
  // every host of several but host 0, once its ranks run.
  std::optional<UrgentSection> ahead_;
};

const std::pair<State, JobRunner::Enter> JobRunner::kEntries[10] = {
    {State::kWaitRankTable, &JobRunner::enter_wait_rank_table},
    {State::kResolvePeers, &JobRunner::enter_resolve_peers},
    {State::kStartSshd, &JobRunner::enter_start_sshd},
    {State::kWaitPeers, &JobRunner::enter_wait_peers},
    {State::kHostBarrier, &JobRunner::enter_host_barrier},
    {State::kSpawn, &JobRunner::enter_spawn},
    {State::kRunning, &JobRunner::enter_running},
    {State::kStopping, &JobRunner::enter_stopping},
    {State::kReaping, &JobRunner::enter_reaping},
    {State::kExit, &JobRunner::enter_exit},
};

}  // namespace

int run_job(const Options& options, const Pid1& pid1, Environment env, ConsoleWriter& console) {
  Loop loop;
  if (int r = loop.init(); r < 0) {
    log_error("cannot create the event loop: {}", errno_string(-r));
    return kOsError;
  }
  JobRunner runner(options, pid1, loop, std::move(env), console);
  runner.start();
  int r = loop.run();
  if (r < 0) {
    log_error("event loop failed: {}; killing everything", errno_string(-r));
    fatal_exit(pid1, 0);
  }
  return runner.exit_code();
}

}  // namespace trainit
