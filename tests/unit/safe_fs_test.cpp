// The one way PID 1 writes files (base/safe_fs.h): no symbolic link anywhere
// in a path is followed, directories writable by everyone need the sticky
// bit, another user's file or directory is refused, modes are exact and
// ownership goes by descriptor.
#include "base/safe_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace trainit {
namespace {

class SafeFs : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/var/tmp/trainit-safe-fs.XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    root_ = dir;
  }
  void TearDown() override {
    safe_fs::forget_job_user();
    std::filesystem::remove_all(root_);
  }

  std::string path(const std::string& name) const { return root_ + "/" + name; }

  static std::string slurp(const std::string& file) {
    std::ifstream in(file);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  std::string root_;
};

TEST_F(SafeFs, ASymbolicLinkAnywhereInThePathIsRefusedAndNothingIsWrittenThroughIt) {
  ASSERT_EQ(::mkdir(path("elsewhere").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(path("elsewhere").c_str(), path("link").c_str()), 0);
  for (const std::string& target : {path("link/deeper/file"), path("link/file")}) {
    auto made = safe_fs::make_dirs(target.substr(0, target.rfind('/')));
    EXPECT_FALSE(made) << target;
    auto opened = safe_fs::open_file(target, O_WRONLY | O_CREAT, 0600);
    ASSERT_FALSE(opened) << target;
    EXPECT_EQ(opened.error().message, path("link") + ": a symbolic link is there; refused");
    EXPECT_FALSE(safe_fs::write_atomically(target, "x", 0600));
  }
  EXPECT_TRUE(std::filesystem::is_empty(path("elsewhere")));
}

TEST_F(SafeFs, ALinkAtTheFileItselfIsRefusedAndAnAtomicWriteReplacesTheLinkNotItsTarget) {
  std::ofstream(path("victim")) << "precious";
  ASSERT_EQ(::symlink(path("victim").c_str(), path("file").c_str()), 0);
  auto opened = safe_fs::open_file(path("file"), O_WRONLY | O_APPEND);
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().errnum, ELOOP);
  ASSERT_TRUE(safe_fs::write_atomically(path("file"), "new", 0640));
  EXPECT_EQ(slurp(path("victim")), "precious");
  EXPECT_EQ(slurp(path("file")), "new");
  EXPECT_FALSE(std::filesystem::is_symlink(path("file")));
}

TEST_F(SafeFs, ADirectoryWritableByEveryoneNeedsTheStickyBit) {
  ASSERT_EQ(::mkdir(path("open").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(path("open").c_str(), 0777), 0);
  auto refused = safe_fs::open_file(path("open/file"), O_WRONLY | O_CREAT, 0600);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, path("open") + ": writable by every user, without the sticky bit; refused");
  ASSERT_EQ(::chmod(path("open").c_str(), 01777), 0);
  EXPECT_TRUE(safe_fs::open_file(path("open/file"), O_WRONLY | O_CREAT, 0600)) << "as /tmp is";
}

TEST_F(SafeFs, AnotherUsersFileOrDirectoryIsRefusedAndTheJobsUserOnceTrusted) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "giving files to another user needs root";
  }
  ASSERT_EQ(::mkdir(path("theirs").c_str(), 0755), 0);
  ASSERT_EQ(::chown(path("theirs").c_str(), 4242, 4242), 0);
  std::ofstream(path("their-file")) << "theirs";
  ASSERT_EQ(::chown(path("their-file").c_str(), 4242, 4242), 0);
  auto in_dir = safe_fs::open_file(path("theirs/file"), O_WRONLY | O_CREAT, 0600);
  ASSERT_FALSE(in_dir);
  EXPECT_EQ(in_dir.error().message,
            path("theirs") + ": owned by uid 4242, neither trainit's user nor the job's; refused");
  auto file = safe_fs::open_file(path("their-file"), O_WRONLY | O_APPEND);
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().message, "owned by uid 4242, neither trainit's user nor the job's; refused");

  safe_fs::trust_job_user(4242, 4242);
  EXPECT_TRUE(safe_fs::open_file(path("their-file"), O_WRONLY | O_APPEND));
  auto made = safe_fs::open_file(path("theirs/file"), O_WRONLY | O_CREAT, 0600);
  ASSERT_TRUE(made) << made.error().message;
  struct stat st {};
  ASSERT_EQ(::fstat(made->get(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u) << "made as the job's user in the job's directory";
}

TEST_F(SafeFs, AFifoOrAHardLinkIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0666), 0);
  auto fifo = safe_fs::open_file(path("fifo"), O_WRONLY);
  ASSERT_FALSE(fifo);
  EXPECT_EQ(fifo.error().message, "a FIFO is there; refused");
  std::ofstream(path("one")) << "x";
  ASSERT_EQ(::link(path("one").c_str(), path("two").c_str()), 0);
  auto hard = safe_fs::open_file(path("two"), O_WRONLY | O_APPEND);
  ASSERT_FALSE(hard);
  EXPECT_EQ(hard.error().errnum, EMLINK);
}

TEST_F(SafeFs, MadeDirectoriesHaveTheirModesWhateverTheUmaskAndTheLastIsTheJobsWhenAsked) {
  const mode_t old = ::umask(0);
  bool made = false;
  auto dir = safe_fs::make_dirs(path("a/b/c"), 0750, safe_fs::Give::kTrainit, &made);
  ::umask(old);
  ASSERT_TRUE(dir) << dir.error().message;
  EXPECT_TRUE(made);
  struct stat st {};
  ASSERT_EQ(::stat(path("a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u) << "never writable by everyone";
  ASSERT_EQ(::stat(path("a/b/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  ASSERT_TRUE(safe_fs::make_dirs(path("a/b/c"), 0750, safe_fs::Give::kTrainit, &made));
  EXPECT_FALSE(made) << "it was there";
  if (::geteuid() == 0) {
    safe_fs::trust_job_user(4242, 4243);
    ASSERT_TRUE(safe_fs::make_dirs(path("a/job"), 0755, safe_fs::Give::kJob));
    ASSERT_EQ(::stat(path("a/job").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4242u);
    EXPECT_EQ(st.st_gid, 4243u);
    ASSERT_EQ(::stat(path("a").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u) << "only the last is given";
  }
}

TEST_F(SafeFs, DotDotIsRefusedAndARelativePathIsTheWorkingDirectorysWithoutLinks) {
  auto up = safe_fs::open_file(path("x/../file"), O_WRONLY | O_CREAT, 0600);
  ASSERT_FALSE(up);
  EXPECT_NE(up.error().message.find("'..' in the path; refused"), std::string::npos) << up.error().message;
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(root_.c_str()), 0);
  auto relative = safe_fs::write_atomically("relative", "here", 0600);
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(relative) << relative.error().message;
  EXPECT_EQ(slurp(path("relative")), "here");
}

TEST_F(SafeFs, AnAtomicWriteLeavesNoTemporaryFileAndHasItsModeExactly) {
  const mode_t old = ::umask(077);
  auto r = safe_fs::write_atomically(path("status.json"), "{}\n", 0640);
  ::umask(old);
  ASSERT_TRUE(r) << r.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(path("status.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(root_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

}  // namespace
}  // namespace trainit
