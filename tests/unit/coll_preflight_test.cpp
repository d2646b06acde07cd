// The collective arena's preflight and how the arena's pages are backed: the
// preflight's helpers pass for every rank count, leave no process behind
// when not waited for, and its arena commits nothing up front; a job's
// arena commits every page before a rank starts.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>

#include "coll_arena.h"

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

TEST(CollPreflight, OneDroppedWithoutWaitingKillsAndReapsItsHelpers) {
  {
    auto preflight = CollPreflight::start(4);
    ASSERT_TRUE(preflight) << preflight.error().message;
    EXPECT_TRUE(has_children());
  }
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
