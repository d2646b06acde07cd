// spawn, running, stopping: the Launcher gives a process what the plan says
// (and a rank its seat in the arena), RankSet reports each rank's end in
// words and signals the ranks' groups. Real processes, reaped by the loop.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "emulation.h"
#include "job/arena_watch.h"
#include "job/ranks.h"
#include "net_support.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using test::step_until;

struct Ended {
  std::string name;
  int code = -1;
  std::string what;
};

class JobRanks : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(loop_.init(), 0); }

  static ProcessSpec shell(std::string name, std::string script, std::optional<unsigned> rank = std::nullopt) {
    ProcessSpec spec;
    spec.name = std::move(name);
    spec.rank = rank;
    spec.argv = {"/bin/sh", "-c", std::move(script)};
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    return spec;
  }

  Loop loop_;
  Pid1 pid1_;
  LogRelay relay_{loop_, nullptr};
  Launcher launcher_{pid1_, relay_};
  std::vector<Ended> ended_;
  RankSet ranks_{loop_, launcher_, relay_, [this](Rank& rank, const std::string& what) {
                   rank.state = RankState::kExited;
                   ended_.push_back({rank.spec->name, rank.code, what});
                 }};
};

TEST_F(JobRanks, EachRanksEndIsReportedWithItsCodeInWords) {
  const ProcessSpec three = shell("rank-0", "exit 3", 0U);
  const ProcessSpec killed = shell("rank-1", "kill -KILL $$", 1U);
  ASSERT_TRUE(ranks_.spawn(three, nullptr).ok());
  ASSERT_TRUE(ranks_.spawn(killed, nullptr).ok());
  ASSERT_TRUE(step_until(loop_, [&] { return ended_.size() == 2; }));
  std::sort(ended_.begin(), ended_.end(), [](const Ended& a, const Ended& b) { return a.name < b.name; });
  EXPECT_EQ(ended_[0].code, 3);
  EXPECT_EQ(ended_[0].what, "exited with 3");
  EXPECT_EQ(ended_[1].code, 128 + SIGKILL);
  EXPECT_EQ(ended_[1].what, "was killed by SIGKILL");
  EXPECT_FALSE(ranks_.any_running());
  ASSERT_EQ(ranks_.status().size(), 2U);
  EXPECT_EQ(ranks_.status()[0].rank, 0U);
}

TEST_F(JobRanks, AProgramThatCannotBeFoundFailsWith127NamingIt) {
  ProcessSpec spec = shell("rank-0", "");
  spec.argv = {"/nonexistent/trainit-test-program"};
  auto r = ranks_.spawn(spec, nullptr);
  if (test::kEmulated) {  // emulation::kVforkIsFork: the failed exec is only the child's exit status
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE(step_until(loop_, [&] { return ended_.size() == 1; }));
    EXPECT_EQ(ended_[0].code, 127);
    EXPECT_EQ(ended_[0].what, "exited with 127");
    return;
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().exit_code, 127);
  EXPECT_NE(r.error().message.find("rank-0"), std::string::npos) << r.error().message;
}

TEST_F(JobRanks, ARankGetsItsSeatInTheArenaAndKeepsItsDescriptor) {
  Fd memfd(::memfd_create("trainit-test-arena", MFD_CLOEXEC));
  ASSERT_TRUE(memfd);
  const ArenaSeat seat{memfd.get(), 1, 2, "00000000000000ab", {}};
  const std::string check =
      "test \"$TRAINIT_LOCAL_RANK\" = 1 && test \"$TRAINIT_LOCAL_SIZE\" = 2 && "
      "test \"$TRAINIT_COLL_ID\" = 00000000000000ab && test -e /proc/self/fd/$TRAINIT_COLL_FD";
  const ProcessSpec spec = shell("rank-1", check, 1U);
  ASSERT_TRUE(ranks_.spawn(spec, &seat).ok());
  ASSERT_TRUE(step_until(loop_, [&] { return ended_.size() == 1; }));
  EXPECT_EQ(ended_[0].code, 0) << "the seat's variables or descriptor were not there";
}

TEST_F(JobRanks, ARankGetsASocketToEachLocalPeerAndTheOtherEndStaysWithThatPeer) {
  Fd memfd(::memfd_create("trainit-test-arena", MFD_CLOEXEC));
  ASSERT_TRUE(memfd);
  auto mesh = peer_socket_mesh(3);
  ASSERT_TRUE(mesh.ok()) << mesh.error().message;
  ArenaSeat seat{memfd.get(), 1, 3, "00000000000000ab", {}};
  for (unsigned p = 0; p < 3; ++p) {
    seat.peer_socks.push_back(std::move((*mesh)[3 + p]));  // rank 1's row
  }
  const int to_rank_2 = (*mesh)[2 * 3 + 1].get();  // rank 2's end towards rank 1
  // The rank finds "A,-,B": two open sockets, its own index empty; it
  // writes a byte on the socket towards rank 2.
  const std::string check =
      "IFS=, read -r a own b <<EOF\n$TRAINIT_COLL_PEER_FDS\nEOF\n"
      "test \"$own\" = - && test -S /proc/self/fd/$a && test -S /proc/self/fd/$b && printf x >&$b";
  const ProcessSpec spec = shell("rank-1", check, 1U);
  ASSERT_TRUE(ranks_.spawn(spec, &seat).ok());
  ASSERT_TRUE(step_until(loop_, [&] { return ended_.size() == 1; }));
  EXPECT_EQ(ended_[0].code, 0) << "the peer sockets were not in TRAINIT_COLL_PEER_FDS";
  char got = 0;
  EXPECT_EQ(::recv(to_rank_2, &got, 1, MSG_DONTWAIT), 1);
  EXPECT_EQ(got, 'x');
}

TEST_F(JobRanks, AForwardedSignalReachesEveryRanksGroup) {
  char dir[] = "/tmp/trainit-ranks-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string ready = std::string(dir) + "/ready-";
  auto waiter = [&](int code, const std::string& name) {
    return fmt::format("trap 'exit {}' USR1; : > {}{}; while :; do sleep 0.01; done", code, ready, name);
  };
  const ProcessSpec a = shell("rank-0", waiter(10, "0"), 0U);
  const ProcessSpec b = shell("rank-1", waiter(11, "1"), 1U);
  ASSERT_TRUE(ranks_.spawn(a, nullptr).ok());
  ASSERT_TRUE(ranks_.spawn(b, nullptr).ok());
  ASSERT_TRUE(step_until(loop_, [&] {
    return ::access((ready + "0").c_str(), F_OK) == 0 && ::access((ready + "1").c_str(), F_OK) == 0;
  })) << "the ranks set their traps";
  ranks_.signal_groups(SIGUSR1);
  ASSERT_TRUE(step_until(loop_, [&] { return ended_.size() == 2; }));
  for (const Ended& e : ended_) {
    EXPECT_EQ(e.code, e.name == "rank-0" ? 10 : 11) << e.name;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainit
