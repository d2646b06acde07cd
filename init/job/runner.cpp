#include "job/runner.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/exit_code.h"
#include "base/log.h"
#include "base/redact.h"
#include "job/error_file.h"
#include "job/hosts.h"
#include "job/machine.h"
#include "job/outcome.h"
#include "job/rank_table_wait.h"
#include "job/restarts.h"
#include "job/spawn.h"
#include "job/sshd.h"
#include "loop/loop.h"
#include "net/socket.h"
#include "os/fs.h"
#include "os/text.h"
#include "proc/escalation.h"
#include "proc/signals.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using namespace exit_code;

// How long trainit waits, at its exit, for its last control messages (a
// stop, a release) to leave.
constexpr Duration kControlFlush = 1s;

PlanInput plan_input(const Options& options, Environment env, const FileSystem& fs) {
  PlanInput input;
  input.options = plan_options(options);
  // main() resolved the mode already (and refused a bad one): a job mode.
  auto mode = resolve_mode(options.mode, env);
  input.options.mode = mode ? *mode : Mode::kAscend;
  input.argv = options.command;
  input.env = std::move(env);
  input.fs = &fs;
  return input;
}

class JobRunner {
 public:
  JobRunner(const Options& options, const Pid1& pid1, Loop& loop, Environment env, ConsoleWriter& console,
            const FileSystem& fs)
      : options_(options),
        pid1_(pid1),
        loop_(loop),
        input_(plan_input(options, std::move(env), fs)),
        relay_(loop, &console),
        escalation_(
            loop, options.grace, [this](int signo) { spawn_.ranks().signal_everything(pid1_, signo); },
            [this] {
              machine_.fire(Event::kTimedOut, fmt::format("processes still ran {:.3f} s after SIGTERM: SIGKILL",
                                                          seconds(options_.grace)));
            }),
        outcome_(plan_, options.status_file, input_.env, input_.options.mode.value_or(Mode::kAscend),
                 options.termination_log, [this](const StopNotice& notice) { hosts_.stop(notice); }),
        machine_(loop, plan_,
                 JobMachine::Deadlines{options.rank_table_timeout, options.peers.peer_timeout,
                                       [this] { return hosts_.barrier_deadline(); }},  // the devices' checks included
                 [this](std::optional<State> from, State to, const std::string& why, double since) {
                   outcome_.note_state(from ? state_name(*from) : "start");
                   outcome_.entered(state_name(to), why, since, spawn_.ranks().status());
                 }),
        spawn_(loop, pid1, relay_, plan_, input_.env, options.spawn,
               SpawnPhase::Events{
                   .on_failed = [this](int code, std::string message) { fail(code, std::move(message)); },
                   .on_started =
                       [this](size_t ranks) {
                         machine_.fire(Event::kDone, fmt::format("{} started", count_of(ranks, "rank")));
                       },
                   .on_rank_exit = [this](Rank& rank, const std::string& how) { on_rank_exit(rank, how); },
               }),
        table_wait_(loop, input_,
                    RankTableWait::Events{[this](Plan plan) { on_rank_table_ready(std::move(plan)); },
                                          [this](const Error& error) { fail(kConfig, error.message); }},
                    RankTableWait::kPoll, options.rank_table_timeout),
        hosts_(loop, plan_, hosts_settings(options.peers, options.spawn.preflight, input_.env), hosts_events()),
        restarts_(plan_, hosts_),
        sshd_(loop, spawn_.launcher(), sshd_events()) {
    relay_.set_error_handler(LogRelay::each_kind_once());
    // Each state's work: what entering it does, what leaving it ends, what
    // its deadline's expiry does (the machine's table says which deadline).
    machine_.set_work(
        State::kWaitRankTable, [this] { table_wait_.start(); }, [this] { table_wait_.stop(); },
        [this] { on_rank_table_timeout(); });
    machine_.set_work(
        State::kResolvePeers, [this] { hosts_.resolve(); }, {}, [this] { on_peer_timeout(); });
    machine_.set_work(
        State::kStartSshd, [this] { sshd_.enter(plan_, input_.env); }, [this] { sshd_.stop_starting(); });
    machine_.set_work(
        State::kWaitPeers, [this] { hosts_.wait_sshds(); }, {}, [this] { on_peer_timeout(); });
    machine_.set_work(
        State::kHostBarrier, [this] { hosts_.meet(); }, {}, [this] { on_barrier_timeout(); });
    machine_.set_work(
        State::kSpawn, [this] { enter_spawn(); }, [this] { restarts_.cancel(); });
    machine_.set_work(
        State::kRunning, [this] { enter_running(); }, [this] { spawn_.arena().stop_watching(); });
    machine_.set_work(State::kStopping, [this] { enter_stopping(); });
    machine_.set_work(State::kReaping, [this] { check_all_gone(); });  // SIGKILL until nothing is left
    machine_.set_work(State::kExit, [this] { enter_exit(); });
  }

  void start() {
    signals_ = loop_.add_signal(
        forwardable_signals(), [this](const signalfd_siginfo& i) { return on_signal(i); }, "signals");
    loop_.set_orphan_handler([this](const siginfo_t&) { check_all_gone(); });
    outcome_.notifier().start_watchdog(loop_);
    machine_.start([this] {
      auto secret = read_job_secret(options_.peers.job_secret_file, input_.env, *input_.fs);
      if (!secret) {
        fail(kConfig, secret.error().message);
        return;
      }
      hosts_.set_secret(std::move(*secret));
      if (waits_for_rank_table(input_.options.mode.value_or(Mode::kAscend), input_.env)) {
        machine_.go(State::kWaitRankTable, "trainit started");
        return;
      }
      auto plan = make_plan(input_);  // nothing to wait for: planned at once
      if (!plan) {
        fail(plan.error().exit_code != 0 ? plan.error().exit_code : kConfig, plan.error().message);
        return;
      }
      plan_ = std::move(*plan);
      outcome_.set_mode(std::string(mode_name(plan_.mode)));
      machine_.go(plan_.states.front(), "trainit started");
    });
  }

  [[nodiscard]] int exit_code() const { return outcome_.code(); }

 private:
  [[nodiscard]] State state() const { return machine_.state(); }

  // The first reason to stop decides the exit code (told to the other
  // hosts), then Failed. In a multi-host job the cause names this host
  // (and the rank, if any).
  void fail(int code, std::string message, int rank = -1) {
    outcome_.decide_here(code, message, JobOutcome::Tell::kOtherHosts, rank);
    machine_.fire(Event::kFailed, std::move(message));
  }

  // A state's timeout (not told to other hosts: each has the same deadline).
  void time_out(int code, const std::string& cause, std::string event_reason) {
    outcome_.decide_here(code, cause, JobOutcome::Tell::kNo);
    machine_.fire(Event::kTimedOut, std::move(event_reason));
  }

  // --- wait_rank_table -----------------------------------------------------

  void on_rank_table_ready(Plan plan) {
    plan_ = std::move(plan);
    if (const RankTablePlan& table = *plan_.rank_table; !table.pod_name.empty() || !table.server_id.empty()) {
      outcome_.set_host(table.pod_name.empty() ? table.server_id : table.pod_name);  // msrun's names none
    }
    machine_.fire(Event::kDone, fmt::format("the rank table is complete: {} here of {}",
                                            count_of(plan_.processes.size(), "rank"), plan_.rank_table->rank_size));
  }

  void on_rank_table_timeout() {
    table_wait_.stop();
    time_out(kTempFail, table_wait_.timeout_cause(), "the rank table did not complete in time");
  }

  // --- resolve_peers, wait_peers, host_barrier ------------------------------

  HostsPhase::Events hosts_events() {
    HostsPhase::Events events;
    events.link.on_stop = [this](const StopNotice& notice) {
      outcome_.decide_remote(notice);
      machine_.fire(Event::kFailed, fmt::format("host {} stopped the job", notice.host));
    };
    events.link.on_lost = [this](unsigned host, const std::string& why) {
      fail(kUnavailable, fmt::format("host {} lost: {}", host, why));
    };
    events.link.on_restart = [this](unsigned generation, const StopNotice& notice) {
      on_remote_restart(generation, notice);
    };
    // The job is over on every host: done, or failed with host 0's code.
    events.link.on_job_done = [this](int code, const std::string& why) {
      if (code != 0) {
        (void)outcome_.decide(code, why);
      }
      machine_.fire(code == 0 ? Event::kDone : Event::kFailed, code == 0 ? why : outcome_.cause());
    };
    events.on_done = [this](State in, const std::string& why) { done_in(in, why); };
    events.on_failed = [this](int code, std::string message) { fail(code, std::move(message)); };
    events.on_resolved = [this] { return replan_with_addresses(); };
    events.check_devices = [this](std::function<void()> then) { spawn_.check_devices_at_barrier(std::move(then)); };
    events.on_checked_in = [this] { spawn_.prepare_arena(); };  // made while the other hosts come
    return events;
  }

  // Done, when the machine is still in `in`.
  void done_in(State in, const std::string& why) {
    if (state() == in) {
      machine_.fire(Event::kDone, why);
    }
  }

  // The plan again, now that the peers have addresses, where it asks (the
  // hostfile and the ssh configuration name them by address). False after
  // fail().
  bool replan_with_addresses() {
    if (!plan_.replan_with_addresses) {
      return true;
    }
    input_.peer_addresses.clear();
    for (const in_addr& addr : hosts_.addresses()) {
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
    time_out(kUnavailable, hosts_.peers_timeout_cause(state() == State::kResolvePeers),
             "peers did not resolve in time");
  }

  void on_barrier_timeout() {
    outcome_.decide_here(kTempFail, hosts_.barrier_timeout_cause(), JobOutcome::Tell::kOtherHosts);
    machine_.fire(Event::kTimedOut, "the barrier did not open in time");
  }

  // --- start_sshd (mpi) ----------------------------------------------------

  SshdPhase::Events sshd_events() {
    // A host that spawns nothing (mpi: hosts 1..H-1) writes its plan's files
    // before sshd starts and it checks in: host 0's mpirun starts orteds here
    // that open them once the barrier is passed. sshd is all it starts.
    auto spawns = [this] {
      return std::find(plan_.states.begin(), plan_.states.end(), State::kSpawn) != plan_.states.end();
    };
    SshdPhase::Events events;
    events.before_start = [this, spawns] { return spawns() || spawn_.write_plan_files(); };
    events.on_up = [this, spawns](const std::string& why) {
      if (!spawns()) {
        spawn_.narrow_own_privileges();
      }
      done_in(State::kStartSshd, why);
    };
    events.on_failed = [this](int code, std::string message) {
      fail(code, std::move(message));
      check_all_gone();  // an ssh-keygen the stop ended may have been the last process
    };
    events.on_exit = [this](int code) {
      if (state() < State::kStopping) {
        fail(code == 0 ? 1 : code, fmt::format("sshd (pid {}) ended with {}", sshd_.pid(), code));
      }
      check_all_gone();
    };
    return events;
  }

  // --- spawn, running ------------------------------------------------------

  // A restart's start waits out its backoff first (leaving spawn meanwhile
  // cancels it).
  void enter_spawn() {
    restarts_.start(loop_, plan_, [this] { spawn_.enter(); });
  }

  void enter_running() {
    spawn_.arena().watch();
    outcome_.notifier().send("READY=1");
    if (spawn_.ranks().empty()) {
      ranks_done();  // a host with no rank of its own (mpi: hosts 1..H-1)
    }
  }

  // Every rank of this host exited 0. One host: the job is done. Several:
  // it is done when every host's is (host 0 then releases them all); until
  // then a failure elsewhere still stops this host.
  void ranks_done() {
    if (!outcome_.multi_host()) {
      machine_.fire(Event::kDone, "every rank exited 0");
      return;
    }
    log_info("{}; waiting for the other hosts",
             spawn_.ranks().empty() ? "this host runs no rank of its own" : "every rank of this host exited 0");
    hosts_.finish();
  }

  void on_rank_exit(Rank& rank, const std::string& what) {
    const bool failed = rank.state == RankState::kFailed && state() == State::kRunning;
    outcome_.ranks_changed(state_name(state()), spawn_.ranks().status());
    if (failed && !outcome_.decided() &&
        restarts_.restart_for(StopNotice{rank.code, static_cast<int>(outcome_.host_index()), rank.number(),
                                         fmt::format("{} {}", rank.spec->name, what)})) {
      log_warning("{} (pid {}) {}; restarting the job (restart {})", rank.spec->name, rank.pid, what,
                  restarts_.next_of_limit());
      machine_.fire(Event::kRestart, fmt::format("{} {}", rank.spec->name, what));
    } else if (failed) {
      fail(rank.code, fmt::format("{} (pid {}) {}", rank.spec->name, rank.pid, what), rank.number());
    } else {
      log_info("{} (pid {}) {}", rank.spec->name, rank.pid, what);
      if (!spawn_.ranks().any_running() && state() == State::kRunning) {
        ranks_done();
      } else {
        machine_.fire(Event::kRankExited, fmt::format("{} {}", rank.spec->name, what));
      }
    }
    check_all_gone();
  }

  // --- restarts ------------------------------------------------------------

  // Another host's rank failed: this host stops its ranks and meets the
  // others at the barrier of `generation`.
  void on_remote_restart(unsigned generation, const StopNotice& notice) {
    if (outcome_.decided()) {
      return;  // the job is ending anyway
    }
    restarts_.follow(generation);
    if (restarts_.pending()) {
      return;  // already stopping to start again
    }
    log_warning("host {}: {}; restarting the job (restart {})", notice.host, notice.cause, generation);
    // Running, or still spawning (or waiting out a backoff): what this host
    // started stops, and it meets the others for the new start.
    if (state() == State::kRunning || state() == State::kSpawn) {
      restarts_.set_pending(true);
      machine_.fire(Event::kRestart, fmt::format("host {} restarts the job", notice.host));
    }
  }

  // --- stopping, reaping, exit ---------------------------------------------

  void enter_stopping() {
    outcome_.notifier().send("STOPPING=1");
    spawn_.stop();  // a preflight under way: its processes are killed now (the loop reaps them)
    if (!loop_.has_children()) {
      machine_.fire(Event::kAllGone, "no process is left");
      return;
    }
    escalation_.start(SIGTERM);  // SIGKILL after the grace: TimedOut, to reaping
  }

  void check_all_gone() {
    if ((state() == State::kStopping || state() == State::kReaping) && !loop_.has_children()) {
      escalation_.finish();
      // A job whose end is decided (a stop, a failure, a timeout while the
      // hosts met for the restart) does not start again.
      if (state() == State::kReaping && restarts_.pending() && !outcome_.decided()) {
        machine_.fire(Event::kRestart, "no process is left: the job starts again");
      } else {
        machine_.fire(Event::kAllGone, "no process is left");
      }
    }
  }

  // The end. The control channel's last frames (a stop, a release) leave
  // first, from the loop, for kControlFlush at most; then the logs, the
  // status file and the termination message.
  void enter_exit() {
    relay_.finish();
    outcome_.freeze();  // nothing heard meanwhile changes it
    hosts_.when_sent(kControlFlush, [this] { finish_exit(); });
  }

  void finish_exit() {
    relay_.flush_console(std::chrono::milliseconds(1000));
    if (uint64_t dropped = relay_.console_dropped(); dropped > 0) {
      log_warning("rank output not shown on the console (it was not read fast enough): {}", count_of(dropped, "byte"));
    }
    outcome_.finish(state_name(state()), spawn_.ranks().status());
    log_info("exit {}", exit_code());
    loop_.exit(exit_code());
  }

  // --- signals -------------------------------------------------------------

  int on_signal(const signalfd_siginfo& info) {
    const int signo = static_cast<int>(info.ssi_signo);
    if (signo == SIGPIPE && static_cast<pid_t>(info.ssi_pid) == ::getpid()) {
      return 0;
    }
    if (signo == SIGTERM || signo == SIGINT) {
      restarts_.set_pending(false);  // a stop ends the job, restarting or not
      outcome_.decide_signal(kSignalBase + signo, fmt::format("trainit got {}", signal_name(signo)));
      machine_.fire(Event::kTerm, fmt::format("got {}", signal_name(signo)));
      return 0;
    }
    spawn_.ranks().signal_groups(signo);  // other signals: to every live rank's session
    return 0;
  }

  const Options& options_;
  const Pid1& pid1_;
  Loop& loop_;
  PlanInput input_;  // what the plan is made from (again, once the peers have addresses)
  Plan plan_;
  LogRelay relay_;
  Escalation escalation_;
  JobOutcome outcome_;
  JobMachine machine_;
  SpawnPhase spawn_;
  RankTableWait table_wait_;
  HostsPhase hosts_;
  Restarts restarts_;
  SshdPhase sshd_;
  SourceHandle signals_;
};

}  // namespace

int run_job(const Options& options, const Pid1& pid1, Environment env, ConsoleWriter& console) {
  Loop loop;
  if (int r = loop.init(); r < 0) {
    log_error("cannot create the event loop: {}", errno_string(-r));
    return kOsError;
  }
  const RealFileSystem fs;
  JobRunner runner(options, pid1, loop, std::move(env), console, fs);
  runner.start();
  int r = loop.run();
  if (r < 0) {
    log_error("event loop failed: {}; killing everything", errno_string(-r));
    fatal_exit(pid1, 0);
  }
  return runner.exit_code();
}

}  // namespace trainit
