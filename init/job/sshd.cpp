#include "job/sshd.h"

#include <fmt/core.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/exit_code.h"
#include "base/log.h"
#include "base/safe_fs.h"
#include "os/fs.h"
#include "plan/mpi.h"

namespace trainit {

Result<void> make_private_dir(const std::string& path) {
  if (path.empty()) {
    return {};
  }
  auto dir = safe_fs::make_dirs(path, 0700);
  if (!dir) {
    return Error{fmt::format("cannot create trainit's directory {}: {}", path, dir.error().message),
                 dir.error().errnum};
  }
  struct stat st {};
  if (::fstat(dir->get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 0022) != 0) {
    return Error{fmt::format("trainit's directory {} must be a directory of uid {}, not a symlink, writable only by it",
                             path, ::geteuid()),
                 EPERM};
  }
  // One that was there already (trainit's, refused above otherwise) is made
  // its alone, as a new one is.
  if ((st.st_mode & 07777) != 0700 && ::fchmod(dir->get(), 0700) != 0) {
    return Error{fmt::format("cannot make trainit's directory {} its own (0700): {}", path, errno_string(errno)),
                 errno};
  }
  return {};
}

Result<void> SshdPhase::prepare(const SshdPlan& sshd, const std::string& private_dir,
                                const std::vector<std::string>& dirs) {
  if (auto r = make_private_dir(private_dir); !r) {
    return Error{r.error().message, r.error().errnum, exit_code::kCantCreate};
  }
  for (const auto& dir : dirs) {
    if (auto r = safe_fs::make_dirs(dir); !r) {
      return Error{fmt::format("cannot create directory {}: {}", dir, r.error().message), r.error().errnum,
                   exit_code::kCantCreate};
    }
  }
  if (auto r = write_file_atomically(sshd.config_path, sshd.config, 0600); !r) {
    return Error{r.error().message, r.error().errnum, exit_code::kCantCreate};
  }
  return {};
}

void SshdPhase::enter(const Plan& plan, const Environment& env) {
  if (!plan.sshd) {
    events_.on_up("no sshd in this plan");
    return;
  }
  if (auto r = prepare(*plan.sshd, plan.private_dir, plan.dirs); !r) {
    events_.on_failed(r.error().exit_code, r.error().message);
    return;
  }
  if (events_.before_start && !events_.before_start()) {
    return;
  }
  start(*plan.sshd, env);
}

void SshdPhase::start(const SshdPlan& sshd, const Environment& env) {
  plan_ = &sshd;
  for (const auto& key : sshd.host_keys) {
    if (::access(key.c_str(), F_OK) == 0) {
      continue;
    }
    ProcessSpec keygen;
    keygen.name = "ssh-keygen";
    keygen.argv = host_key_generation_argv(key);
    keygen.env = child_base_env(env);
    auto started = launcher_.start(keygen, nullptr, Launcher::As::kTrainit);
    if (!started) {
      events_.on_failed(started.error().exit_code, started.error().message);
      return;
    }
    keygens_.push_back(loop_.add_child(
        started->pid, [this, key](const siginfo_t& info) { return on_keygen_exit(key, info); }, "ssh-keygen"));
  }
  if (keygens_.empty()) {
    start_sshd();
  }
}

int SshdPhase::on_keygen_exit(const std::string& key, const siginfo_t& info) {
  if (exit_code::of(info) != 0) {
    events_.on_failed(exit_code::kOsError,
                      fmt::format("ssh-keygen could not make the host key {} (exit {})", key, exit_code::of(info)));
    return 0;
  }
  if (++keygens_done_ == keygens_.size() && starting_) {
    start_sshd();
  }
  return 0;
}

void SshdPhase::start_sshd() {
  ProcessSpec sshd = plan_->process;
  notify_ = std::make_unique<NotifyReceiver>();
  if (int r = notify_->open(); r == 0) {
    set_env(sshd.env, "NOTIFY_SOCKET", notify_->address());
  } else {
    log_debug("no NOTIFY_SOCKET for sshd ({}): its port tells when it is up", errno_string(-r));
    notify_.reset();
  }
  auto started = launcher_.start(sshd, nullptr, Launcher::As::kTrainit);
  if (!started) {
    events_.on_failed(started.error().exit_code, started.error().message);
    return;
  }
  pid_ = started->pid;
  if (notify_) {
    notify_->serve(pid_);
    notify_source_ = loop_.add_io(
        notify_->fd(), EPOLLIN,
        [this](uint32_t) {
          int r = notify_->drain([this](std::string_view key, std::string_view value) {
            if (key == "READY" && value == "1") {
              up("sshd said READY=1");
            }
          });
          return r < 0 ? r : 0;
        },
        "sshd's NOTIFY_SOCKET");
  }
  child_ = loop_.add_child(
      pid_,
      [this](const siginfo_t& info) {
        events_.on_exit(exit_code::of(info));
        return 0;
      },
      "sshd");
  log_info("started sshd (pid {}) on port {}", pid_, plan_->port);
  in_addr local{};
  local.s_addr = htonl(INADDR_LOOPBACK);
  probe_ = std::make_unique<TcpProbe>(loop_, local, plan_->port,
                                      [this] { up(fmt::format("sshd takes connections on port {}", plan_->port)); });
}

// Called from inside the probe or the receiver: both are let be (the probe
// is done; the receiver's source only stops listening).
void SshdPhase::up(const std::string& why) {
  if (up_) {
    return;
  }
  up_ = true;
  notify_source_.set_enabled(false);
  events_.on_up(why);
}

PeerSshds::PeerSshds(Loop& loop, const std::vector<in_addr>& peers, uint16_t port, const std::function<void()>& done) {
  probes_.reserve(peers.size());
  for (const in_addr& addr : peers) {
    probes_.push_back(std::make_unique<TcpProbe>(loop, addr, port, [this, done] {
      if (++up_ == probes_.size()) {
        done();
      }
    }));
  }
}

std::vector<std::string> PeerSshds::unanswered() const {
  std::vector<std::string> out;
  for (const auto& probe : probes_) {
    if (!probe->succeeded()) {
      out.push_back(fmt::format("sshd at {} ({})", probe->endpoint(), errno_string(-probe->last_error())));
    }
  }
  return out;
}

}  // namespace trainit
