#include "job/rank_table_wait.h"

#include <fmt/core.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/log.h"

namespace trainit {

RankTableWait::RankTableWait(Loop& loop, PlanInput& input, Events events, Duration poll, Duration timeout,
                             Duration report_every)
    : loop_(loop),
      input_(input),
      events_(std::move(events)),
      poll_period_(poll),
      timeout_(timeout),
      report_every_(report_every) {}

void RankTableWait::start() {
  auto location = input_.env.rank_table_location(*input_.fs);
  if (!location) {
    events_.on_refused(location.error());
    return;
  }
  waiting_ = true;
  path_ = location->path;
  table_.emplace(path_);
  input_.fs = &table_->file_system();
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
      Clock::now() + poll_period_, [this] { return on_poll(); }, "rank table poll");
  report_.emplace(
      loop_, "the rank table " + path_, timeout_, [this] { return pending_; }, report_every_);
  look();
}

// Closing an inotify descriptor that held a watch waits for an RCU grace
// period (5-30 ms measured here): the descriptor is kept, watch-less, until
// trainit exits, so that the ranks start without that wait.
void RankTableWait::stop() {
  waiting_ = false;
  report_.reset();
  inotify_source_.reset();
  if (watch_ >= 0) {
    ::inotify_rm_watch(inotify_.get(), watch_);
    watch_ = -1;
  }
  poll_.reset();
}

void RankTableWait::watch_directory() {
  if (watch_ >= 0) {
    return;
  }
  std::string dir = path_.substr(0, path_.rfind('/'));
  watch_ = ::inotify_add_watch(inotify_.get(), dir.empty() ? "/" : dir.c_str(),
                               IN_CREATE | IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                                   IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
}

// Any change in the directory: look again. A directory that was itself
// moved or deleted loses its watch; the next look (or poll) sets a new one.
void RankTableWait::on_directory_events() {
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
  look();
}

int RankTableWait::on_poll() {
  if (!waiting_) {
    return 0;
  }
  if (inotify_) {
    watch_directory();  // the directory may have appeared since
  }
  look();
  poll_.set_deadline(Clock::now() + poll_period_);
  return 0;
}

// Plans again when the table may have changed: a look at an unchanged file
// (see FileWatch) costs a stat, not a read and a parse of up to 16 MiB.
// What a look read and parsed is freed by the time it is done: its pages go
// back to the system, so that waiting on (and then running from) a large
// table leaves PID 1 at its usual size.
void RankTableWait::look() {
  if (!waiting_) {
    return;
  }
  if (!table_->changed(std::chrono::system_clock::now())) {
    log_debug("the rank table {} is as it was: not read again", path_);
    return;
  }
  log_debug("reading the rank table {}", path_);
  plan_from_table();
  table_->release();
  ::malloc_trim(0);
}

void RankTableWait::plan_from_table() {
  auto plan = make_plan(input_);
  if (plan && plan->rank_table && plan->rank_table->ready) {
    stop();
    events_.on_ready(std::move(*plan));
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
  stop();
  events_.on_refused(plan.error());
}

// Says what the wait is for, once per change.
void RankTableWait::note_pending(std::string pending) {
  if (pending != pending_) {
    log_info("waiting for the rank table {}: {}", path_, pending);
    pending_ = std::move(pending);
  }
}

std::string RankTableWait::timeout_cause() const {
  return fmt::format("the rank table {} was not complete within {:.0f} s; last seen: {}", path_, seconds(timeout_),
                     pending_);
}

}  // namespace trainit
