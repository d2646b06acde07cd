#include "job/ranks.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "base/exit_code.h"
#include "base/log.h"
#include "exec/privileges.h"
#include "proc/signals.h"
#include "proc/spawn.h"
#include "proc/tree.h"

namespace trainit {

Result<Started> Launcher::start(const ProcessSpec& spec, const ArenaSeat* seat, As as) {
  std::vector<std::string> env;
  env.reserve(spec.env.size() + 4);
  for (const auto& var : spec.env) {
    env.push_back(var.name + "=" + var.value);
  }
  SpawnOptions o;
  if (as == As::kJob && pid1_.privileges != nullptr) {
    pid1_.privileges->set_identity(env);
    o.credentials = pid1_.privileges->credentials();
  }
  std::vector<int> inherited;
  if (seat) {
    env.push_back(fmt::format("TRAINIT_COLL_FD={}", seat->fd));
    env.push_back(fmt::format("TRAINIT_LOCAL_RANK={}", seat->local_rank));
    env.push_back(fmt::format("TRAINIT_LOCAL_SIZE={}", seat->local_size));
    env.push_back(fmt::format("TRAINIT_COLL_ID={}", seat->id));
    inherited.push_back(seat->fd);
    if (!seat->peer_socks.empty()) {
      std::string fds;
      for (const Fd& sock : seat->peer_socks) {
        fds += fds.empty() ? "" : ",";
        fds += sock ? std::to_string(sock.get()) : "-";
        if (sock) {
          inherited.push_back(sock.get());
        }
      }
      env.push_back("TRAINIT_COLL_PEER_FDS=" + fds);
    }
    o.inherit_fds = inherited;
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
      return Error{fmt::format("{}: {}", spec.name, pipe.error().message), pipe.error().errnum, exit_code::kOsError};
    }
    started.log = relay_logs_++;
    output = std::move(*pipe);
    o.stdout_fd = output.get();
    o.stderr_fd = output.get();
  }
  auto spawned = spawn(o);
  if (!spawned) {
    return Error{fmt::format("{}: {}", spec.name, spawned.error().message), spawned.error().errnum,
                 spawned.error().exit_code};
  }
  started.pid = spawned->pid;
  return started;
}

Result<void> RankSet::spawn(const ProcessSpec& spec, const ArenaSeat* seat) {
  auto started = launcher_.start(spec, seat);
  if (!started) {
    return started.error();
  }
  const size_t index = ranks_.size();
  Rank& rank = ranks_.emplace_back();
  rank.spec = &spec;
  rank.pid = started->pid;
  rank.log = started->log;
  rank.child = loop_.add_child(
      rank.pid, [this, index](const siginfo_t& info) { return on_child_exit(index, info); }, spec.name);
  log_info("started {} (pid {})", spec.name, rank.pid);
  return {};
}

int RankSet::on_child_exit(size_t index, const siginfo_t& info) {
  Rank& rank = ranks_[index];
  rank.code = exit_code::of(info);
  rank.state = stopping_ ? RankState::kStopped : rank.code == 0 ? RankState::kExited : RankState::kFailed;
  if (rank.log != LogRelay::kConsole) {
    relay_.drain(rank.log);  // all it wrote is in its pipe: on the console before the line about its end
  }
  const std::string what = info.si_code == CLD_EXITED ? fmt::format("exited with {}", info.si_status)
                                                      : fmt::format("was killed by {}", signal_name(info.si_status));
  on_exit_(rank, what);
  return 0;
}

bool RankSet::any_running() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running(); });
}

void RankSet::signal_everything(const Pid1& pid1, int signo) {
  for (auto it = ranks_.rbegin(); it != ranks_.rend(); ++it) {
    if (it->child.signal_group(signo) == 0 && signo != SIGKILL) {
      (void)it->child.signal_group(SIGCONT);  // a stopped rank sees the stop now
    }
  }
  signal_all_except(pid1.is_pid1, signo, 0, [this](pid_t pid) {
    pid_t group = ::getpgid(pid);
    return std::any_of(ranks_.begin(), ranks_.end(), [group](const Rank& r) { return r.running() && r.pid == group; });
  });
}

void RankSet::signal_groups(int signo) {
  for (Rank& rank : ranks_) {
    (void)rank.child.signal_group(signo);
  }
}

std::vector<StatusRank> RankSet::status() const {
  std::vector<StatusRank> out;
  out.reserve(ranks_.size());
  for (const Rank& r : ranks_) {
    StatusRank s;
    s.name = r.spec->name;
    s.rank = r.spec->rank;
    s.pid = r.pid;
    s.state = r.state;
    s.code = r.code;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace trainit
