#include "job_mode.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "base/exit_code.h"
#include "base/log.h"
#include "coll_arena.h"
#include "log/relay.h"
#include "loop/loop.h"
#include "machine.h"
#include "net/control.h"
#include "net/probe.h"
#include "net/resolver.h"
#include "net/socket.h"
#include "notify/notify.h"
#include "notify/receiver.h"
#include "plan/mpi.h"
#include "platform/fs.h"
#include "platform/path.h"
#include "proc/escalation.h"
#include "proc/signals.h"
#include "proc/spawn.h"
#include "proc/tree.h"
#include "status_file.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;

using namespace exit_code;

// inotify can stay silent (NFS, some FUSE and overlay set-ups): look anyway.
constexpr Duration kRankTablePoll = 2s;
// The collective arena's self-test: a barrier and an allreduce among the
// local slots take milliseconds; this long means something is broken.
constexpr Duration kCollPreflightTimeout = 10s;

// How long trainit waits, at its exit, for its last control messages (a
// stop, a release) to leave.
constexpr Duration kControlFlush = 1s;

double seconds(Duration d) {
  return std::chrono::duration<double>(d).count();
}

// mkdir -p (mode 0777 & ~umask, as mkdir(1)). Returns 0 or -errno.
int make_dirs(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  return error ? -error.value() : 0;
}

// trainit's private directory for the job: made 0700 when missing; one that
// exists must be a directory of trainit's own user, not a symlink, and
// writable by nobody else (sshd refuses its files otherwise).
Result<void> make_private_dir(const std::string& path) {
  if (path.empty()) {
    return {};
  }
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    if (int r = make_dirs(path.substr(0, path.rfind('/'))); r < 0 || ::mkdir(path.c_str(), 0700) != 0) {
      return Error{fmt::format("cannot create trainit's directory {}: {}", path, errno_string(errno)), errno};
    }
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 0022) != 0) {
    return Error{fmt::format("trainit's directory {} must be a directory of uid {}, not a symlink, writable only by it",
                             path, ::geteuid()),
                 EPERM};
  }
  return {};
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
            loop, options.grace, [this](int signo) { signal_everything(signo); },
            [this] {
              fire(Event::kTimedOut,
                   fmt::format("processes still ran {:.3f} s after SIGTERM: SIGKILL", seconds(options_.grace)));
            }) {
    relay_.set_error_handler([this](size_t rank, const Error& e) { on_log_error(rank, e); });
    input_.options = plan_options(options);
    // main() resolved the mode already (and refused a bad one): a job mode.
    auto mode = resolve_mode(options.mode, env_);
    input_.options.mode = mode ? *mode : Mode::kAscend;
    input_.argv = options.command;
    input_.env = env_;
    input_.fs = &fs_;
    status_.path = options.status_file.empty() ? default_status_path(env_) : options.status_file;
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
  struct Rank {
    const ProcessSpec* spec = nullptr;
    pid_t pid = 0;
    size_t log = LogRelay::kConsole;  // its index in the log relay
    SourceHandle child;               // until it is reaped: its pid, and its group's id, are its own
    RankState state = RankState::kRunning;
    int code = -1;
    [[nodiscard]] bool running() const { return state == RankState::kRunning; }
  };

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

  // The one place a transition happens: log, status file, STATUS=, then the
  // state's row: its deadline, and what entering it does.
  void go(State to, const std::string& reason) {
    const Clock::time_point now = Clock::now();
    if (started_) {
      log_info("{} -> {} after {:.3f} s: {}", state_name(state_), state_name(to), seconds(now - entered_), reason);
    } else {
      log_info("{}: {}", state_name(to), reason);
      started_ = true;
    }
    state_ = to;
    entered_ = now;
    status_.since = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    reason_ = reason;
    write_status();
    notifier_.status(fmt::format("{}: {}", state_name(to), reason));
    const StateRow& row = state_row(to);
    deadline_.reset();
    switch (row.deadline) {
      case Deadline::kNone:
        break;
      case Deadline::kRankTable:
        deadline_ = loop_.add_timer(
            now + options_.rank_table_timeout,
            [this] {
              on_rank_table_timeout();
              return 0;
            },
            "rank table deadline");
        break;
      case Deadline::kGrace:
        break;  // the stop escalation's clock: it fires TimedOut with its SIGKILL
      case Deadline::kPeers:
        deadline_ = loop_.add_timer(
            now + options_.peer_timeout,
            [this] {
              on_peer_timeout();
              return 0;
            },
            "peer deadline");
        break;
      case Deadline::kBarrier:
        deadline_ = loop_.add_timer(
            now + barrier_timeout(),
            [this] {
              on_barrier_timeout();
              return 0;
            },
            "barrier deadline");
        break;
    }
    for (const auto& [state, enter] : kEntries) {
      if (state == to) {
        (this->*enter)();
        return;
      }
    }
    fail(kSoftware, fmt::format("state {} is not implemented", state_name(to)));  // states of modes not run yet
  }

  // What entering each state does (the machine's table says what it is for).
  using Enter = void (JobRunner::*)();
  static const std::pair<State, Enter> kEntries[10];

  // Records the first reason to stop with its exit code (the job's cause, in
  // the status file to the end), tells the other hosts, then fires Failed.
  // In a multi-host job the cause names this host (and the rank, if any).
  void fail(int code, std::string message, int rank = -1) {
    if (!exit_code_) {
      exit_code_ = code;
      status_.cause = where(static_cast<int>(host_index()), rank) + message;
      log_error("{}", status_.cause);
      tell_other_hosts(StopNotice{code, static_cast<int>(host_index()), rank, message});
    }
    fire(Event::kFailed, std::move(message));
  }

  // "host 1 rank 3: " in a multi-host job, "" on one host.
  [[nodiscard]] std::string where(int host, int rank) const {
    if (!multi_host()) {
      return {};
    }
    return rank >= 0 ? fmt::format("host {} rank {}: ", host, rank) : fmt::format("host {}: ", host);
  }

  // --- wait_rank_table -----------------------------------------------------

  void enter_wait_rank_table() {
    auto location = env_.rank_table_location(fs_);
    if (!location) {
      fail(kConfig, location.error().message);
      return;
    }
    table_path_ = location->path;
    table_file_.emplace(table_path_);
    input_.fs = &table_file_->file_system();
    inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (inotify_) {
      watch_directory();
      inotify_source_ = loop_.add_io(
          inotify_.get(), EPOLLIN,
          [this](uint32_t) {
            on_directory_events();
            return 0;
          },
          "rank table directory");
    }
    poll_ = loop_.add_timer(
        Clock::now() + kRankTablePoll, [this] { return on_poll(); }, "rank table poll");
    try_plan();
  }

  void on_rank_table_timeout() {
    stop_waiting();
    if (!exit_code_) {
      exit_code_ = kTempFail;
      status_.cause = fmt::format("the rank table {} was not complete within {:.0f} s; last seen: {}", table_path_,
                                  seconds(options_.rank_table_timeout), pending_);
      log_error("{}", status_.cause);
    }
    fire(Event::kTimedOut, "the rank table did not complete in time");
  }

  void watch_directory() {
    if (watch_ >= 0) {
      return;
    }
    std::string dir = table_path_.substr(0, table_path_.rfind('/'));
    watch_ = ::inotify_add_watch(inotify_.get(), dir.empty() ? "/" : dir.c_str(),
                                 IN_CREATE | IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                                     IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
  }

  // Any change in the directory: look again. A directory that was itself
  // moved or deleted loses its watch; the next look (or poll) sets a new one.
  void on_directory_events() {
    alignas(struct inotify_event) char buf[4096];
    ssize_t n;
    while ((n = ::read(inotify_.get(), buf, sizeof(buf))) > 0) {
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const struct inotify_event*>(buf + at);
        if ((event->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0 && event->wd == watch_) {
          ::inotify_rm_watch(inotify_.get(), watch_);
          watch_ = -1;
        }
        at += static_cast<ssize_t>(sizeof(struct inotify_event) + event->len);
      }
    }
    watch_directory();
    try_plan();
  }

  int on_poll() {
    if (state_ != State::kWaitRankTable) {
      return 0;
    }
    if (inotify_) {
      watch_directory();  // the directory may have appeared since
    }
    try_plan();
    poll_.set_deadline(Clock::now() + kRankTablePoll);
    return 0;
  }

  // Plans again when the table may have changed: a look at an unchanged file
  // (see FileWatch) costs a stat, not a read and a parse of up to 16 MiB.
  // What a look read and parsed is freed by the time it is done: its pages go
  // back to the system, so that waiting on (and then running from) a large
  // table leaves PID 1 at its usual size.
  void try_plan() {
    if (state_ != State::kWaitRankTable) {
      return;
    }
    if (!table_file_->changed(std::chrono::system_clock::now())) {
      log_debug("the rank table {} is as it was: not read again", table_path_);
      return;
    }
    log_debug("reading the rank table {}", table_path_);
    plan_from_table();
    table_file_->release();
    ::malloc_trim(0);
  }

  void plan_from_table() {
    auto plan = make_plan(input_);
    if (plan && plan->rank_table && plan->rank_table->ready) {
      plan_ = std::move(*plan);
      stop_waiting();
      status_.host = plan_.rank_table->pod_name.empty() ? plan_.rank_table->server_id : plan_.rank_table->pod_name;
      fire(Event::kDone, fmt::format("the rank table is complete: {} of {} ranks here", plan_.processes.size(),
                                     plan_.rank_table->rank_size));
      return;
    }
    if (plan) {
      note_pending(plan->rank_table ? plan->rank_table->pending : "no rank table");
      return;
    }
    // A table caught mid-write does not parse: not ready yet. One that parses
    // and is refused will not get better by waiting. Told apart by the plan
    // itself, from the bytes it was made from (make_plan: EBADMSG): a second
    // read could find the writer done, and call a torn table refused.
    if (plan.error().errnum == EBADMSG) {
      note_pending(fmt::format("it does not parse yet: {}", plan.error().message));
      return;
    }
    stop_waiting();
    fail(kConfig, plan.error().message);
  }

  // Says what the wait is for, once per change.
  void note_pending(std::string pending) {
    if (pending != pending_) {
      log_info("waiting for the rank table {}: {}", table_path_, pending);
      pending_ = std::move(pending);
    }
  }

  // Closing an inotify descriptor that held a watch waits for an RCU grace
  // period (5-30 ms measured here): the descriptor is kept, watch-less, until
  // trainit exits, so that the ranks start without that wait.
  void stop_waiting() {
    inotify_source_.reset();
    if (watch_ >= 0) {
      ::inotify_rm_watch(inotify_.get(), watch_);
      watch_ = -1;
    }
    poll_.reset();
  }

  // --- resolve_peers, host_barrier -----------------------------------------

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
    return secret;
  }

  [[nodiscard]] bool multi_host() const { return plan_.hosts && plan_.hosts->hosts > 1; }
  [[nodiscard]] unsigned host_index() const { return plan_.hosts ? plan_.hosts->index : 0; }

  void enter_resolve_peers() {
    if (!multi_host()) {
      fire(Event::kDone, "a single host has no peers");
      return;
    }
    resolver_ = std::make_unique<Resolver>(loop_, plan_.hosts->peers,
                                           [this](const std::vector<Resolved>& r) { on_peers_resolved(r); });
  }

  // `resolved` is the callback's own copy: the Resolver may go first.
  void on_peers_resolved(const std::vector<Resolved>& resolved) {
    resolver_.reset();
    peer_addrs_.clear();
    for (const Resolved& peer : resolved) {
      peer_addrs_.push_back(peer.addrs.front());
      log_info("host {} is {} ({})", peer_addrs_.size() - 1, peer.name, ipv4_string(peer.addrs.front()));
    }
    if (plan_.replan_with_addresses && !replan_with_addresses()) {
      return;
    }
    fire(Event::kDone, fmt::format("every peer name resolved ({} hosts)", resolved.size()));
  }

  void on_peer_timeout() {
    std::vector<std::string> missing = resolver_ ? resolver_->missing() : std::vector<std::string>{};
    for (const auto& probe : probes_) {
      if (!probe->succeeded()) {
        missing.push_back(fmt::format("sshd at {} ({})", probe->endpoint(), errno_string(-probe->last_error())));
      }
    }
    resolver_.reset();
    probes_.clear();
    if (!exit_code_) {
      exit_code_ = kUnavailable;
      status_.cause = fmt::format("{} within {:.0f} s: {}",
                                  state_ == State::kResolvePeers ? "peer names not resolved" : "peers not answering",
                                  seconds(options_.peer_timeout), fmt::join(missing, ", "));
      log_error("{}", status_.cause);
    }
    fire(Event::kTimedOut, "peers did not resolve in time");
  }

  void enter_host_barrier() {
    if (!multi_host()) {
      fire(Event::kDone, "a single host needs no barrier");
      return;
    }
    if (server_ || client_) {  // a restart: the channel is up, this generation's barrier is new
      server_ ? server_->check_in() : client_->check_in();
      return;
    }
    ControlConfig config;
    config.host_index = host_index();
    config.host_count = plan_.hosts->hosts;
    config.job_id = std::string(env_.get("MA_VJ_NAME").value_or(""));
    config.secret = secret_;
    config.peer_loss = options_.peer_loss;
    ControlEvents events;
    events.on_go = [this] {
      if (state_ == State::kHostBarrier) {
        fire(Event::kDone, "every host checked in");
      }
    };
    events.on_stop = [this](const StopNotice& notice) { on_remote_stop(notice); };
    events.on_release = [this](int code) { on_release(code); };
    events.on_lost = [this](unsigned host) {
      fail(kUnavailable,
           fmt::format("host {} lost: nothing heard from it for {:.1f} s", host, seconds(options_.peer_loss)));
    };
    events.on_checked_in = [](unsigned host) { log_info("host {} checked in", host); };
    events.on_restart = [this](unsigned generation, const StopNotice& notice) {
      on_remote_restart(generation, notice);
    };
    events.on_finished = [this](unsigned host) {
      log_info("host {}: every rank exited 0", host);
      maybe_release();
    };
    const uint16_t port = plan_.hosts->control_port;
    if (host_index() == 0) {
      // A platform that names only host 0 (Kubeflow): any address may
      // check in, and only a job secret tells a peer from a stranger.
      std::vector<in_addr> allowed =
          plan_.hosts->peers.size() == plan_.hosts->hosts ? peer_addrs_ : std::vector<in_addr>{};
      if (allowed.empty() && secret_.empty()) {
        log_warning(
            "the platform names only host 0: any address may join the control channel; set "
            "TRAINIT_JOB_SECRET to tell the job's hosts from strangers");
      }
      auto server = ControlServer::listen(loop_, port, std::move(allowed), config, std::move(events));
      if (!server) {
        fail(kOsError, fmt::format("control channel: {}", server.error().message));
        return;
      }
      server_ = std::move(*server);
      server_->check_in();
    } else {
      auto client = ControlClient::connect(loop_, peer_addrs_[0], port, config, std::move(events));
      if (!client) {
        fail(kOsError, fmt::format("control channel: {}", client.error().message));
        return;
      }
      client_ = std::move(*client);
      client_->check_in();
    }
  }

  // --- start_sshd, wait_peers (mpi) ----------------------------------------

  // trainit's private directory, sshd's configuration, missing host keys,
  // then sshd; up once its port takes a connection.
  void enter_start_sshd() {
    if (!plan_.sshd) {
      fire(Event::kDone, "no sshd in this plan");
      return;
    }
    if (auto r = make_private_dir(plan_.private_dir); !r) {
      fail(kCantCreate, r.error().message);
      return;
    }
    for (const auto& dir : plan_.dirs) {
      if (int r = make_dirs(dir); r < 0) {
        fail(kCantCreate, fmt::format("cannot create directory {}: {}", dir, errno_string(-r)));
        return;
      }
    }
    if (auto r = write_file_atomically(plan_.sshd->config_path, plan_.sshd->config, 0600); !r) {
      fail(kCantCreate, r.error().message);
      return;
    }
    // A host that spawns nothing (mpi: hosts 1..H-1) writes its plan's files
    // now, before it checks in: host 0's mpirun starts orteds here that open
    // them once the barrier is passed.
    const bool spawns = std::find(plan_.states.begin(), plan_.states.end(), State::kSpawn) != plan_.states.end();
    if (!spawns && !write_plan_files()) {
      return;
    }
    for (const auto& key : plan_.sshd->host_keys) {
      if (::access(key.c_str(), F_OK) == 0) {
        continue;
      }
      ProcessSpec keygen;
      keygen.name = "ssh-keygen";
      keygen.argv = host_key_generation_argv(key);
      keygen.env = child_base_env(env_);
      auto started = start_process(keygen);
      if (!started) {
        return;
      }
      keygens_.push_back(loop_.add_child(
          started->pid, [this, key](const siginfo_t& info) { return on_keygen_exit(key, info); }, "ssh-keygen"));
    }
    if (keygens_.empty()) {
      start_sshd();
    }
  }

  int on_keygen_exit(const std::string& key, const siginfo_t& info) {
    if (exit_code::of(info) != 0) {
      fail(kOsError, fmt::format("ssh-keygen could not make the host key {} (exit {})", key, exit_code::of(info)));
      return 0;
    }
    if (++keygens_done_ == keygens_.size() && state_ == State::kStartSshd) {
      start_sshd();
    }
    return 0;
  }

  // sshd is up when it says READY=1 on the NOTIFY_SOCKET trainit serves it
  // (Debian's does), or when its port takes a connection, whichever comes
  // first: not every sshd speaks sd_notify.
  void start_sshd() {
    ProcessSpec sshd = plan_.sshd->process;
    sshd_notify_ = std::make_unique<NotifyReceiver>();
    if (int r = sshd_notify_->open(); r == 0) {
      set_env(sshd.env, "NOTIFY_SOCKET", sshd_notify_->address());
    } else {
      log_debug("no NOTIFY_SOCKET for sshd ({}): its port tells when it is up", errno_string(-r));
      sshd_notify_.reset();
    }
    auto started = start_process(sshd);
    if (!started) {
      return;
    }
    sshd_pid_ = started->pid;
    if (sshd_notify_) {
      sshd_notify_->serve(sshd_pid_);
      sshd_notify_source_ = loop_.add_io(
          sshd_notify_->fd(), EPOLLIN,
          [this](uint32_t) {
            int r = sshd_notify_->drain([this](std::string_view key, std::string_view value) {
              if (key == "READY" && value == "1") {
                sshd_up("sshd said READY=1");
              }
            });
            return r < 0 ? r : 0;
          },
          "sshd's NOTIFY_SOCKET");
    }
    sshd_ = loop_.add_child(
        sshd_pid_,
        [this](const siginfo_t& info) {
          const int code = exit_code::of(info);
          if (state_ < State::kStopping) {
            fail(code == 0 ? 1 : code, fmt::format("sshd (pid {}) ended with {}", sshd_pid_, code));
          }
          check_all_gone();
          return 0;
        },
        "sshd");
    log_info("started sshd (pid {}) on port {}", sshd_pid_, plan_.sshd->port);
    in_addr local{};
    local.s_addr = htonl(INADDR_LOOPBACK);
    probes_.clear();
    probes_.push_back(std::make_unique<TcpProbe>(loop_, local, plan_.sshd->port, [this] {
      sshd_up(fmt::format("sshd takes connections on port {}", plan_.sshd->port));
    }));
  }

  void sshd_up(const std::string& why) {
    if (state_ != State::kStartSshd) {
      return;
    }
    // Called from inside the probe or the receiver: both are let be (the
    // probe is done; the receiver's source only stops listening).
    sshd_notify_source_.set_enabled(false);
    fire(Event::kDone, why);
  }

  // Host 0: every peer's sshd takes a connection.
  void enter_wait_peers() {
    probes_.clear();
    probes_up_ = 0;
    const uint16_t port = plan_.sshd ? plan_.sshd->port : 22;
    for (const in_addr& addr : peer_addrs_) {
      probes_.push_back(std::make_unique<TcpProbe>(loop_, addr, port, [this] {
        if (++probes_up_ == probes_.size() && state_ == State::kWaitPeers) {
          fire(Event::kDone, "every host's sshd takes connections");
        }
      }));
    }
    if (probes_.empty()) {
      fire(Event::kDone, "no peer to wait for");
    }
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
      exit_code_ = kTempFail;
      status_.cause = server_
                          ? fmt::format("hosts missing at the barrier after {:.0f} s: {}", seconds(barrier_timeout()),
                                        fmt::join(server_->missing(), ", "))
                          : fmt::format("host 0 did not open the barrier within {:.0f} s", seconds(barrier_timeout()));
      log_error("{}", status_.cause);
      tell_other_hosts(StopNotice{kTempFail, static_cast<int>(host_index()), -1, status_.cause});
    }
    fire(Event::kTimedOut, "the barrier did not open in time");
  }

  // Another host stopped the job: this one stops with its code and cause.
  void on_remote_stop(const StopNotice& notice) {
    if (!exit_code_) {
      exit_code_ = notice.exit_code;
      status_.cause = where(notice.host, notice.rank) + notice.cause;
      log_error("the job stops: {}", status_.cause);
    }
    fire(Event::kFailed, fmt::format("host {} stopped the job", notice.host));
  }

  // Host 0 released the job: it ended with `code` there.
  void on_release(int code) {
    if (code == 0) {
      fire(Event::kDone, "host 0: every host's ranks exited 0");
      return;
    }
    if (!exit_code_) {
      exit_code_ = code;
      status_.cause = fmt::format("host 0: the job ended with {}", code);
    }
    fire(Event::kFailed, status_.cause);
  }

  // Host 0: once its own ranks and every other host's exited 0, the job is
  // done everywhere.
  void maybe_release() {
    if (server_ && server_finished_ && server_->unfinished().empty() && state_ == State::kRunning) {
      server_->release(0);
      fire(Event::kDone, "every rank of every host exited 0");
    }
  }

  void tell_other_hosts(const StopNotice& notice) {
    if (server_) {
      (void)server_->stop(notice);
    } else if (client_) {
      (void)client_->stop(notice);
    }
  }

  // --- spawn, running ------------------------------------------------------

  void enter_spawn() {
    if (restart_pending_) {
      prepare_restart();
    }
    // A rank cannot start without its working directory; without a log
    // directory it can, on the console (the log relay reports the files).
    for (const auto& dir : plan_.dirs) {
      int r = make_dirs(dir);
      if (r >= 0) {
        continue;
      }
      if (is_working_dir(dir)) {
        fail(kCantCreate, fmt::format("cannot create directory {}: {}", dir, errno_string(-r)));
        return;
      }
      on_log_error(0, Error{fmt::format("cannot create log directory {}: {}", dir, errno_string(-r)), -r});
    }
    if (!write_plan_files()) {
      return;
    }
    plan_.rank_table.reset();
    ::malloc_trim(0);
    if (!make_coll_arena()) {
      return;
    }
    ranks_.reserve(plan_.processes.size());
    for (const auto& spec : plan_.processes) {
      if (!spawn_rank(spec)) {
        return;
      }
    }
    fire(Event::kDone, fmt::format("{} ranks started", ranks_.size()));
  }

  // Writes the plan's files. What was written (a copy of the rank table
  // among it, up to 16 MiB) is not needed again: PID 1 runs the job at its
  // usual size, whatever the table's. False after fail() said why.
  bool write_plan_files() {
    for (const auto& file : plan_.files) {
      if (auto r = write_file_atomically(file.path, file.content, file.mode); !r) {
        fail(kCantCreate, r.error().message);
        return false;
      }
    }
    plan_.files = {};
    return true;
  }

  // Whether `dir` is, or holds, some rank's working directory.
  bool is_working_dir(const std::string& dir) const {
    return std::any_of(plan_.processes.begin(), plan_.processes.end(), [&](const ProcessSpec& p) {
      return p.cwd == dir ||
             (p.cwd.size() > dir.size() && p.cwd.compare(0, dir.size(), dir) == 0 && p.cwd[dir.size()] == '/');
    });
  }

  bool spawn_rank(const ProcessSpec& spec) {
    auto started = start_process(spec);
    if (!started) {
      return false;
    }
    const size_t index = ranks_.size();
    Rank& rank = ranks_.emplace_back();
    rank.spec = &spec;
    rank.pid = started->pid;
    rank.log = started->log;
    rank.child = loop_.add_child(
        rank.pid, [this, index](const siginfo_t& info) { return on_rank_exit(index, info); }, spec.name);
    log_info("started {} (pid {})", spec.name, rank.pid);
    return true;  // the status file follows once all are started (spawn -> running)
  }

  struct Started {
    pid_t pid = 0;
    size_t log = LogRelay::kConsole;  // its index in the log relay, when it has one
  };

  // Starts `spec`, its output through the log relay when it asks for it.
  // nullopt after fail() said why.
  std::optional<Started> start_process(const ProcessSpec& spec) {
    std::vector<std::string> env;
    env.reserve(spec.env.size());
    for (const auto& var : spec.env) {
      env.push_back(var.name + "=" + var.value);
    }
    SpawnOptions o;
    if (arena_ && spec.rank) {
      env.push_back(fmt::format("TRAINIT_COLL_FD={}", arena_->fd()));
      env.push_back(fmt::format("TRAINIT_LOCAL_RANK={}", next_local_rank_++));
      env.push_back(fmt::format("TRAINIT_LOCAL_SIZE={}", arena_->ranks()));
      env.push_back(fmt::format("TRAINIT_COLL_ID={}", coll_id_));
      o.inherit_fd = arena_->fd();
    }
    o.argv = spec.argv;
    o.env = &env;
    o.cwd = spec.cwd;
    o.grouping = spec.group == GroupPolicy::kSession ? Grouping::kSession : Grouping::kProcessGroup;
    o.signals = &pid1_.parent_signals;
    Started started;
    Fd output;
    if (spec.output == OutputPolicy::kLogAndConsole) {
      auto pipe = relay_.add_rank(RankLog{spec.console_prefix, spec.log_file});
      if (!pipe) {
        fail(kOsError, fmt::format("{}: {}", spec.name, pipe.error().message));
        return std::nullopt;
      }
      started.log = relay_logs_++;
      output = std::move(*pipe);
      o.stdout_fd = output.get();
      o.stderr_fd = output.get();
    }
    auto spawned = spawn(o);
    if (!spawned) {
      fail(spawned.error().exit_code, fmt::format("{}: {}", spec.name, spawned.error().message));
      return std::nullopt;
    }
    started.pid = spawned->pid;
    return started;
  }

  // --- the collective arena (coll_arena.h) ---------------------------------

  // More than one local rank: the preflight, then a fresh arena for this
  // start of the job. False after fail() said why.
  bool make_coll_arena() {
    arena_.reset();
    next_local_rank_ = 0;
    const auto ranks = static_cast<unsigned>(
        std::count_if(plan_.processes.begin(), plan_.processes.end(), [](const ProcessSpec& p) { return p.rank; }));
    if (!options_.coll_arena || ranks < 2) {
      return true;
    }
    if (auto r = coll_preflight(ranks, kCollPreflightTimeout); !r) {
      fail(kOsError, r.error().message);
      return false;
    }
    uint64_t id = 0;
    if (::getrandom(&id, sizeof id, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof id)) {
      id = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    }
    auto arena = CollArena::create(ranks, *options_.coll_arena, id);
    if (!arena) {
      fail(kOsError, arena.error().message);
      return false;
    }
    coll_id_ = fmt::format("{:016x}", id);
    log_info("collective arena: {} local ranks, {:.1f} MiB, preflight passed", ranks,
             static_cast<double>(arena->bytes()) / (1 << 20));
    arena_ = std::move(*arena);
    return true;
  }

  // A rank's end, or the job's: every collective in flight returns
  // -ECONNABORTED instead of waiting for a peer that is gone.
  void abort_collectives(std::string_view why) {
    if (arena_ && !arena_->aborted()) {
      arena_->abort();
      log_debug("collective arena aborted: {}", why);
    }
  }

  // While the ranks run, their arena is checked (coll_arena.h): a rank that
  // broke it stops the job (76: every rank's collectives are in doubt). With
  // --hang-timeout, ranks in one collective for longer are reported (each
  // rank and call once), and with --hang-action stop the job stops.
  void check_arena() {
    if (!arena_ || state_ != State::kRunning) {
      return;
    }
    if (auto broken = arena_->corruption()) {
      fail(kProtocol, fmt::format("collective arena corrupted: {}", *broken));
      return;
    }
    if (options_.hang_timeout > Duration::zero()) {
      check_hangs();
    }
    if (state_ == State::kRunning) {
      arena_timer_.set_deadline(Clock::now() + arena_period());
    }
  }

  void check_hangs() {
    for (const CollArena::Hang& hang : arena_->hangs(options_.hang_timeout)) {
      const std::string what = fmt::format("local rank {} has been in {} for {:.1f} s (--hang-timeout {:.0f} s)",
                                           hang.rank, hang.call, seconds(hang.stuck), seconds(options_.hang_timeout));
      if (std::find(hangs_reported_.begin(), hangs_reported_.end(), hang.rank) == hangs_reported_.end()) {
        hangs_reported_.push_back(hang.rank);
        log_warning("collective hang: {}", what);
      }
      if (options_.hang_stop) {
        fail(kTempFail, fmt::format("collective hang: {}", what));
        return;
      }
    }
  }

  [[nodiscard]] Duration arena_period() const {
    return options_.hang_timeout > Duration::zero()
               ? std::min<Duration>(std::chrono::seconds(1), options_.hang_timeout / 4)
               : std::chrono::seconds(1);
  }

  void enter_running() {
    if (arena_) {
      hangs_reported_.clear();
      arena_timer_ = loop_.add_timer(
          Clock::now() + arena_period(),
          [this] {
            check_arena();
            return 0;
          },
          "collective arena check");
    }
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
    log_info("every rank of this host exited 0; waiting for the other hosts");
    if (client_) {
      client_->finish();
    } else if (server_) {
      server_finished_ = true;
      maybe_release();
    }
  }

  int on_rank_exit(size_t index, const siginfo_t& info) {
    Rank& rank = ranks_[index];
    rank.code = exit_code::of(info);
    if (rank.spec->rank) {
      abort_collectives(fmt::format("{} exited", rank.spec->name));
    }
    const bool stopped = state_ >= State::kStopping;  // trainit had begun to stop the job
    rank.state = stopped ? RankState::kStopped : rank.code == 0 ? RankState::kExited : RankState::kFailed;
    if (rank.log != LogRelay::kConsole) {
      relay_.drain(rank.log);  // all it wrote is in its pipe: on the console before the line about its end
    }
    const std::string what = info.si_code == CLD_EXITED ? fmt::format("exited with {}", info.si_status)
                                                        : fmt::format("was killed by {}", signal_name(info.si_status));
    write_status();
    if (rank.state == RankState::kFailed && state_ == State::kRunning && may_restart() &&
        restart_everywhere(rank, what)) {
      restart_pending_ = true;
      log_warning("{} (pid {}) {}; restarting the job (restart {} of {})", rank.spec->name, rank.pid, what,
                  restarts_ + 1,
                  *plan_.restarts == kUnlimitedRestarts ? std::string("unlimited") : std::to_string(*plan_.restarts));
      fire(Event::kRestart, fmt::format("{} {}", rank.spec->name, what));
    } else if (rank.state == RankState::kFailed && state_ == State::kRunning) {
      fail(rank.code, fmt::format("{} (pid {}) {}", rank.spec->name, rank.pid, what),
           rank.spec->rank ? static_cast<int>(*rank.spec->rank) : -1);
    } else {
      log_info("{} (pid {}) {}", rank.spec->name, rank.pid, what);
      bool all_exited = std::none_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running(); });
      if (all_exited && state_ == State::kRunning) {
        ranks_done();
      } else {
        fire(Event::kRankExited, fmt::format("{} {}", rank.spec->name, what));
      }
    }
    check_all_gone();
    return 0;
  }

  // --- stopping, reaping, exit ---------------------------------------------

  void enter_stopping() {
    notifier_.send("STOPPING=1");
    arena_timer_.reset();
    abort_collectives("the job is stopping");
    if (!loop_.has_children()) {
      fire(Event::kAllGone, "no process is left");
      return;
    }
    escalation_.start(SIGTERM);  // SIGKILL after the grace: TimedOut, to reaping
  }

  // The escalation sends SIGKILL, and again while anything is left.
  void enter_reaping() { check_all_gone(); }

  // Each live rank's group, newest first, then whatever else is ours, each
  // process once. A rank already reaped is not signalled by its old pid: its
  // group may be empty and the id someone else's; what is left of it is
  // found by the sweep.
  void signal_everything(int signo) {
    for (auto it = ranks_.rbegin(); it != ranks_.rend(); ++it) {
      if (it->child.signal_group(signo) == 0 && signo != SIGKILL) {
        (void)it->child.signal_group(SIGCONT);  // a stopped rank sees the stop now
      }
    }
    signal_all_except(pid1_.is_pid1, signo, 0, [this](pid_t pid) {
      pid_t group = ::getpgid(pid);
      return std::any_of(ranks_.begin(), ranks_.end(),
                         [group](const Rank& r) { return r.running() && r.pid == group; });
    });
  }

  void check_all_gone() {
    if ((state_ == State::kStopping || state_ == State::kReaping) && !loop_.has_children()) {
      escalation_.finish();
      if (state_ == State::kReaping && restart_pending_) {
        fire(Event::kRestart, "no process is left: the job starts again");
      } else {
        fire(Event::kAllGone, "no process is left");
      }
    }
  }

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
    const StopNotice notice{rank.code, static_cast<int>(host_index()),
                            rank.spec->rank ? static_cast<int>(*rank.spec->rank) : -1,
                            fmt::format("{} {}", rank.spec->name, what)};
    const unsigned generation = server_ ? server_->restart(notice) : client_ ? client_->restart(notice) : 0;
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
    server_finished_ = false;
    ranks_.clear();
    for (ProcessSpec& spec : plan_.processes) {
      for (EnvVar& var : spec.env) {
        if (var.name == "TORCHELASTIC_RESTART_COUNT") {
          var.value = std::to_string(restarts_);
        }
      }
    }
  }

  void enter_exit() {
    if (server_) {
      (void)server_->flush(kControlFlush);
    } else if (client_) {
      (void)client_->flush(kControlFlush);
    }
    relay_.finish();
    relay_.flush_console(std::chrono::milliseconds(1000));
    if (uint64_t dropped = relay_.console_dropped(); dropped > 0) {
      log_warning("{} bytes of rank output were not shown on the console (it was not read fast enough)", dropped);
    }
    status_.exit_code = exit_code();
    write_status();
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
      if (!exit_code_) {
        exit_code_ = kSignalBase + signo;
        const std::string why = fmt::format("trainit got {}", signal_name(signo));
        status_.cause = where(static_cast<int>(host_index()), -1) + why;
        tell_other_hosts(StopNotice{*exit_code_, static_cast<int>(host_index()), -1, why});
      }
      fire(Event::kTerm, fmt::format("got {}", signal_name(signo)));
      return 0;
    }
    for (Rank& rank : ranks_) {  // other signals: to every live rank's session
      (void)rank.child.signal_group(signo);
    }
    return 0;
  }

  void write_status() {
    status_.state = std::string(state_name(state_));
    status_.reason = reason_;
    status_.ranks.clear();
    for (const Rank& r : ranks_) {
      StatusRank s;
      s.name = r.spec->name;
      s.rank = r.spec->rank;
      s.pid = r.pid;
      s.state = r.state;
      s.code = r.code;
      status_.ranks.push_back(std::move(s));
    }
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
  std::optional<FileWatch> table_file_;  // wait_rank_table: the table, and what planning reads through
  PlanInput input_;
  Plan plan_;
  Notifier notifier_;
  LogRelay relay_;
  Escalation escalation_;
  StatusFile status_;
  SourceHandle signals_, deadline_, inotify_source_, poll_;
  Fd inotify_;
  std::string table_path_;
  int watch_ = -1;  // the directory's inotify watch
  std::string pending_ = "not looked at yet";
  std::vector<Rank> ranks_;
  State state_ = State::kWaitRankTable;
  Clock::time_point entered_;
  std::string reason_;
  std::deque<std::pair<Event, std::string>> events_;
  bool in_transition_ = false;
  bool started_ = false;
  std::optional<int> exit_code_;
  bool status_error_reported_ = false;
  std::vector<int> log_errors_;  // the errnos of log-file failures reported
  // Several hosts: the peers' names resolved, then the control channel.
  std::unique_ptr<Resolver> resolver_;
  std::vector<in_addr> peer_addrs_;        // host i's address
  std::unique_ptr<ControlServer> server_;  // host 0
  std::unique_ptr<ControlClient> client_;  // hosts 1..H-1
  bool server_finished_ = false;           // host 0's own ranks all exited 0
  std::string secret_;                     // the hosts' shared secret; empty: none
  size_t relay_logs_ = 0;                  // processes given to the log relay so far
  unsigned restarts_ = 0;                  // times the job was started again (Plan::restarts)
  std::optional<CollArena> arena_;         // this start's collective arena (more than one local rank)
  unsigned next_local_rank_ = 0;           // TRAINIT_LOCAL_RANK of the next rank spawned
  std::string coll_id_;                    // TRAINIT_COLL_ID
  std::vector<unsigned> hangs_reported_;
  SourceHandle arena_timer_;
  bool restart_pending_ = false;  // the ranks are being stopped to start again
  // mpi: sshd, the host keys made for it, the probes of sshd ports.
  std::vector<SourceHandle> keygens_;
  size_t keygens_done_ = 0;
  SourceHandle sshd_;
  pid_t sshd_pid_ = 0;
  std::unique_ptr<NotifyReceiver> sshd_notify_;  // sshd's NOTIFY_SOCKET, until it is up
  SourceHandle sshd_notify_source_;
  std::vector<std::unique_ptr<TcpProbe>> probes_;
  size_t probes_up_ = 0;
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
