// The job's end in one line: the cause's format, the cut at 4 KiB on a
// character's boundary, and the termination message's file, written only
// where a regular file is there and never through anything planted there.
#include "job/status_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/redact.h"
#include "os/json.h"

namespace trainit {
namespace {

class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/trainit-status-file-XXXXXX";
    EXPECT_NE(::mkdtemp(dir), nullptr);
    path_ = dir;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void put(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(CauseLine, NamesWhereWhatTheCodeAndTheState) {
  EXPECT_EQ(cause_line("host 1 (w-1.job) rank 3: rank-3-local-1 (pid 9) exited with 7", 7, "running"),
            "host 1 (w-1.job) rank 3: rank-3-local-1 (pid 9) exited with 7; exit 7 in state running");
  EXPECT_EQ(cause_line("host w-0: trainit got SIGTERM", 143, "host_barrier"),
            "host w-0: trainit got SIGTERM; exit 143 in state host_barrier");
}

TEST(CauseLine, AJobThatEndedWellSaysSoAndOneThatFailedGivesItsCause) {
  StatusFile status;
  status.host = "w-0";
  status.state = "exit";
  status.exit_code = 0;
  EXPECT_EQ(status.end_line(), "host w-0: every rank exited 0; exit 0");
  status.cause = "host w-0 rank 1: rank-1-local-1 (pid 12) was killed by SIGSEGV";
  status.cause_code = 139;
  status.cause_state = "running";
  status.exit_code = 139;
  EXPECT_EQ(status.end_line(),
            "host w-0 rank 1: rank-1-local-1 (pid 12) was killed by SIGSEGV; exit 139 in state running");
}

TEST(CauseLine, TheStatusFileHoldsTheWholeLine) {
  TempDir dir;
  StatusFile status;
  status.path = dir / "status.json";
  status.host = "w-0";
  status.state = "stopping";
  status.cause = "host w-0 rank 1: rank-1-local-1 (pid 12) exited with 3";
  status.cause_code = 3;
  status.cause_state = "running";
  ASSERT_TRUE(status.write().ok());
  auto doc = parse_json(slurp(status.path), status.path);
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  EXPECT_EQ((*doc)["cause"], "host w-0 rank 1: rank-1-local-1 (pid 12) exited with 3; exit 3 in state running");
  EXPECT_EQ((*doc)["host"], "w-0");
}

TEST(CutUtf8, KeepsShortTextAndCutsLongTextOnACharacterBoundaryWithAMark) {
  EXPECT_EQ(cut_utf8("short", 10), "short");
  EXPECT_EQ(cut_utf8("0123456789", 10), "0123456789");
  EXPECT_EQ(cut_utf8("0123456789abc", 10), "0123456...");
  // "é" is two bytes (c3 a9): a cut between them moves before it.
  const std::string accented = "aaaaaa\xc3\xa9zzzz";
  const std::string cut = cut_utf8(accented, 10);
  EXPECT_EQ(cut, "aaaaaa...");
  EXPECT_LE(cut.size(), 10u);
  // A four-byte character at the cut.
  const std::string emoji = "abcde\xf0\x9f\x98\x80xyz";
  EXPECT_EQ(cut_utf8(emoji, 9), "abcde...");
  EXPECT_EQ(cut_utf8("anything", 2), "..");
}

// The temporary file beside the status file has a name nobody can guess: a
// rank that made a directory at the name a write would take (it was
// "<path>.tmp-<pid>", and PID 1's pid is always 1) froze the status file.
TEST(AtomicWrite, ANamePlantedWhereTheTemporaryFileWouldGoDoesNotStopTheWrite) {
  TempDir dir;
  const std::string path = dir / "status.json";
  const std::string planted = path + ".tmp-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(planted.c_str(), 0755), 0);
  for (int i = 0; i < 3; ++i) {
    const std::string text = "{\"state\": " + std::to_string(i) + "}\n";
    auto written = write_file_atomically(path, text, 0640);
    ASSERT_TRUE(written.ok()) << written.error().message;
    EXPECT_EQ(slurp(path), text);
  }
  size_t beside = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "")) {
    beside += entry.path().filename().string().starts_with("status.json.") ? 1 : 0;
  }
  EXPECT_EQ(beside, 1U) << "only the planted directory is left beside it";
}

// A status that cannot be brought up to date (a full disk) must not go on
// saying the job runs: the stale file is removed, and the new one written
// in the room that frees when it fits. Here the child's file-size limit
// lets the first status through and not the second, larger one.
TEST(StatusFileWrite, AStatusThatCannotBeWrittenRemovesTheStaleOneInsteadOfLeavingIt) {
  TempDir dir;
  const std::string path = dir / "status.json";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    StatusFile status;
    status.path = path;
    status.state = "running";
    if (!status.write().ok() || slurp(path).find("\"running\"") == std::string::npos) {
      ::_exit(2);
    }
    const rlimit limit{std::min<rlim_t>(slurp(path).size() + 64, 4096), RLIM_INFINITY};
    (void)::setrlimit(RLIMIT_FSIZE, &limit);
    status.state = "exit";
    status.reason = std::string(8192, 'x');
    auto r = status.write();
    if (r.ok() || r.error().message.find("the stale status file was removed") == std::string::npos) {
      ::_exit(3);
    }
    ::_exit(::access(path.c_str(), F_OK) != 0 && errno == ENOENT ? 0 : 4);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  // Its SIGCHLD, pending where this thread blocks it, is no later test's.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  const timespec now{};
  (void)::sigtimedwait(&chld, nullptr, &now);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "2: the first write failed; 3: the second did not fail naming the removal; 4: "
                                        "the stale file is still there";
}

TEST(TerminationLog, WritesTheLineOnceReplacingWhatTheFileHeld) {
  TempDir dir;
  const std::string path = dir / "termination-log";
  put(path, std::string(10000, 'x'));
  ASSERT_TRUE(write_termination_log(path, "host w-0: every rank exited 0; exit 0").ok());
  EXPECT_EQ(slurp(path), "host w-0: every rank exited 0; exit 0\n");
}

TEST(TerminationLog, IsCutToKubernetesLimitWithItsNewline) {
  TempDir dir;
  const std::string path = dir / "termination-log";
  put(path, "");
  std::string line = "host w-0 rank 1: ";
  while (line.size() < 6000) {
    line += "\xc3\xa9";  // two bytes each: the cut must not split one
  }
  ASSERT_TRUE(write_termination_log(path, line).ok());
  const std::string written = slurp(path);
  EXPECT_LE(written.size(), kTerminationLogMax);
  EXPECT_GE(written.size(), kTerminationLogMax - 4);
  EXPECT_EQ(written.back(), '\n');
  EXPECT_EQ(written.substr(written.size() - 4), "...\n");
  EXPECT_TRUE(parse_json("\"" + written.substr(17, written.size() - 18) + "\"", "cut").ok()) << "not valid UTF-8";
}

TEST(TerminationLog, HidesTheSecretsTrainitNeverWrites) {
  TempDir dir;
  const std::string path = dir / "termination-log";
  put(path, "");
  add_secret("termination-log-secret-7f3a");
  ASSERT_TRUE(write_termination_log(path, "host w-0 rank 1: auth failed for termination-log-secret-7f3a").ok());
  EXPECT_EQ(slurp(path), "host w-0 rank 1: auth failed for <redacted>\n");
}

// A secret the cut would fall in is hidden whole: hidden first, then cut.
TEST(TerminationLog, HidesASecretBeforeTheCut) {
  TempDir dir;
  const std::string path = dir / "termination-log";
  put(path, "");
  add_secret("cut-termination-secret-0123456789");
  ASSERT_TRUE(
      write_termination_log(path, std::string(kTerminationLogMax - 20, 'x') + "cut-termination-secret-0123456789")
          .ok());
  const std::string written = slurp(path);
  EXPECT_EQ(written.find("cut-term"), std::string::npos) << written.substr(written.size() - 40);
  EXPECT_LE(written.size(), kTerminationLogMax);
}

// What a terminal or a log viewer would take as a command (C0 and C1
// controls, a malformed byte) is written as \xNN; UTF-8 text as it is.
TEST(TerminationLog, ControlCharactersC1IncludedAreWrittenEscaped) {
  TempDir dir;
  const std::string path = dir / "termination-log";
  put(path, "");
  ASSERT_TRUE(write_termination_log(path,
                                    "cause \x1b[2J \xc2\x85"
                                    "end \x9b \xc3\xa9")
                  .ok());
  EXPECT_EQ(slurp(path), "cause \\x1b[2J \\xc2\\x85end \\x9b \xc3\xa9\n");
}

TEST(TerminationLog, IsNotCreatedWhereNoFileIsThere) {
  TempDir dir;
  const std::string path = dir / "termination-log";
  auto r = write_termination_log(path, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().errnum, ENOENT);
  EXPECT_FALSE(std::filesystem::exists(path));
}

// No file is no file, whoever owns the directories on the way: in a user
// namespace "/" belongs to an unmapped user, and a missing termination log
// was a warning about "/" instead of the silence of a file not there.
TEST(TerminationLog, NoFileUnderAnotherUsersDirectoryIsNoFileNotARefusal) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "giving a directory to another user needs root";
  }
  TempDir dir;
  ASSERT_EQ(::mkdir((dir / "theirs").c_str(), 0755), 0);
  ASSERT_EQ(::chown((dir / "theirs").c_str(), 4242, 4242), 0);
  auto r = write_termination_log(dir / "theirs/termination-log", "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().errnum, ENOENT) << r.error().message;
}

TEST(TerminationLog, RefusesALinkAFifoADirectoryAndAFileWithOtherNames) {
  TempDir dir;
  const std::string target = dir / "target";
  put(target, "kept");
  const std::string link = dir / "link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(write_termination_log(link, "x").ok());

  const std::string hard = dir / "hard";
  ASSERT_EQ(::link(target.c_str(), hard.c_str()), 0);
  EXPECT_FALSE(write_termination_log(hard, "x").ok());
  EXPECT_EQ(slurp(target), "kept");

  EXPECT_FALSE(write_termination_log(dir / "", "x").ok());

  // A FIFO without a reader: refused at once, not waited on.
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(write_termination_log(fifo, "x").ok());
  // With a reader it opens, and is still refused: nothing is written to it.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  EXPECT_FALSE(write_termination_log(fifo, "x").ok());
  char byte = 0;
  EXPECT_EQ(::read(reader, &byte, 1), 0);
  ::close(reader);
}

}  // namespace
}  // namespace trainit
