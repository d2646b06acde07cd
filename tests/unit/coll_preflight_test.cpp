// The collective arena's preflight and how the arena's pages are backed: the
// preflight's helpers pass for every rank count, leave no process behind
// when not waited for, and its arena commits nothing up front; a job's
// arena commits every page before a rank starts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "job/coll_arena.h"
#include "job/memory_headroom.h"
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

// A petabyte's heap: more than any machine's memory, refused before the
// commit. The child's file-size limit is the net: a commit that did start
// fails at once with EFBIG there, instead of calling in the OOM killer.
TEST(CollArena, AHeapLargerThanTheMemoryLeftIsRefusedBeforeAnyPageIsCommitted) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{size_t{1} << 30, size_t{1} << 30};
    (void)::setrlimit(RLIMIT_FSIZE, &limit);
    auto arena = CollArena::create(2, size_t{1} << 50, 1);
    const std::string message = arena ? "(created)" : arena.error().message;
    const int errnum = arena ? 0 : arena.error().errnum;
    (void)!::write(pipe_fds[1], message.data(), message.size());
    ::_exit(errnum == ENOMEM ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) {
    message.append(buf, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << message;
  EXPECT_TRUE(message.starts_with("collective arena: cannot commit 10737418")) << message;
  EXPECT_NE(message.find(" leaves only "), std::string::npos) << message;
  EXPECT_NE(message.find("lower --coll-arena"), std::string::npos) << message;
}

TEST(CollArena, MoreLocalRanksThanOneArenaServesAreRefusedNamingTheLimit) {
  auto arena = CollArena::create(1025, size_t{1} << 20, 1);
  ASSERT_FALSE(arena);
  EXPECT_EQ(arena.error().message,
            "collective arena: 1025 local ranks, where one arena serves at most 1024 (--coll-arena off runs the job "
            "without one)");
}

TEST(MemoryHeadroom, IsTheHostsAvailableMemoryAndSwapOrTheCgroupsRoomWhicheverIsLess) {
  const std::string meminfo =
      "MemTotal:       24684084 kB\nMemFree:   100 kB\nMemAvailable:    1000 kB\nSwapTotal: 0 kB\n"
      "SwapFree:         24 kB\n";
  auto host = memory_headroom(meminfo, std::nullopt);
  ASSERT_TRUE(host);
  EXPECT_EQ(host->bytes, 1024U * 1024);
  EXPECT_EQ(host->what, "the host's MemAvailable + SwapFree");
  // 100 KiB of 600 KiB used, 40 KiB of it inactive page cache: 540 KiB left.
  auto cg = memory_headroom(meminfo, CgroupMemory{600 << 10, 100 << 10, 40 << 10});
  ASSERT_TRUE(cg);
  EXPECT_EQ(cg->bytes, 540U << 10);
  EXPECT_TRUE(cg->what.starts_with("the memory cgroup's limit")) << cg->what;
  // A cgroup over its limit leaves nothing; a roomier one leaves the host's.
  EXPECT_EQ(memory_headroom(meminfo, CgroupMemory{100, 200, 0})->bytes, 0U);
  EXPECT_EQ(memory_headroom(meminfo, CgroupMemory{1ULL << 40, 0, 0})->bytes, 1024U * 1024);
  EXPECT_FALSE(memory_headroom("MemTotal: 5 kB\n", std::nullopt));
  EXPECT_FALSE(memory_headroom("MemAvailable: lots\n", std::nullopt));
  EXPECT_EQ(memory_headroom("MemAvailableX: 7 kB\nMemAvailable: 3 kB\n", std::nullopt)->bytes, 3072U);
}

TEST(MemoryHeadroom, ACgroupLimitIsReadFromV2AndV1FilesAndUnlimitedIsNone) {
  auto v2 = cgroup_memory("1048576\n", "4096\n", "anon 1\ninactive_file 1024\nactive_file 5\n", false);
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->limit, 1048576U);
  EXPECT_EQ(v2->usage, 4096U);
  EXPECT_EQ(v2->inactive_file, 1024U);
  EXPECT_FALSE(cgroup_memory("max\n", "4096\n", "", false));
  auto v1 = cgroup_memory("2097152\n", "8192\n", "inactive_file 1\ntotal_inactive_file 2048\n", true);
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->inactive_file, 2048U);
  EXPECT_FALSE(cgroup_memory("9223372036854771712\n", "8192\n", "", true));
  EXPECT_FALSE(cgroup_memory("", "", "", false));
}

}  // namespace
}  // namespace trainit
