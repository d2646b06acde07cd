// A console nobody reads, as PID 1: stdout and stderr share one pipe whose
// reader never reads (`2>&1 | sleep 30`, `docker run -t` under a stalled log
// collector). trainit's own lines and the ranks' output go through one
// bounded, never-blocking path: the job still answers SIGTERM, signals,
// reaps and drains its ranks, and the SIGKILL after the grace still comes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include "job_support.h"

namespace trainit::test {
namespace {

using job::Job;
using job::template1;
using job::write_file;

// One pipe for trainit's stdout and stderr; its read end is held open and
// never read, so the pipe fills and stays full.
class StalledConsole {
 public:
  StalledConsole() { ok_ = ::pipe2(fds_, O_CLOEXEC) == 0; }
  ~StalledConsole() {
    for (int fd : fds_) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }
  StalledConsole(const StalledConsole&) = delete;
  StalledConsole& operator=(const StalledConsole&) = delete;

  [[nodiscard]] bool ok() const { return ok_; }
  // Whether the pipe holds all it can: its write end is not writable.
  [[nodiscard]] bool full() const {
    struct pollfd p = {fds_[1], POLLOUT, 0};
    return ::poll(&p, 1, 0) == 0;
  }
  // `spec` with its stdout and stderr on the pipe.
  [[nodiscard]] Spec attach(Spec spec) const {
    spec.fds.emplace_back(fds_[1], STDOUT_FILENO);
    spec.fds.emplace_back(fds_[1], STDERR_FILENO);
    return spec;
  }

 private:
  int fds_[2] = {-1, -1};
  bool ok_ = false;
};

TEST(StalledConsole, JobOfFourChattyRanksStillStopsOnSigtermWithCompleteLogs) {
  TRAINIT_REQUIRE_ROOT();
  constexpr size_t kBytes = 230'000;  // per rank: together far more than a pipe holds
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 4)));
  StalledConsole console;
  ASSERT_TRUE(console.ok());
  Trainit t(console.attach(
      job.spec({"--grace", "5"}, {"on-term", "exit", "lines", std::to_string(kBytes), "record", "pause"})));
  TRAINIT_ASSERT_STARTED(t);
  // Every rank wrote all of its lines (its record comes after them).
  ASSERT_TRUE(job::wait_until([&] { return job.starts().size() == 4; }, 20s)) << "the ranks did not all write";
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(5s), Exit::code(143)) << "trainit did not stop with its console full";
  for (unsigned rank = 0; rank < 4; ++rank) {
    std::string got = job::slurp(job.log_file(rank));
    std::string want = job::lines_stream(kBytes, rank);
    EXPECT_TRUE(got == want) << "rank " << rank << ": " << job::compare_bytes(got, want);
    EXPECT_TRUE(job.term(rank).has_value()) << "rank " << rank << " got no SIGTERM";
  }
}

TEST(StalledConsole, ExecModeStillSendsTheSigkillAfterTheGrace) {
  TRAINIT_REQUIRE_ROOT();
  StalledConsole console;
  ASSERT_TRUE(console.ok());
  // The child ignores SIGTERM and fills the console; trainit's warning that
  // SIGKILL follows is then written to a full pipe.
  Spec spec;
  spec.args = {"--grace", "0.3", "--", "/bin/sh", "-c", "trap '' TERM; exec yes trainit-console-filler"};
  Trainit t(console.attach(spec));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(job::wait_until([&] { return !children_of(t.pid()).empty(); })) << "no child";
  ASSERT_TRUE(job::wait_until([&] { return console.full(); })) << "the child did not fill the console";
  const auto sent = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(5s), Exit::code(137)) << "the SIGKILL did not come";
  EXPECT_LT(Clock::now() - sent, 2s) << "trainit took " << job::ms(Clock::now() - sent) << " ms";
}

}  // namespace
}  // namespace trainit::test
