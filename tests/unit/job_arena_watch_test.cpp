// The collective arena from the job's side: an arena only where two or more
// local ranks share it, one seat each, and a watch that stops the job with
// 76 once a rank overwrote what it may not.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "base/exit_code.h"
#include "coll/arena.h"
#include "job/arena_watch.h"
#include "net_support.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using test::step_until;

// This process's open descriptors.
size_t open_descriptors() {
  size_t count = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (::readdir(dir) != nullptr) {
      ++count;
    }
    ::closedir(dir);
  }
  return count;
}

// The machine's shared memory in use (/proc/meminfo's Shmem), in bytes.
size_t shmem_in_use() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "Shmem:") {
      return kib << 10;
    }
    meminfo.ignore(64, '\n');
  }
  return 0;
}

class JobArenaWatch : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(loop_.init(), 0); }

  ArenaWatch& watch(ArenaSettings settings = small()) {
    watch_.emplace(loop_, settings, PreflightSettings{}.timeout, [this](int code, std::string message) {
      code_ = code;
      message_ = std::move(message);
    });
    return *watch_;
  }

  // create(), its outcome once the loop gave it (the preflight runs from it).
  Result<void> create(ArenaWatch& watch, unsigned ranks) {
    std::optional<Result<void>> outcome;
    watch.create(ranks, [&outcome](Result<void> r) { outcome = std::move(r); });
    const auto deadline = Clock::now() + 10s;
    while (!outcome && Clock::now() < deadline) {
      EXPECT_GE(loop_.run_once(100), 0);
    }
    return outcome ? std::move(*outcome) : Result<void>(Error{"no outcome within 10 s", ETIMEDOUT});
  }

  static ArenaSettings small() {
    ArenaSettings settings;
    settings.heap = size_t{1} << 20;
    return settings;
  }

  Loop loop_;
  std::optional<ArenaWatch> watch_;
  std::optional<int> code_;
  std::string message_;
};

TEST_F(JobArenaWatch, OneLocalRankOrTheArenaOffMakesNoArena) {
  ASSERT_TRUE(create(watch(), 1).ok());
  EXPECT_FALSE(watch_->exists());
  EXPECT_FALSE(watch_->next_seat());
  ArenaSettings off = small();
  off.heap.reset();
  ASSERT_TRUE(create(watch(off), 4).ok());
  EXPECT_FALSE(watch_->exists());
}

TEST_F(JobArenaWatch, EveryLocalRankGetsItsOwnSeatInOneArena) {
  ASSERT_TRUE(create(watch(), 2).ok());
  auto first = watch_->next_seat();
  auto second = watch_->next_seat();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->local_rank, 0U);
  EXPECT_EQ(second->local_rank, 1U);
  EXPECT_EQ(first->local_size, 2U);
  EXPECT_EQ(first->fd, second->fd);
  EXPECT_EQ(first->id, second->id);
  EXPECT_EQ(first->id.size(), 16U);
  EXPECT_TRUE(watch_->check()) << message_;
  EXPECT_FALSE(code_);
}

TEST_F(JobArenaWatch, AFreshStartMakesAFreshArena) {
  ASSERT_TRUE(create(watch(), 2).ok());
  const std::string id = watch_->next_seat()->id;
  ASSERT_TRUE(create(*watch_, 2).ok());
  auto seat = watch_->next_seat();
  EXPECT_EQ(seat->local_rank, 0U) << "seats count from 0 again";
  EXPECT_NE(seat->id, id);
}

TEST_F(JobArenaWatch, TheArenaPreparedDuringTheBarrierIsTheOneTheRanksGet) {
  watch().prepare(2);
  EXPECT_FALSE(watch_->exists()) << "made from the loop, while the host waits at the barrier";
  const auto deadline = Clock::now() + 10s;
  while (!watch_->exists() && Clock::now() < deadline) {
    ASSERT_GE(loop_.run_once(100), 0);
  }
  ASSERT_TRUE(watch_->exists());
  const std::string prepared = watch_->next_seat()->id;
  ASSERT_TRUE(create(*watch_, 2).ok());
  auto seat = watch_->next_seat();
  EXPECT_EQ(seat->local_rank, 0U) << "seats count from 0 at the start";
  EXPECT_EQ(seat->id, prepared) << "no second arena";
}

TEST_F(JobArenaWatch, AnArenaPreparedForOtherRanksIsReplacedAtTheStart) {
  watch().prepare(2);
  ASSERT_TRUE(create(*watch_, 3).ok());
  EXPECT_EQ(watch_->next_seat()->local_size, 3U);
  watch_->prepare(0);
  EXPECT_FALSE(watch_->exists()) << "fewer than two local ranks share no arena";
  ASSERT_TRUE(create(*watch_, 0).ok());
  EXPECT_FALSE(watch_->exists());
}

// A 256 MiB heap: its commit goes in steps between the loop's turns, so a
// timer due meanwhile (a signal, a stop) is served before the arena is
// ready, not after the whole commit; every page is committed by then.
TEST_F(JobArenaWatch, ALargeArenaIsCommittedInStepsWhileTheLoopServesItsOtherSources) {
  ArenaSettings settings;
  settings.heap = size_t{256} << 20;
  ArenaWatch& w = watch(settings);
  std::optional<Result<void>> outcome;
  bool ready_before_timer = false;
  int timer_fired = 0;
  SourceHandle timer = loop_.add_timer(
      Clock::now(),
      [&] {
        ++timer_fired;
        ready_before_timer = outcome.has_value();
        return 0;
      },
      "a timer due at once");
  w.create(2, [&outcome](Result<void> r) { outcome = std::move(r); });
  EXPECT_FALSE(outcome.has_value()) << "create() committed every page before returning";
  const auto deadline = Clock::now() + 20s;
  while (!outcome && Clock::now() < deadline) {
    ASSERT_GE(loop_.run_once(100), 0);
  }
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(*outcome) << outcome->error().message;
  EXPECT_EQ(timer_fired, 1);
  EXPECT_FALSE(ready_before_timer);
  struct stat st {};
  const int fd = w.next_seat()->fd;
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_GE(static_cast<size_t>(st.st_blocks) * 512, settings.heap.value()) << "every page committed";
}

TEST_F(JobArenaWatch, APreparedArenaThatFailedFailsTheStartWith71) {
  const unsigned too_many = coll::kMaxRanks + 1;
  watch().prepare(too_many);
  auto r = create(*watch_, too_many);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().exit_code, exit_code::kOsError);
  EXPECT_NE(r.error().message.find("where one arena serves at most 1024"), std::string::npos) << r.error().message;
  EXPECT_FALSE(watch_->exists());
}

TEST_F(JobArenaWatch, ARankThatOverwritesTheHeaderStopsTheJobWith76WithinAPeriod) {
  ASSERT_TRUE(create(watch(), 2).ok());
  const int fd = watch_->next_seat()->fd;
  watch_->watch();
  const std::string garbage(64, '\xa5');
  ASSERT_EQ(::pwrite(fd, garbage.data(), garbage.size(), 0), static_cast<ssize_t>(garbage.size()));
  ASSERT_TRUE(step_until(
      loop_, [&] { return code_.has_value(); }, watch_->period() + 2s));
  EXPECT_EQ(*code_, exit_code::kProtocol);
  EXPECT_EQ(message_.rfind("collective arena corrupted: its header was overwritten", 0), 0U) << message_;
}

TEST_F(JobArenaWatch, AbortingTwiceIsHarmlessAndTheArenaStaysSound) {
  ASSERT_TRUE(create(watch(), 2).ok());
  watch_->abort("rank 0 exited");
  watch_->abort("the job is stopping");
  EXPECT_TRUE(watch_->check()) << message_;
}

TEST_F(JobArenaWatch, AnArenaDroppedAtTheEndLeavesNothingOpenAndItsMemoryIsFreed) {
  constexpr size_t kHeap = size_t{256} << 20;
  const size_t descriptors = open_descriptors();
  ArenaSettings settings = small();
  settings.heap = kHeap;
  ASSERT_TRUE(create(watch(settings), 2).ok());
  const size_t held = shmem_in_use();
  watch_.reset();
  EXPECT_EQ(open_descriptors(), descriptors) << "neither the memfd nor anything that closed it is left open";
  // The kernel frees the pages after close returns (coll_arena.cpp): soon,
  // not necessarily at once. Three quarters of the heap: other processes of
  // the machine use shared memory too.
  const auto deadline = Clock::now() + 5s;
  while (shmem_in_use() + kHeap * 3 / 4 > held && Clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_LE(shmem_in_use() + kHeap * 3 / 4, held) << "the arena's pages were not freed within 5 s";
}

TEST_F(JobArenaWatch, AHangTimeoutChecksAtLeastFourTimesWithinIt) {
  ArenaSettings settings = small();
  EXPECT_EQ(watch(settings).period(), 1s);
  settings.hang_timeout = 2s;
  EXPECT_EQ(watch(settings).period(), 500ms);
  settings.hang_timeout = 60s;
  EXPECT_EQ(watch(settings).period(), 1s);
}

}  // namespace
}  // namespace trainit
