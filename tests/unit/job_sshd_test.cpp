// start_sshd and wait_peers, the parts that need no sshd: the directories
// and configuration prepared as sshd demands them, and the wait for every
// peer's sshd port, which names the ones that do not answer.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/fd.h"
#include "job/sshd.h"
#include "net_support.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using test::loopback;
using test::step_for;
using test::step_until;

class JobSshd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(loop_.init(), 0);
    char dir[] = "/tmp/trainit-sshd-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    root_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  Loop loop_;
  std::string root_;
};

TEST_F(JobSshd, PrepareMakesAPrivateDirectoryAndAConfigurationOnlyItsOwnerReads) {
  SshdPlan sshd;
  const std::string dir = root_ + "/private/job";
  sshd.config_path = dir + "/sshd_config";
  sshd.config = "Port 36666\n";
  ASSERT_TRUE(SshdPhase::prepare(sshd, dir, {root_ + "/log/a"}).ok());
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  ASSERT_EQ(::stat(sshd.config_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  EXPECT_TRUE(std::filesystem::is_directory(root_ + "/log/a"));
}

TEST_F(JobSshd, APrivateDirectoryOthersMayWriteIsRefusedWith73) {
  const std::string dir = root_ + "/shared";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  SshdPlan sshd;
  sshd.config_path = dir + "/sshd_config";
  auto r = SshdPhase::prepare(sshd, dir, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().exit_code, 73);
  EXPECT_NE(r.error().message.find("writable by every user, without the sticky bit; refused"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(std::filesystem::exists(sshd.config_path));
}

TEST_F(JobSshd, AnExistingPrivateDirectoryOfTrainitsIsMadeOnlyItsOwn) {
  const std::string dir = root_ + "/mine";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  ASSERT_TRUE(make_private_dir(dir).ok());
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700U);
}

TEST_F(JobSshd, ASymlinkAsThePrivateDirectoryIsRefused) {
  const std::string dir = root_ + "/link";
  ASSERT_EQ(::symlink(root_.c_str(), dir.c_str()), 0);
  EXPECT_FALSE(make_private_dir(dir).ok());
}

TEST_F(JobSshd, ThePeersAreUpOnlyOnceEverySshdPortTakesAConnection) {
  Fd listener;
  const uint16_t port = test::bind_loopback(listener);
  bool up = false;
  // Both peers at 127.0.0.1: the second's port is the same, so both answer.
  PeerSshds peers(loop_, {loopback(), loopback()}, port, [&] { up = true; });
  ASSERT_TRUE(step_until(loop_, [&] { return up; }));
  EXPECT_TRUE(peers.unanswered().empty());
}

TEST_F(JobSshd, APeerWhoseSshdDoesNotAnswerIsNamedAndKeepsTheWaitOpen) {
  Fd closed;
  const uint16_t port = test::bind_loopback(closed);
  closed.reset();  // nothing listens there now
  bool up = false;
  PeerSshds peers(loop_, {loopback()}, port, [&] { up = true; });
  step_for(loop_, 300ms);
  EXPECT_FALSE(up);
  ASSERT_EQ(peers.unanswered().size(), 1U);
  EXPECT_EQ(peers.unanswered()[0].rfind("sshd at 127.0.0.1:" + std::to_string(port) + " (", 0), 0U)
      << peers.unanswered()[0];
}

TEST_F(JobSshd, NoPeerMeansNothingToWaitFor) {
  PeerSshds peers(loop_, {}, 22, [] { FAIL() << "no peer: no callback"; });
  EXPECT_TRUE(peers.empty());
}

}  // namespace
}  // namespace trainit
