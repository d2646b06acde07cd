// FileWatch (issue 9): the rank table is read again only when it may have
// changed, and then read as the look that said so found it. Real files in a
// temporary directory; "now" is given, so that a look can be as long after
// the file's last change as a test needs without waiting for it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "os/fs.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;
using SystemClock = std::chrono::system_clock;

class FileWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/trainit-file-watch.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/jobstart_hccl.json";
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  static void write(const std::string& path, const std::string& text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ASSERT_EQ(::close(fd), 0);
  }

  // When `path` last changed (its ctime), on the wall clock.
  static SystemClock::time_point changed_at(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0);
    return SystemClock::time_point(std::chrono::duration_cast<SystemClock::duration>(
        std::chrono::seconds(st.st_ctim.tv_sec) + std::chrono::nanoseconds(st.st_ctim.tv_nsec)));
  }

  // Well after the file's last change: a look then can be trusted.
  SystemClock::time_point later() const { return changed_at(path_) + FileWatch::kSettle + 1s; }

  std::string read(const FileWatch& watch) const {
    auto text = watch.file_system().read_file(path_, 1 << 20);
    return text.ok() ? *text : "error: " + text.error().message;
  }

  std::string dir_, path_;
};

TEST_F(FileWatchTest, AnUnchangedFileIsNotReadAgain) {
  write(path_, R"({"status":"initializing"})");
  FileWatch watch(path_);
  ASSERT_TRUE(watch.changed(later()));
  EXPECT_EQ(read(watch), R"({"status":"initializing"})");
  watch.release();
  for (int i = 0; i < 3; ++i)
    EXPECT_FALSE(watch.changed(later() + std::chrono::hours(i))) << "look " << i;
}

TEST_F(FileWatchTest, ALookTooCloseToTheLastChangeIsTakenAgain) {
  write(path_, "0123456789");
  FileWatch watch(path_);
  const auto written = changed_at(path_);
  ASSERT_TRUE(watch.changed(written));  // within the file system's timestamp granularity of it
  EXPECT_TRUE(watch.changed(written + 1s)) << "a write in the same tick could have kept size and times";
  EXPECT_TRUE(watch.changed(written + FileWatch::kSettle)) << "the last look was still too close";
  EXPECT_FALSE(watch.changed(written + FileWatch::kSettle + 1s)) << "that one could be trusted";
}

TEST_F(FileWatchTest, ARewriteIsReadAgainWhateverItKeeps) {
  write(path_, "first version");
  FileWatch watch(path_);
  ASSERT_TRUE(watch.changed(later()));
  ASSERT_FALSE(watch.changed(later()));

  write(path_, "a longer second version");  // size
  EXPECT_TRUE(watch.changed(later()));
  EXPECT_EQ(read(watch), "a longer second version");
  EXPECT_FALSE(watch.changed(later()));

  // Same size, times set back as they were: the change time still moves.
  struct stat before {};
  ASSERT_EQ(::stat(path_.c_str(), &before), 0);
  write(path_, "a longer third  version");
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path_.c_str(), times, 0), 0);
  EXPECT_TRUE(watch.changed(later()));
  EXPECT_EQ(read(watch), "a longer third  version");
  EXPECT_FALSE(watch.changed(later()));

  // Another file renamed over it (a ConfigMap swap, an atomic writer).
  const std::string other = dir_ + "/next.json";
  write(other, "a longer forth  version");
  ASSERT_EQ(::rename(other.c_str(), path_.c_str()), 0);
  EXPECT_TRUE(watch.changed(later()));
  EXPECT_EQ(read(watch), "a longer forth  version");
}

TEST_F(FileWatchTest, AMissingFileIsLookedForAndSeenWhenItComes) {
  FileWatch watch(path_);
  ASSERT_TRUE(watch.changed(SystemClock::now()));
  EXPECT_EQ(watch.file_system().read_file(path_, 100).error().errnum, ENOENT);
  EXPECT_EQ(watch.file_system().kind(path_), PathKind::kMissing);
  EXPECT_FALSE(watch.changed(SystemClock::now())) << "still missing: nothing to read";
  write(path_, "here");
  EXPECT_TRUE(watch.changed(SystemClock::now()));
  EXPECT_EQ(read(watch), "here");
  const auto then = later();
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  EXPECT_TRUE(watch.changed(then));
  EXPECT_EQ(watch.file_system().read_file(path_, 100).error().errnum, ENOENT);
}

TEST_F(FileWatchTest, WhatIsReadIsTheFileTheLookFound) {
  write(path_, "the file the look found");
  FileWatch watch(path_);
  ASSERT_TRUE(watch.changed(later()));
  const std::string other = dir_ + "/next.json";
  write(other, "a file renamed over it after the look");
  ASSERT_EQ(::rename(other.c_str(), path_.c_str()), 0);
  EXPECT_EQ(read(watch), "the file the look found");
  EXPECT_EQ(read(watch), "the file the look found") << "read again from its start";
  EXPECT_EQ(watch.file_system().kind(path_), PathKind::kOther);
  EXPECT_EQ(watch.file_system().kind(dir_), PathKind::kDirectory) << "other paths are the real file system's";
  watch.release();
  EXPECT_EQ(read(watch), "a file renamed over it after the look");
  EXPECT_TRUE(watch.changed(later()));
}

TEST_F(FileWatchTest, ReadsAreBoundedAndRefuseWhatIsNotAFile) {
  write(path_, std::string(100, 'x'));
  FileWatch watch(path_);
  ASSERT_TRUE(watch.changed(later()));
  auto big = watch.file_system().read_file(path_, 99);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().errnum, EFBIG);
  EXPECT_EQ(watch.file_system().read_file(path_, 100).value(), std::string(100, 'x'));

  ASSERT_EQ(::unlink(path_.c_str()), 0);
  ASSERT_EQ(::mkdir(path_.c_str(), 0755), 0);
  EXPECT_TRUE(watch.changed(later()));
  EXPECT_EQ(watch.file_system().read_file(path_, 100).error().errnum, EISDIR);
  EXPECT_EQ(watch.file_system().kind(path_), PathKind::kDirectory);
  ASSERT_EQ(::rmdir(path_.c_str()), 0);

  ASSERT_EQ(::mkfifo(path_.c_str(), 0644), 0);  // never blocks on a FIFO
  EXPECT_TRUE(watch.changed(later()));
  EXPECT_EQ(watch.file_system().read_file(path_, 100).error().errnum, EINVAL);
}

}  // namespace
}  // namespace trainit
