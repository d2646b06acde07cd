// The collective arena's preflight and how the arena's pages are backed: the
// preflight's helpers pass for every rank count, leave no process behind
// when not waited for, and its arena commits nothing up front; a job's
// arena commits every page before a rank starts.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <optional>

#include "job/coll_arena.h"
#include "loop/loop.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;

// Whether this process has a child left, exited or not.
bool has_children() {
  siginfo_t info{};
  return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

// Bytes of the file's pages that exist now.
size_t allocated(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return static_cast<size_t>(st.st_blocks) * 512;
}

TEST(CollPreflight, PassesForTwoToEightLocalRanksAndReapsEveryHelper) {
  for (unsigned ranks : {2u, 3u, 8u}) {
    auto r = coll_preflight(ranks, 10s);
    EXPECT_TRUE(r) << ranks << " ranks: " << r.error().message;
    EXPECT_FALSE(has_children()) << ranks << " ranks";
  }
}

TEST(CollPreflight, OneDroppedBeforeItsEndKillsItsHelpersAndTheLoopReapsThem) {
  Loop loop;
  ASSERT_EQ(loop.init(), 0);
  bool called = false;
  {
    auto preflight = CollPreflight::start(loop, 4, 10s, [&called](Result<void>) { called = true; });
    ASSERT_TRUE(preflight) << preflight.error().message;
    EXPECT_TRUE(has_children());
  }
  const auto deadline = Clock::now() + 10s;
  while (loop.has_children() && Clock::now() < deadline) {
    ASSERT_GE(loop.run_once(100), 0);
  }
  EXPECT_FALSE(has_children());
  EXPECT_FALSE(called) << "a preflight dropped says nothing";
}

// Nothing waits: the helpers' ends and the deadline are the loop's sources,
// and a timer of someone else's fires while the helpers run.
TEST(CollPreflight, ItsHelpersAreSourcesOfTheLoopWhichRunsOtherSourcesMeanwhile) {
  Loop loop;
  ASSERT_EQ(loop.init(), 0);
  std::optional<Result<void>> outcome;
  bool other = false;
  SourceHandle timer = loop.add_timer(
      Clock::now(),
      [&other] {
        other = true;
        return 0;
      },
      "someone else's timer");
  auto preflight = CollPreflight::start(loop, 3, 10s, [&outcome](Result<void> r) { outcome = std::move(r); });
  ASSERT_TRUE(preflight) << preflight.error().message;
  const auto deadline = Clock::now() + 10s;
  while (!outcome && Clock::now() < deadline) {
    ASSERT_GE(loop.run_once(100), 0);
  }
  ASSERT_TRUE(outcome.has_value()) << "no outcome within 10 s";
  EXPECT_TRUE(*outcome) << outcome->error().message;
  EXPECT_TRUE(other);
  EXPECT_FALSE(has_children());
}

TEST(CollPreflight, ItsArenaCommitsNoPageUpFrontAJobsCommitsEvery) {
  auto on_touch = CollArena::create(8, 0, 1, CollArena::Pages::kOnTouch);
  ASSERT_TRUE(on_touch) << on_touch.error().message;
  // Formatting wrote the header's page and the slots': a few pages of 16 MiB.
  EXPECT_LT(allocated(on_touch->fd()), on_touch->bytes() / 16);

  auto committed = CollArena::create(8, size_t{1} << 20, 2);
  ASSERT_TRUE(committed) << committed.error().message;
  EXPECT_GE(allocated(committed->fd()), committed->bytes());
}

}  // namespace
}  // namespace trainit
