#include "job/arena_watch.h"

#include <fmt/core.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/exit_code.h"
#include "base/log.h"
#include "coll/comm.h"

namespace trainit {

void ArenaWatch::create(unsigned local_ranks, ReadyFn ready) {
  if (prepared_for_ != local_ranks) {
    make(local_ranks);
  }
  prepared_for_.reset();
  next_local_rank_ = 0;
  if (outcome_) {
    auto outcome = std::move(*outcome_);
    outcome_.reset();
    ready(std::move(outcome));
  } else {
    ready_ = std::move(ready);
  }
}

void ArenaWatch::prepare(unsigned local_ranks) {
  make(local_ranks);
  prepared_for_ = local_ranks;
}

void ArenaWatch::cancel() {
  preflight_.reset();
  commit_.reset();
  preflight_result_.reset();
  made_.reset();
  outcome_.reset();
  ready_ = nullptr;
  prepared_for_.reset();
}

void ArenaWatch::make(unsigned local_ranks) {
  cancel();
  arena_.reset();
  next_local_rank_ = 0;
  if (!settings_.heap || local_ranks < 2) {
    outcome_ = Result<void>{};
    return;
  }
  // The preflight's helpers run on the other cores while this one commits
  // the job's arena (zeroing its pages: most of the start's time).
  auto preflight =
      CollPreflight::start(loop_, local_ranks, preflight_timeout_, [this](const Result<void>& r) { on_preflight(r); });
  if (!preflight) {
    outcome_ = Error{preflight.error().message, preflight.error().errnum, exit_code::kOsError};
    return;
  }
  preflight_ = std::move(*preflight);
  uint64_t id = 0;
  if (::getrandom(&id, sizeof id, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof id)) {
    id = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  }
  id_ = fmt::format("{:016x}", id);
  made_ = CollArena::create(local_ranks, *settings_.heap, id, CollArena::Pages::kInSteps);
  // The sockets, while the preflight's helpers may still run.
  make_peer_sockets(local_ranks);
  if (*made_) {
    commit_ = loop_.add_defer([this] { return commit_step(); }, "collective arena commit");
  }
}

// One step of the commit, between two turns of the loop: a stop or a
// signal meanwhile is taken within a step's time (a few milliseconds).
int ArenaWatch::commit_step() {
  auto done = (*made_)->commit_step(kCommitStep);
  if (!done) {
    made_ = done.error();
  }
  if (!done || *done) {
    commit_.reset();
    if (preflight_result_) {
      finish_make();
    }
  }
  return 0;
}

void ArenaWatch::on_preflight(const Result<void>& preflight) {
  preflight_result_ = preflight;
  if (!commit_) {
    finish_make();
  }
}

void ArenaWatch::finish_make() {
  const Result<void> preflight = std::move(*preflight_result_);
  preflight_result_.reset();
  Result<CollArena> made = std::move(*made_);
  made_.reset();
  if (!preflight) {
    outcome_ = Error{preflight.error().message, preflight.error().errnum, exit_code::kOsError};
  } else if (!made) {
    outcome_ = Error{made.error().message, made.error().errnum, exit_code::kOsError};
  } else {
    log_info("collective arena: {} local ranks, {:.1f} MiB, preflight passed", made->ranks(),
             static_cast<double>(made->bytes()) / (1 << 20));
    arena_ = std::move(*made);
    outcome_ = Result<void>{};
  }
  if (ready_) {
    ReadyFn ready = std::move(ready_);
    ready_ = nullptr;
    auto outcome = std::move(*outcome_);
    outcome_.reset();
    ready(std::move(outcome));
  }
}

void ArenaWatch::make_peer_sockets(unsigned local_ranks) {
  peer_socks_.clear();
  // Only device communicators need the sockets: without them (descriptors
  // ran out) the job runs, and a rank's device init says what is missing.
  if (local_ranks <= coll::kMaxPeerSockRanks) {
    auto mesh = peer_socket_mesh(local_ranks);
    if (mesh) {
      peer_socks_ = std::move(*mesh);
    } else {
      log_warning("{}: the ranks get no TRAINIT_COLL_PEER_FDS (device communicators will fail)", mesh.error().message);
    }
  }
}

std::optional<ArenaSeat> ArenaWatch::next_seat() {
  if (!arena_) {
    return std::nullopt;
  }
  const unsigned rank = next_local_rank_++;
  ArenaSeat seat{arena_->fd(), rank, arena_->ranks(), id_, {}};
  if (peer_socks_.size() == size_t{arena_->ranks()} * arena_->ranks() && rank < arena_->ranks()) {
    for (unsigned p = 0; p < arena_->ranks(); ++p) {
      seat.peer_socks.push_back(std::move(peer_socks_[size_t{rank} * arena_->ranks() + p]));
    }
  }
  return seat;
}

Result<std::vector<Fd>> peer_socket_mesh(unsigned ranks) {
  std::vector<Fd> mesh(size_t{ranks} * ranks);
  for (unsigned i = 0; i < ranks; ++i) {
    for (unsigned j = i + 1; j < ranks; ++j) {
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        return Error{fmt::format("cannot make the sockets between {} local ranks: {}", ranks, std::strerror(errno)),
                     errno, exit_code::kOsError};
      }
      mesh[size_t{i} * ranks + j] = Fd(pair[0]);
      mesh[size_t{j} * ranks + i] = Fd(pair[1]);
    }
  }
  return mesh;
}

void ArenaWatch::abort(std::string_view why) {
  if (arena_ && !arena_->aborted()) {
    arena_->abort();
    log_debug("collective arena aborted: {}", why);
  }
}

void ArenaWatch::watch() {
  if (!arena_) {
    return;
  }
  hangs_reported_.clear();
  timer_ = loop_.add_timer(
      Clock::now() + period(),
      [this] {
        if (check()) {
          timer_.set_deadline(Clock::now() + period());
        }
        return 0;
      },
      "collective arena check");
}

bool ArenaWatch::check() {
  if (!arena_) {
    return true;
  }
  if (auto broken = arena_->corruption()) {
    on_failure_(exit_code::kProtocol, fmt::format("collective arena corrupted: {}", *broken));
    return false;
  }
  return settings_.hang_timeout <= Duration::zero() || check_hangs();
}

bool ArenaWatch::check_hangs() {
  for (const CollArena::Hang& hang : arena_->hangs(settings_.hang_timeout)) {
    const std::string what = fmt::format("local rank {} has been in {} for {:.1f} s (--hang-timeout {:.0f} s)",
                                         hang.rank, hang.call, seconds(hang.stuck), seconds(settings_.hang_timeout));
    if (std::find(hangs_reported_.begin(), hangs_reported_.end(), hang.rank) == hangs_reported_.end()) {
      hangs_reported_.push_back(hang.rank);
      log_warning("collective hang: {}", what);
    }
    if (settings_.hang_stop) {
      on_failure_(exit_code::kTempFail, fmt::format("collective hang: {}", what));
      return false;
    }
  }
  return true;
}

Duration ArenaWatch::period() const {
  return settings_.hang_timeout > Duration::zero()
             ? std::min<Duration>(std::chrono::seconds(1), settings_.hang_timeout / 4)
             : std::chrono::seconds(1);
}

}  // namespace trainit
