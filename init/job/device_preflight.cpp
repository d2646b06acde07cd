#include "job/device_preflight.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <memory>
#include <utility>

#include "base/exit_code.h"
#include "base/fd.h"
#include "base/log.h"
#include "coll/device_check.h"
#include "exec/privileges.h"
#include "os/text.h"
#include "proc/signals.h"
#include "proc/spawn.h"

namespace trainit {

// --- the plan's side --------------------------------------------------------------

namespace {

const char* env_of(const ProcessSpec& spec, std::string_view name) {
  for (const EnvVar& var : spec.env) {
    if (var.name == name) {
      return var.value.c_str();
    }
  }
  return nullptr;
}

}  // namespace

std::string device_of(const ProcessSpec& rank) {
  return std::to_string(coll::device_number(env_of(rank, "TRAINIT_COLL_DEVICE"), env_of(rank, "DEVICE_ID"),
                                            env_of(rank, "CUDA_VISIBLE_DEVICES"),
                                            env_of(rank, "ASCEND_VISIBLE_DEVICES"), env_of(rank, "LOCAL_RANK")));
}

std::string preflight_backend(const Environment& env, Mode mode) {
  if (auto backend = env.get("TRAINIT_COLL_BACKEND")) {
    return std::string(*backend);
  }
  const bool ascend = mode == Mode::kAscend || mode == Mode::kMsrun || mode == Mode::kMsrunExec ||
                      env.get("ASCEND_VISIBLE_DEVICES").has_value();
  return ascend ? "ascend" : "cuda";
}

Result<std::string> find_device_check(const std::string& given, const std::string& self, const std::string& installed) {
  if (!given.empty()) {
    if (::access(given.c_str(), X_OK) != 0) {
      return Error{fmt::format("device preflight: --device-check {}: {}", given, errno_string(errno)), errno,
                   exit_code::kConfig};
    }
    return given;
  }
  std::vector<std::string> tried;
  const auto slash = self.rfind('/');
  if (slash != std::string::npos) {
    tried.push_back(self.substr(0, slash + 1) + "trainit-device-check");
  }
  if (!installed.empty()) {
    tried.push_back(installed);
  }
  for (const std::string& path : tried) {
    if (::access(path.c_str(), X_OK) == 0) {
      return path;
    }
  }
  return Error{fmt::format("device preflight: no trainit-device-check at {} (install it there, or name it with "
                           "--device-check)",
                           fmt::join(tried, " or ")),
               ENOENT, exit_code::kConfig};
}

Result<std::string> find_device_check(const std::string& given) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return find_device_check(given, n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(),
                           TRAINIT_DEVICE_CHECK_INSTALLED);
}

// --- the run -------------------------------------------------------------------------

namespace {

// How long a check killed with SIGKILL may take to be reaped before the
// preflight ends without it (a process in the driver's uninterruptible
// sleep dies only when the driver lets it): the stop that follows sweeps it.
constexpr Duration kKillGrace = std::chrono::seconds(1);

// At most this much of a pipe is read per wake-up: a check that never stops
// writing must not keep the loop from its timers and signals.
constexpr int kReadsPerWake = 16;

// A meeting name no other preflight on this host shares (every trainit in
// a container is PID 1: its pid says nothing).
std::string meeting_name() {
  uint64_t id = 0;
  if (::getrandom(&id, sizeof id, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof id)) {
    id = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^ static_cast<uint64_t>(::getpid());
  }
  return fmt::format("trainit-dc-{:016x}", id);
}

}  // namespace

// One check under way.
struct DevicePreflight::Check {
  const ProcessSpec* rank = nullptr;
  pid_t pid = -1;
  Fd out, err;             // read ends: its stdout (steps) and stderr (reason)
  SourceHandle out_watch;  // while its pipe is open
  SourceHandle err_watch;
  SourceHandle child;  // until it is reaped
  StepLog steps;
  ReasonLog reason;
  bool killed = false;    // SIGKILL sent
  bool hung = false;      // killed at the bound, still running
  bool reported = false;  // its end is in ends_
  bool ended = false;     // reaped (or given up on after kKillGrace)
};

DevicePreflight::DevicePreflight(Loop& loop, const Pid1& pid1, DevicePreflightSettings settings, DoneFn done)
    : loop_(loop), pid1_(pid1), settings_(std::move(settings)), done_(std::move(done)) {}

DevicePreflight::~DevicePreflight() {
  for (auto& c : checks_) {
    kill(*c);
  }
}

Result<void> DevicePreflight::start(const std::vector<const ProcessSpec*>& ranks) {
  started_ = Clock::now();
  const std::string name = meeting_name();
  // Each check may wait half the bound for the others: those of working
  // devices give up (exit 2) while a hung one is still in its step.
  const std::string wait = fmt::format("{:.3f}", seconds(settings_.bound) / 2);
  checks_.reserve(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::vector<std::string> argv = {settings_.check,   name, std::to_string(i), std::to_string(ranks.size()),
                                     settings_.backend, wait};
    if (auto r = start_one(*ranks[i], std::move(argv)); !r) {
      return r;  // those started are killed with this object
    }
  }
  bound_ = loop_.add_timer(
      started_ + settings_.bound,
      [this] {
        for (auto& c : checks_) {
          if (!c->ended && !c->killed) {
            c->hung = true;
            kill(*c);
          }
        }
        give_up_ = loop_.add_timer(
            Clock::now() + kKillGrace,
            [this] {
              for (auto& c : checks_) {
                if (!c->ended) {  // still unreaped after SIGKILL: the job's stop sweeps it
                  c->ended = true;
                  c->child.reset();
                  if (c->hung) {
                    report(*c, W_EXITCODE(0, SIGKILL));
                  }
                }
              }
              finish_if_done();
              return 0;
            },
            "device preflight: the killed checks' ends");
        finish_if_done();
        return 0;
      },
      "device preflight bound");
  return {};
}

Result<void> DevicePreflight::start_one(const ProcessSpec& rank, std::vector<std::string> argv) {
  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return Error{fmt::format("device preflight: pipe: {}", errno_string(errno)), errno, exit_code::kOsError};
  }
  auto check = std::make_unique<Check>();
  Check& c = *check;
  c.rank = &rank;
  c.out = Fd(out[0]);
  Fd out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    return Error{fmt::format("device preflight: pipe: {}", errno_string(errno)), errno, exit_code::kOsError};
  }
  c.err = Fd(err[0]);
  Fd err_w(err[1]);
  std::vector<std::string> env;
  env.reserve(rank.env.size() + 4);
  for (const EnvVar& var : rank.env) {
    env.push_back(var.name + "=" + var.value);
  }
  SpawnOptions o;
  if (pid1_.privileges != nullptr) {
    pid1_.privileges->set_identity(env);
    o.credentials = pid1_.privileges->credentials();
  }
  o.argv = std::move(argv);
  o.env = &env;
  o.cwd = rank.cwd;
  o.grouping = Grouping::kProcessGroup;
  o.signals = &pid1_.parent_signals;
  o.stdout_fd = out_w.get();
  o.stderr_fd = err_w.get();
  auto spawned = spawn(o);
  if (!spawned) {
    return Error{fmt::format("device preflight: cannot start {} for device {}: {}", settings_.check, device_of(rank),
                             spawned.error().message),
                 spawned.error().errnum, exit_code::kOsError};
  }
  c.pid = spawned->pid;
  for (const Fd* fd : {&c.out, &c.err}) {
    (void)::fcntl(fd->get(), F_SETFL, O_NONBLOCK);  // ours only: the check's ends block as pipes do
  }
  checks_.push_back(std::move(check));
  const std::string device = device_of(rank);
  c.child = loop_.add_child(
      c.pid,
      [this, &c](const siginfo_t& info) {
        on_end(c, info.si_code == CLD_EXITED ? W_EXITCODE(info.si_status, 0) : W_EXITCODE(0, info.si_status));
        return 0;
      },
      "device check " + device);
  c.out_watch = loop_.add_io(
      c.out.get(), EPOLLIN,
      [this, &c](uint32_t) {
        read_pipe(c.out, c.out_watch, [&c](std::string_view b) { c.steps.feed(b); });
        if (c.steps.broken() && !c.killed) {
          // What is no step ends it now, as broken: its own failure.
          kill(c);
          report(c, W_EXITCODE(0, SIGKILL));
          stop_others();
        }
        return 0;
      },
      "device check " + device + " stdout");
  c.err_watch = loop_.add_io(
      c.err.get(), EPOLLIN,
      [this, &c](uint32_t) {
        read_pipe(c.err, c.err_watch, [&c](std::string_view b) { c.reason.feed(b); });
        return 0;
      },
      "device check " + device + " stderr");
  return {};
}

template <typename Feed>
void DevicePreflight::read_pipe(Fd& fd, SourceHandle& watch, Feed feed) {
  char buf[4096];
  for (int reads = 0; fd && reads < kReadsPerWake; ++reads) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n == 0 || errno != EAGAIN) {
      watch.reset();
      fd.reset();
    }
    return;
  }
}

CheckEnd DevicePreflight::end_of(const Check& c, int status) const {
  CheckEnd e;
  e.device = device_of(*c.rank);
  e.step = std::string(c.steps.step_name());
  e.reason = c.reason.reason();
  if (c.steps.broken()) {
    e.how = CheckEnd::How::kBroken;
    e.reason = *c.steps.broken();
  } else if (WIFSIGNALED(status)) {
    e.how = CheckEnd::How::kKilled;
    e.status = WTERMSIG(status);
  } else if (WEXITSTATUS(status) == coll::kDeviceCheckPassed && c.steps.step() + 1 == coll::kDeviceCheckStepCount) {
    e.how = CheckEnd::How::kPassed;
  } else if (WEXITSTATUS(status) == coll::kDeviceCheckPassed) {
    e.how = CheckEnd::How::kBroken;
    e.reason = "exited with 0 before its last step";
  } else {
    e.how = WEXITSTATUS(status) == coll::kDeviceCheckPeer ? CheckEnd::How::kPeer : CheckEnd::How::kFailed;
    e.status = WEXITSTATUS(status);
  }
  return e;
}

void DevicePreflight::on_end(Check& c, int status) {
  c.ended = true;
  c.child.reset();
  // What it wrote before its end is all in its pipes (or in those of what it
  // forked, which are not waited for).
  read_pipe(c.out, c.out_watch, [&c](std::string_view b) { c.steps.feed(b); });
  read_pipe(c.err, c.err_watch, [&c](std::string_view b) { c.reason.feed(b); });
  c.out_watch.reset();
  c.err_watch.reset();
  c.out.reset();
  c.err.reset();
  if (!c.killed) {
    report(c, status);
    if (own_failure(ends_.back().how)) {
      stop_others();
    }
  } else if (c.hung) {
    report(c, status);
  }  // else stopped for another's failure: it says nothing of its own device
  finish_if_done();
}

void DevicePreflight::report(Check& c, int status) {
  if (c.reported) {
    return;
  }
  c.reported = true;
  CheckEnd e = end_of(c, status);
  if (c.hung && e.how != CheckEnd::How::kBroken) {
    e.how = CheckEnd::How::kHung;
  }
  ends_.push_back(std::move(e));
}

void DevicePreflight::kill(Check& c) noexcept {
  if (c.ended || c.killed) {
    return;
  }
  c.killed = true;
  // Its group, and the check itself by its pidfd: one that left its group
  // is still reached. The loop reaps it.
  (void)c.child.signal_group(SIGKILL);
  (void)c.child.send_signal(SIGKILL);
}

// A device's own failure: the others are stopped, and say nothing of theirs.
void DevicePreflight::stop_others() {
  for (auto& c : checks_) {
    kill(*c);
  }
}

void DevicePreflight::finish_if_done() {
  if (finished_ || !std::all_of(checks_.begin(), checks_.end(), [](const auto& c) { return c->ended; })) {
    return;
  }
  finished_ = true;
  bound_.reset();
  give_up_.reset();
  Result<void> result;
  if (auto failure = preflight_failure(ends_, settings_.bound)) {
    result = Error{*failure, 0, exit_code::kDeviceFailed};
  } else {
    log_info("device preflight: {} passed on backend {} in {:.3f} s", count_of(checks_.size(), "device"),
             settings_.backend, seconds(Clock::now() - started_));
  }
  // The last thing it does: the caller may destroy it from `done`.
  DoneFn done = std::move(done_);
  done(std::move(result));
}

}  // namespace trainit
