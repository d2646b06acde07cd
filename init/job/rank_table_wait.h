// wait_rank_table: the Ascend job's rank table, until the platform says it is
// complete.
//
// The table's directory is watched (inotify), with a slow poll beside it:
// inotify can stay silent (NFS, some FUSE and overlay set-ups). The table is
// read again only when it may have changed (os/fs.h, FileWatch), and
// planned from each time. One that does not parse yet was caught mid-write;
// one that parses and is refused will not get better by waiting. While it
// waits, it says so every 30 s (wait_report.h): the table's path, what the
// last look found missing, how long so far and the timeout.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/fd.h"
#include "base/result.h"
#include "base/time.h"
#include "job/wait_report.h"
#include "loop/loop.h"
#include "os/fs.h"
#include "plan/plan.h"

namespace trainit {

class RankTableWait {
 public:
  static constexpr Duration kPoll = std::chrono::seconds(2);

  struct Events {
    std::function<void(Plan)> on_ready;     // complete: its plan
    std::function<void(Error)> on_refused;  // no table to wait for, or one refused
  };

  // Plans from `input` (which must outlive this; its file system is pointed
  // at the table as last read). `timeout`: the runner's deadline, for the
  // reports (zero: none to tell); `report_every`: their period.
  RankTableWait(Loop& loop, PlanInput& input, Events events, Duration poll = kPoll, Duration timeout = {},
                Duration report_every = WaitReport::kPeriod);
  RankTableWait(const RankTableWait&) = delete;
  RankTableWait& operator=(const RankTableWait&) = delete;
  ~RankTableWait() = default;

  // Starts waiting, and takes a first look: either event may come before it
  // returns. After an event nothing more is watched.
  void start();
  // Stops watching (the deadline passed, or the job stops).
  void stop();

  // What the last look found missing, in words.
  [[nodiscard]] const std::string& pending() const { return pending_; }
  // Why the table is not there at the deadline, in one line.
  [[nodiscard]] std::string timeout_cause() const;

 private:
  void watch_directory();
  void on_directory_events();
  int on_poll();
  void look();
  void plan_from_table();
  void note_pending(std::string pending);

  Loop& loop_;
  PlanInput& input_;
  Events events_;
  Duration poll_period_;
  Duration timeout_;
  Duration report_every_;
  bool waiting_ = false;
  std::string path_;
  std::optional<FileWatch> table_;  // what planning reads through, to the end
  Fd inotify_;
  int watch_ = -1;  // the directory's inotify watch
  SourceHandle inotify_source_, poll_;
  std::string pending_ = "not looked at yet";
  std::optional<WaitReport> report_;
};

}  // namespace trainit
