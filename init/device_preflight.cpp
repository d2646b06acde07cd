#include "device_preflight.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
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
#include "platform/text.h"
#include "privileges.h"
#include "proc/signals.h"
#include "proc/spawn.h"

namespace trainit {

// --- StepLog, ReasonLog -------------------------------------------------------

std::string_view StepLog::step_name() const {
  return step_ < 0 ? std::string_view("start") : std::string_view(coll::kDeviceCheckSteps[step_]);
}

void StepLog::feed(std::string_view bytes) {
  if (broken_) {
    return;
  }
  bytes_ += bytes.size();
  if (bytes_ > kMaxBytes) {
    broken_ = fmt::format("wrote more than {} bytes to stdout, where only its steps belong", kMaxBytes);
    return;
  }
  for (char c : bytes) {
    if (c == '\n') {
      line(partial_);
      partial_.clear();
      if (broken_) {
        return;
      }
    } else {
      partial_ += c;
    }
  }
}

void StepLog::line(std::string_view text) {
  const int step = coll::device_check_step(text.data(), text.size());
  if (step < 0) {
    broken_ = fmt::format("wrote {} to stdout, which is no step of the check", quote_for_message(text, 40));
  } else if (step != step_ + 1) {
    broken_ = fmt::format("announced step {} after {}", coll::kDeviceCheckSteps[step], step_name());
  } else {
    step_ = step;
  }
}

void ReasonLog::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n') {
      if (!partial_.empty()) {
        last_ = std::move(partial_);
      }
      partial_.clear();
    } else if (partial_.size() < kMaxLine) {
      partial_ += c;
    }
  }
}

std::string ReasonLog::reason() const {
  return one_line(partial_.empty() ? last_ : partial_);
}

// --- the failure line -----------------------------------------------------------

namespace {

bool own_failure(CheckEnd::How how) {
  return how == CheckEnd::How::kFailed || how == CheckEnd::How::kKilled || how == CheckEnd::How::kBroken;
}

// The reason without the "STEP: " the check puts first: the line names the
// step PID 1 saw, not one the check claims.
std::string_view without_step(std::string_view reason, std::string_view step) {
  if (reason.size() > step.size() + 1 && reason.substr(0, step.size()) == step && reason[step.size()] == ':') {
    reason.remove_prefix(step.size() + 1);
    while (!reason.empty() && reason.front() == ' ') {
      reason.remove_prefix(1);
    }
  }
  return reason;
}

std::string describe(const CheckEnd& end, Duration bound) {
  const std::string_view why = without_step(end.reason, end.step);
  switch (end.how) {
    case CheckEnd::How::kHung:
      return fmt::format("device {}: hung in step {} after {:.1f} s", end.device, end.step, seconds(bound));
    case CheckEnd::How::kKilled:
      return fmt::format("device {}: {}: killed by {}", end.device, end.step, signal_name(end.status));
    case CheckEnd::How::kBroken:
      return fmt::format("device {}: {}: {}", end.device, end.step, end.reason);
    case CheckEnd::How::kFailed:
    case CheckEnd::How::kPeer:
      return why.empty() ? fmt::format("device {}: {}: exited with {}", end.device, end.step, end.status)
                         : fmt::format("device {}: {}: {}", end.device, end.step, why);
    case CheckEnd::How::kPassed:
      break;
  }
  return fmt::format("device {}: passed", end.device);
}

}  // namespace

std::optional<std::string> preflight_failure(const std::vector<CheckEnd>& ends, Duration bound) {
  const CheckEnd* first = nullptr;
  std::vector<std::string> others;
  for (const CheckEnd& e : ends) {
    if (!own_failure(e.how)) {
      continue;
    }
    if (first == nullptr) {
      first = &e;
    } else {
      others.push_back(e.device);
    }
  }
  for (CheckEnd::How next : {CheckEnd::How::kHung, CheckEnd::How::kPeer}) {
    for (const CheckEnd& e : ends) {
      if (first == nullptr && e.how == next) {
        first = &e;
      }
    }
  }
  if (first == nullptr) {
    return std::nullopt;
  }
  std::string line = "device preflight failed: " + describe(*first, bound);
  if (!others.empty()) {
    line += fmt::format(" (failed too: {} {})", others.size() == 1 ? "device" : "devices", fmt::join(others, ", "));
  }
  return line;
}

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

// How often the checks' ends are looked for while their pipes are quiet.
constexpr int kTickMs = 10;

// One check under way.
struct Check {
  const ProcessSpec* rank = nullptr;
  pid_t pid = -1;
  Fd out, err;  // read ends: its stdout (steps) and stderr (reason)
  StepLog steps;
  ReasonLog reason;
  bool ended = false;
};

// Reads what is there now (non-blocking); closes the pipe at its end.
template <typename Feed>
void drain(Fd& fd, Feed feed) {
  char buf[4096];
  // At most 64 KiB a call: a check that never stops writing must not keep
  // PID 1 here past the bound (the poll loop checks it between calls).
  for (int reads = 0; fd && reads < 16; ++reads) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n == 0 || errno != EAGAIN) {
      fd.reset();
    }
    return;
  }
}

void drain(Check& c) {
  drain(c.out, [&c](std::string_view b) { c.steps.feed(b); });
  drain(c.err, [&c](std::string_view b) { c.reason.feed(b); });
}

// A meeting name no other preflight on this host shares (every trainit in
// a container is PID 1: its pid says nothing).
std::string meeting_name() {
  uint64_t id = 0;
  if (::getrandom(&id, sizeof id, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof id)) {
    id = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^ static_cast<uint64_t>(::getpid());
  }
  return fmt::format("trainit-dc-{:016x}", id);
}

CheckEnd end_of(const Check& c, int status) {
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

class Preflight {
 public:
  Preflight(const DevicePreflightSettings& settings, const Pid1& pid1) : settings_(settings), pid1_(pid1) {}
  Preflight(const Preflight&) = delete;
  Preflight& operator=(const Preflight&) = delete;
  // Whatever is still running is killed and reaped: nothing outlives it.
  ~Preflight() { kill_running(); }

  Result<void> start(const std::vector<const ProcessSpec*>& ranks) {
    const std::string name = meeting_name();
    // Each check may wait half the bound for the others: those of working
    // devices give up (exit 2) while a hung one is still in its step.
    const std::string wait = fmt::format("{:.3f}", seconds(settings_.bound) / 2);
    checks_.reserve(ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i) {
      std::vector<std::string> argv = {settings_.check,   name, std::to_string(i), std::to_string(ranks.size()),
                                       settings_.backend, wait};
      if (auto r = start_one(*ranks[i], std::move(argv)); !r) {
        return r;
      }
    }
    return {};
  }

  // The checks' ends, within the bound; the first device's own failure ends
  // the wait at once.
  std::vector<CheckEnd> wait() {
    const auto deadline = started_ + settings_.bound;
    std::vector<CheckEnd> ends;
    size_t left = checks_.size();
    while (left > 0 && Clock::now() < deadline) {
      poll_pipes(deadline);
      for (Check& c : checks_) {
        int status = 0;
        if (c.ended || ::waitpid(c.pid, &status, WNOHANG) != c.pid) {
          // A check that writes what is no step is ended now, as broken.
          if (!c.ended && c.steps.broken()) {
            ends.push_back(kill_one(c));
            --left;
          }
          continue;
        }
        c.ended = true;
        --left;
        drain(c);
        ends.push_back(end_of(c, status));
      }
      if (std::any_of(ends.begin(), ends.end(), [](const CheckEnd& e) { return own_failure(e.how); })) {
        break;
      }
    }
    // Past the bound, those still running hung; before it, they are stopped
    // for another's failure and say nothing of their own device.
    const bool past_bound = Clock::now() >= deadline;
    for (Check& c : checks_) {
      if (c.ended) {
        continue;
      }
      CheckEnd e = kill_one(c);
      if (e.how == CheckEnd::How::kBroken || past_bound) {
        e.how = e.how == CheckEnd::How::kBroken ? e.how : CheckEnd::How::kHung;
        ends.push_back(std::move(e));
      }
    }
    return ends;
  }

 private:
  Result<void> start_one(const ProcessSpec& rank, std::vector<std::string> argv) {
    int out[2];
    int err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      return Error{fmt::format("device preflight: pipe: {}", errno_string(errno)), errno, exit_code::kOsError};
    }
    Check& c = checks_.emplace_back();
    c.rank = &rank;
    c.out = Fd(out[0]);
    Fd out_w(out[1]);
    if (::pipe2(err, O_CLOEXEC) != 0) {
      checks_.pop_back();
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
    if (checks_.size() == 1) {
      started_ = Clock::now();
    }
    auto spawned = spawn(o);
    if (!spawned) {
      checks_.pop_back();
      return Error{fmt::format("device preflight: cannot start {} for device {}: {}", settings_.check, device_of(rank),
                               spawned.error().message),
                   spawned.error().errnum, exit_code::kOsError};
    }
    c.pid = spawned->pid;
    for (const Fd* fd : {&c.out, &c.err}) {
      (void)::fcntl(fd->get(), F_SETFL, O_NONBLOCK);
    }
    return {};
  }

  // Waits up to a tick (never past the deadline) for output, and reads it.
  void poll_pipes(Clock::time_point deadline) {
    std::vector<pollfd> fds;
    for (const Check& c : checks_) {
      for (const Fd* fd : {&c.out, &c.err}) {
        if (*fd) {
          fds.push_back(pollfd{fd->get(), POLLIN, 0});
        }
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const int timeout = static_cast<int>(std::clamp<long long>(left, 0, kTickMs));
    if (fds.empty()) {
      ::usleep(static_cast<useconds_t>(timeout) * 1000);
      return;
    }
    if (::poll(fds.data(), fds.size(), timeout) > 0) {
      for (Check& c : checks_) {
        drain(c);
      }
    }
  }

  // SIGKILL to the check's group, then its end, reaped.
  CheckEnd kill_one(Check& c) {
    ::kill(-c.pid, SIGKILL);
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    c.ended = true;
    drain(c);
    return end_of(c, status);
  }

  void kill_running() noexcept {
    for (Check& c : checks_) {
      if (!c.ended && c.pid > 0) {
        ::kill(-c.pid, SIGKILL);
        while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        c.ended = true;
      }
    }
  }

  const DevicePreflightSettings& settings_;
  const Pid1& pid1_;
  std::vector<Check> checks_;
  Clock::time_point started_ = Clock::now();
};

}  // namespace

Result<void> run_device_preflight(const std::vector<const ProcessSpec*>& ranks, const DevicePreflightSettings& settings,
                                  const Pid1& pid1) {
  const auto started = Clock::now();
  Preflight preflight(settings, pid1);
  if (auto r = preflight.start(ranks); !r) {
    return r;
  }
  const std::vector<CheckEnd> ends = preflight.wait();
  if (auto failure = preflight_failure(ends, settings.bound)) {
    return Error{*failure, 0, exit_code::kDeviceFailed};
  }
  log_info("device preflight: {} passed on backend {} in {:.3f} s", count_of(ranks.size(), "device"), settings.backend,
           seconds(Clock::now() - started));
  return {};
}

}  // namespace trainit
