// The fault matrix, the job's surroundings (issue 21): the rank table
// deleted while it is waited for, and the log or status directory full or
// read-only, in the job modes that keep them. Each case asserts the
// documented outcome — the wait goes on or ends with 75 naming what it
// waited for; a full or read-only directory is told in one line and the job
// goes on with the console — and that nothing is half-written: the status
// file is whole JSON or not there, no temporary file is left beside it, a
// log file holds a beginning of what its rank wrote and nothing else.
//
// File systems are mounted in a mount namespace of the test's own
// (PrivateMounts): whatever happens, nothing stays mounted on the machine.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fault_support.h"

namespace trainit::test {
namespace {

using fault::FaultJob;
using fault::Json;
using fault::Mode;
using fault::Where;
using job::count;
using job::exists;
using job::slurp;
using job::template1;
using job::wait_err;
using job::write_file;

// The test process in a mount namespace of its own, every mount private:
// what it mounts is gone with it, whatever becomes of the test. trainit's
// namespace (a copy, made later) sees those mounts.
class PrivateMounts {
 public:
  PrivateMounts() {
    if (::unshare(CLONE_NEWNS) != 0) {
      error_ = std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    } else if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      error_ = std::string("mount --make-rprivate /: ") + std::strerror(errno);
    }
  }
  [[nodiscard]] const std::string& error() const { return error_; }

  // A tmpfs of `size` over `path`; "" or what failed.
  std::string tmpfs(const std::string& path, const std::string& size) {
    const std::string options = "size=" + size + ",mode=0755";
    return track(path, ::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()));
  }
  // `path` made read-only, as a bind mount of itself; "" or what failed.
  std::string read_only(const std::string& path) {
    std::string error = track(path, ::mount(path.c_str(), path.c_str(), nullptr, MS_BIND, nullptr));
    if (error.empty() && ::mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      error = std::string("remount read-only: ") + std::strerror(errno);
    }
    return error;
  }
  // The file system mounted at `path` made read-only for every mount of
  // it, in every namespace (a namespace copied earlier, trainit's, too).
  static std::string remount_read_only(const std::string& path) {
    if (::mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
      return "remount " + path + " read-only: " + std::strerror(errno);
    }
    return "";
  }
  ~PrivateMounts() {
    for (auto it = mounted_.rbegin(); it != mounted_.rend(); ++it) {
      ::umount2(it->c_str(), MNT_DETACH);
    }
  }
  PrivateMounts(const PrivateMounts&) = delete;
  PrivateMounts& operator=(const PrivateMounts&) = delete;

 private:
  std::string track(const std::string& path, int r) {
    if (r != 0) {
      return "mount on " + path + ": " + std::strerror(errno);
    }
    mounted_.push_back(path);
    return "";
  }
  std::string error_;
  std::vector<std::string> mounted_;
};

// Fills the file system of `dir` until it says ENOSPC.
bool fill(const std::string& dir) {
  int fd = ::open((dir + "/filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return false;
  }
  const std::string block(16 << 10, 'f');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  const bool full = errno == ENOSPC;
  ::close(fd);
  return full;
}

// Whether trainit is still running (not even a zombie yet).
bool still_running(const Trainit& t) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(t.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

// --- the rank table deleted while it is waited for -----------------------------

// A 2-rank Ascend job waiting for its table (30 s at most), which is there
// but "initializing"; returns it once trainit said what it waits for.
std::unique_ptr<Trainit> wait_for_the_table(const FaultJob& job, const std::vector<std::string>& extra) {
  EXPECT_TRUE(write_file(job.dirs().table(), template1("initializing", 2)));
  auto t = std::make_unique<Trainit>(job.spec({"mark", "started", "exit", "0"}, extra));
  if (t->started()) {
    EXPECT_TRUE(wait_err(*t, "\"initializing\"")) << t->transcript();
  }
  return t;
}

TEST(RankTableDeleted, WhileWaitedForTheWaitGoesOnAndTheTableWrittenAgainStartsTheJobOnce) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(Where{Mode::kAscend});
  auto t = wait_for_the_table(job, {"--rank-table-timeout", "30"});
  TRAINIT_ASSERT_STARTED(*t);
  ASSERT_EQ(::unlink(job.dirs().table().c_str()), 0);
  ASSERT_TRUE(wait_err(*t, "does not exist")) << "the deletion went unnoticed" << t->transcript();
  EXPECT_TRUE(still_running(*t)) << "the deletion ended the wait" << t->transcript();
  Json waiting = Json::parse(slurp(job.status_path()), nullptr, false);
  EXPECT_FALSE(waiting.is_discarded()) << slurp(job.status_path());
  EXPECT_EQ(waiting["state"], "wait_rank_table") << waiting.dump(2);
  ASSERT_TRUE(write_file(job.dirs().table(), template1("completed", 2)));
  EXPECT_EQ(t->wait(), Exit::code(0)) << t->transcript();
  EXPECT_EQ(count(t->err(), "wait_rank_table -> spawn"), 1u) << t->transcript();
  for (unsigned rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(exists(job.record(rank, "started"))) << "rank " << rank << " did not start";
  }
  fault::expect_final_status(job, 0, {});
  fault::expect_last_transition_found_nothing_left(*t);
}

// The table's directory itself goes (a ConfigMap volume remounted): its
// watch is gone with it, and the poll finds the directory made again.
TEST(RankTableDeleted, WithItsDirectoryAndBothMadeAgainStartsTheJobOnce) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(Where{Mode::kAscend});
  auto t = wait_for_the_table(job, {"--rank-table-timeout", "30"});
  TRAINIT_ASSERT_STARTED(*t);
  std::filesystem::remove_all(job.dirs().config());
  ASSERT_TRUE(wait_err(*t, "does not exist")) << "the deletion went unnoticed" << t->transcript();
  EXPECT_TRUE(still_running(*t)) << "the deletion ended the wait" << t->transcript();
  ASSERT_EQ(::mkdir(job.dirs().config().c_str(), 0755), 0);
  ASSERT_TRUE(write_file(job.dirs().table(), template1("completed", 2)));
  EXPECT_EQ(t->wait(), Exit::code(0)) << "the table in the new directory was not found" << t->transcript();
  EXPECT_EQ(count(t->err(), "wait_rank_table -> spawn"), 1u) << t->transcript();
  fault::expect_final_status(job, 0, {});
}

TEST(RankTableDeleted, ForGoodExits75AtTheDeadlineSayingItDoesNotExist) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(Where{Mode::kAscend});
  auto t = wait_for_the_table(job, {"--rank-table-timeout", "1"});
  TRAINIT_ASSERT_STARTED(*t);
  ASSERT_EQ(::unlink(job.dirs().table().c_str()), 0);
  EXPECT_EQ(t->wait(), Exit::code(75)) << t->transcript();
  fault::expect_final_status(job, 75, {job.dirs().table(), "does not exist"});
  EXPECT_FALSE(exists(job.record(0, "started"))) << "a rank started";
  fault::expect_last_transition_found_nothing_left(*t);
}

// --- the log directory full or read-only ------------------------------------------

// The directory of the plan's log files.
std::string log_dir_of(const FaultJob& job) {
  const std::string file = job.log_file(0);
  return file.substr(0, file.rfind('/'));
}

// Every rank's whole output, as fault_rank's actions below write it.
constexpr const char* kLines[] = {"hello", "done"};

using LogDirectory = ::testing::TestWithParam<Where>;

// A tmpfs of 64 KiB, full before the job: no log file can be written. One
// line says so for the whole job; the ranks run on with the console, and
// whatever reached a log file is the beginning of what its rank wrote.
TEST_P(LogDirectory, FullIsToldInOneLineAndTheJobGoesOnWithTheConsole) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(GetParam());  // before the mounts: they go first, then the job's directory
  PrivateMounts mounts;
  ASSERT_TRUE(mounts.error().empty()) << mounts.error();
  const std::string dir = log_dir_of(job);
  ASSERT_EQ(mounts.tmpfs(dir, "64k"), "");
  ASSERT_TRUE(fill(dir)) << "the tmpfs did not fill";
  Outcome r = run(job.spec({"print", kLines[0], "print", kLines[1], "exit", "0"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(count(r.err, "No space left on device"), 1u) << "once per job, not per rank" << r.transcript;
  for (unsigned rank = 0; rank < job.ranks(); ++rank) {
    EXPECT_NE(r.out.find(job.console_prefix(rank) + kLines[1] + "\n"), std::string::npos)
        << "the console did not carry on" << r.transcript;
    const std::string logged = slurp(job.log_file(rank));
    const std::string written = std::string(kLines[0]) + "\n" + kLines[1] + "\n";
    EXPECT_EQ(written.compare(0, logged.size(), logged), 0) << "rank " << rank << "'s log: '" << logged << "'";
  }
  fault::expect_final_status(job, 0, {});
}

TEST_P(LogDirectory, ReadOnlyIsToldInOneLineAndTheJobGoesOnWithTheConsole) {
  TRAINIT_REQUIRE_ROOT();
  FaultJob job(GetParam());  // before the mounts: they go first, then the job's directory
  PrivateMounts mounts;
  ASSERT_TRUE(mounts.error().empty()) << mounts.error();
  const std::string dir = log_dir_of(job);
  ASSERT_TRUE(std::filesystem::create_directories(dir) || std::filesystem::is_directory(dir));
  ASSERT_EQ(mounts.read_only(dir), "");
  Outcome r = run(job.spec({"print", kLines[0], "print", kLines[1], "exit", "0"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(count(r.err, "Read-only file system"), 1u) << "once per job, not per rank" << r.transcript;
  for (unsigned rank = 0; rank < job.ranks(); ++rank) {
    EXPECT_NE(r.out.find(job.console_prefix(rank) + kLines[1] + "\n"), std::string::npos)
        << "the console did not carry on" << r.transcript;
    EXPECT_FALSE(exists(job.log_file(rank))) << job.log_file(rank);
  }
  fault::expect_final_status(job, 0, {});
}

INSTANTIATE_TEST_SUITE_P(Modes, LogDirectory, ::testing::Values(Where{Mode::kAscend}, Where{Mode::kTorchrun}),
                         fault::where_name);

// --- the status file's directory full or read-only -----------------------------------

// The status file's directory fails while the job runs (`fail` does it):
// the status file is never half of a state, nothing of a failed write is
// left beside it, one line says why, and the job ends as it would have, with
// its rank's code. Full, the old file gives its room to the new one, and the
// last state is there (`last`: "exit"); read-only, the last state written
// whole stays ("running").
template <typename Fail>
void status_directory_failing_mid_job(Fail fail, std::string_view said, std::string_view last_state) {
  FaultJob job(Where{Mode::kAscend});  // before the mounts: they go first, then the job's directory
  PrivateMounts mounts;
  ASSERT_TRUE(mounts.error().empty()) << mounts.error();
  // Its own small file system, beside nothing else of the job's.
  const std::string status_dir = job.dirs().path("status");
  ASSERT_EQ(::mkdir(status_dir.c_str(), 0755), 0);
  ASSERT_EQ(mounts.tmpfs(status_dir, "64k"), "");
  const std::string status = status_dir + "/status.json";
  Trainit t(job.spec({"ready", "wait-file", "go", "only", "1", "exit", "3", "pause"}, {"--status-file", status}));
  TRAINIT_ASSERT_STARTED(t);
  auto ready = fault::wait_ready(t, 2);
  ASSERT_EQ(std::count(ready.begin(), ready.end(), -1), 0) << t.transcript();
  Json running = Json::parse(slurp(status), nullptr, false);
  ASSERT_FALSE(running.is_discarded()) << slurp(status);
  ASSERT_EQ(running["state"], "running");
  fail(mounts, status_dir);
  ASSERT_TRUE(job.release());
  EXPECT_EQ(t.wait(), Exit::code(3)) << t.transcript();
  EXPECT_EQ(count(t.err(), "cannot write " + status + ": " + std::string(said)), 1u)
      << "not told once" << t.transcript();
  Json last = Json::parse(slurp(status), nullptr, false);
  EXPECT_FALSE(last.is_discarded()) << "half-written: '" << slurp(status) << "'";
  EXPECT_EQ(last["state"], last_state) << last.dump(2);
  for (const auto& entry : std::filesystem::directory_iterator(status_dir)) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "status.json" || name == "filler") << "left in the directory: " << name;
  }
  fault::expect_last_transition_found_nothing_left(t);
}

TEST(StatusDirectory, FullMidJobWritesTheLastStatusInTheRoomTheOldOneLeftAndTheJobEndsWithItsCode) {
  TRAINIT_REQUIRE_ROOT();
  status_directory_failing_mid_job([](PrivateMounts&, const std::string& dir) { ASSERT_TRUE(fill(dir)); },
                                   "No space left on device", "exit");
}

TEST(StatusDirectory, ReadOnlyMidJobKeepsTheLastWholeStatusAndTheJobEndsWithItsCode) {
  TRAINIT_REQUIRE_ROOT();
  status_directory_failing_mid_job(
      [](PrivateMounts&, const std::string& dir) { ASSERT_EQ(PrivateMounts::remount_read_only(dir), ""); },
      "Read-only file system", "running");
}

}  // namespace
}  // namespace trainit::test
