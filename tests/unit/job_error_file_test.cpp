// A rank's TORCHELASTIC_ERROR_FILE: the exception and its innermost frame
// from what PyTorch's @record writes, nothing from anything else, and the
// file read only where the plan put it, without following or waiting.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/redact.h"
#include "base/safe_fs.h"
#include "job/error_file.h"
#include "net_support.h"

namespace trainit {
namespace {

// What Debian's python3-torch (1.13) wrote for a @record-ed main whose
// inner() raised while a KeyError was being handled: two chained
// tracebacks, the message on two lines.
constexpr std::string_view kRecorded =
    R"({"message": {"message": "ValueError: bad value 3\nsecond line", "extraInfo": {"py_callstack": )"
    R"("Traceback (most recent call last):\n  File \"/tmp/rectest/t.py\", line 10, in main\n    {}[\"k\"]\n)"
    R"(    ~~^^^^^\nKeyError: 'k'\n\nDuring handling of the above exception, another exception occurred:\n\n)"
    R"(Traceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/)"
    R"(multiprocessing/errors/__init__.py\", line 346, in wrapper\n    return f(*args, **kwargs)\n)"
    R"(           ^^^^^^^^^^^^^^^^^^\n  File \"/tmp/rectest/t.py\", line 12, in main\n    inner(3)\n)"
    R"(  File \"/tmp/rectest/t.py\", line 5, in inner\n    raise ValueError(f\"bad value {x}\\nsecond line\")\n)"
    R"(ValueError: bad value 3\nsecond line\n", "timestamp": "1795683794"}}})";

TEST(ErrorFile, RecordsExceptionAndInnermostFrameAreTheRootCause) {
  auto cause = parse_error_file(kRecorded);
  ASSERT_TRUE(cause);
  EXPECT_EQ(cause->exception, "ValueError: bad value 3 ...");
  EXPECT_EQ(cause->frame, "/tmp/rectest/t.py:5 in inner");
  EXPECT_EQ(describe(*cause), "ValueError: bad value 3 ... at /tmp/rectest/t.py:5 in inner");
}

TEST(ErrorFile, AnAgentsCopyWithItsErrorCodeAndTheNewerPlainFormatAreRead) {
  auto copied = parse_error_file(
      R"({"message": {"message": "RuntimeError: NCCL timeout", "extraInfo": {"py_callstack": "Traceback (most )"
      R"(recent call last):\n  File \"train.py\", line 40, in <module>\n    step()\nRuntimeError: NCCL timeout\n", )"
      R"("timestamp": "1"}, "errorCode": 1}})");
  ASSERT_TRUE(copied);
  EXPECT_EQ(describe(*copied), "RuntimeError: NCCL timeout at train.py:40 in <module>");
  auto plain = parse_error_file(R"({"message": "Signal 9 (SIGKILL) received by PID 12", "timestamp": 3})");
  ASSERT_TRUE(plain);
  EXPECT_EQ(describe(*plain), "Signal 9 (SIGKILL) received by PID 12");
  auto bare = parse_error_file(R"({"message": {"message": "KeyboardInterrupt: "}})");
  ASSERT_TRUE(bare);
  EXPECT_EQ(describe(*bare), "KeyboardInterrupt");
}

TEST(ErrorFile, AnythingElseGivesNoCause) {
  const std::vector<std::string> not_causes = {
      "",
      "not json",
      R"({"message": {"message": "ValueError: cut)",
      "[]",
      "\"ValueError\"",
      "{}",
      R"({"message": null})",
      R"({"message": 42})",
      R"({"message": ["ValueError"]})",
      R"({"message": {"message": 42}})",
      R"({"message": {"extraInfo": {"py_callstack": "Traceback"}}})",
      R"({"message": ""})",
      R"({"message": "   \n"})",
      std::string(100, '[') + std::string(100, ']'),  // deeper than the limit
      R"({"message": "a", "message": "b"})",          // a repeated key
  };
  for (const std::string& text : not_causes) {
    EXPECT_FALSE(parse_error_file(text)) << text;
  }
}

TEST(ErrorFile, AStrangeCallstackGivesNoFrameAndForeignTextStaysOneShortLine) {
  auto odd = parse_error_file(
      R"({"message": {"message": "E: x", "extraInfo": {"py_callstack": "File \"a\", line x, in f\nFile \"b\", line 3 in g\n"}}})");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->frame, "");
  EXPECT_EQ(describe(*odd), "E: x");
  auto wrong_type = parse_error_file(R"({"message": {"message": "E: x", "extraInfo": {"py_callstack": 7}}})");
  ASSERT_TRUE(wrong_type);
  EXPECT_EQ(wrong_type->frame, "");

  const std::string long_text(5000, 'y');
  auto hostile = parse_error_file(R"({"message": {"message": "E\u001b[2J: )" + long_text +
                                  R"(", "extraInfo": )"
                                  R"({"py_callstack": "  File \")" +
                                  long_text + R"(\", line 1, in \u0007f\n"}}})");
  ASSERT_TRUE(hostile);
  EXPECT_LE(hostile->exception.size(), 310u);
  EXPECT_EQ(hostile->exception.find('\x1b'), std::string::npos);
  EXPECT_LE(hostile->frame.size(), 330u);
  EXPECT_EQ(hostile->frame.find('\x07'), std::string::npos);
}

// A secret in a rank's exception is hidden before the message is cut to
// its 300 bytes and escaped to ASCII: a token the cut falls in leaks no
// beginning of itself, a non-ASCII password no \xNN form of itself.
TEST(ErrorFile, ASecretIsHiddenBeforeTheExceptionIsCutOrEscaped) {
  const std::string token = "tok-0123456789abcdefghij";
  const std::string password = "p\xc3\xa4ssw\xc3\xb6rd-42";  // "pässwörd-42"
  add_secret(token);
  add_secret(password);
  const std::string filler(290, 'f');
  auto cut = parse_error_file(R"({"message": {"message": "ValueError: )" + filler + token + R"("}})");
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->exception.find(token.substr(0, 8)), std::string::npos) << cut->exception;
  auto escaped = parse_error_file(R"({"message": {"message": "PermissionError: wrong password )" + password + R"("}})");
  ASSERT_TRUE(escaped);
  EXPECT_EQ(escaped->exception, "PermissionError: wrong password <redacted>");
}

class JobErrorFile : public ::testing::Test {
 protected:
  // The private directory as the runner makes it (mode 0700) before the
  // error files are prepared.
  void SetUp() override {
    char dir[] = "/tmp/trainit-error-file-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    root_ = dir;
    private_dir_ = root_ + "/private";
    ASSERT_EQ(::mkdir(private_dir_.c_str(), 0700), 0);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  ProcessSpec rank(unsigned n) const {
    ProcessSpec spec;
    spec.name = "rank-" + std::to_string(n);
    spec.rank = n;
    spec.env = {{"PATH", "/usr/bin"}, {"TORCHELASTIC_ERROR_FILE", error_file(n)}};
    return spec;
  }
  std::string error_file(unsigned n) const { return private_dir_ + "/error-" + std::to_string(n) + ".json"; }

  std::string root_, private_dir_;
  const struct timespec any_time_ {};  // "since" the epoch: any file is this start's
};

TEST_F(JobErrorFile, AFailedRanksFileInThePrivateDirectoryNamesItsException) {
  std::vector<ProcessSpec> ranks = {rank(0), rank(1)};
  prepare_error_files(private_dir_, ranks);
  std::ofstream(error_file(1)) << kRecorded;
  EXPECT_EQ(root_cause_of(ranks[1], private_dir_, any_time_),
            ": ValueError: bad value 3 ... at /tmp/rectest/t.py:5 in inner");
  EXPECT_EQ(root_cause_of(ranks[0], private_dir_, any_time_), "") << "rank 0 wrote none";
}

TEST_F(JobErrorFile, TheLastStartsFilesAreRemovedBeforeTheNextStart) {
  std::vector<ProcessSpec> ranks = {rank(0)};
  prepare_error_files(private_dir_, ranks);
  std::ofstream(error_file(0)) << kRecorded;
  prepare_error_files(private_dir_, ranks);
  EXPECT_FALSE(std::filesystem::exists(error_file(0)));
  EXPECT_EQ(root_cause_of(ranks[0], private_dir_, any_time_), "");
}

TEST_F(JobErrorFile, AVariableOutsideThePrivateDirectoryIsNeitherReadNorRemoved) {
  const std::string elsewhere = root_ + "/theirs.json";
  std::ofstream(elsewhere) << kRecorded;
  ProcessSpec spec = rank(0);
  spec.env[1].value = elsewhere;
  std::vector<ProcessSpec> ranks = {spec};
  prepare_error_files(private_dir_, ranks);
  EXPECT_TRUE(std::filesystem::exists(elsewhere));
  EXPECT_EQ(root_cause_of(ranks[0], private_dir_, any_time_), "");
  spec.env[1].value = private_dir_ + "/sub/error-0.json";
  EXPECT_EQ(root_cause_of(spec, private_dir_, any_time_), "");
  EXPECT_EQ(root_cause_of(rank(0), "", any_time_), "") << "a plan without a private directory has no error files";
}

TEST_F(JobErrorFile, ALinkAFifoAHardLinkAndAnOversizedFileAreNotRead) {
  std::vector<ProcessSpec> ranks = {rank(0), rank(1), rank(2), rank(3)};
  prepare_error_files(private_dir_, ranks);
  const std::string target = root_ + "/target.json";
  std::ofstream(target) << kRecorded;
  ASSERT_EQ(::symlink(target.c_str(), error_file(0).c_str()), 0);
  ASSERT_EQ(::mkfifo(error_file(1).c_str(), 0600), 0);  // no writer: a blocking open would hang
  ASSERT_EQ(::link(target.c_str(), error_file(2).c_str()), 0);
  std::string big = std::string(kRecorded);
  big.insert(big.size() - 1, ", \"pad\": \"" + std::string(kMaxErrorFile, 'p') + "\"");
  std::ofstream(error_file(3)) << big;
  for (const ProcessSpec& spec : ranks) {
    EXPECT_EQ(root_cause_of(spec, private_dir_, any_time_), "") << spec.name;
  }
}

TEST_F(JobErrorFile, AFileWrittenBeforeThisStartIsNotRead) {
  std::ofstream(error_file(0)) << kRecorded;
  const struct timespec old[2] = {{1000, 0}, {1000, 0}};  // 1970: written long before
  ASSERT_EQ(::utimensat(AT_FDCWD, error_file(0).c_str(), old, 0), 0);
  const struct timespec start = file_clock_now();
  EXPECT_EQ(root_cause_of(rank(0), private_dir_, start), "");
  std::ofstream(error_file(0)) << kRecorded;  // written again, now
  EXPECT_NE(root_cause_of(rank(0), private_dir_, start), "");
}

// --user: the ranks cannot create files in trainit's directory (0711, its
// own); each file is made for them and handed over, and kept across a
// restart, when trainit may no longer hand files over.
TEST_F(JobErrorFile, ForAnotherUserEachFileIsMadeEmptyAndHandedOverAtEveryStart) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "handing a file to another user needs root";
  }
  constexpr uid_t kJobUid = 4242;
  constexpr gid_t kJobGid = 4243;
  safe_fs::trust_job_user(kJobUid, kJobGid);
  std::vector<ProcessSpec> ranks = {rank(0), rank(1)};
  auto expect_fresh = [&](const char* when) {
    for (unsigned n : {0U, 1U}) {
      struct stat st {};
      ASSERT_EQ(::lstat(error_file(n).c_str(), &st), 0) << n << " " << when;
      EXPECT_TRUE(S_ISREG(st.st_mode));
      EXPECT_EQ(st.st_size, 0) << when;
      EXPECT_EQ(st.st_mode & 0777, 0644u);
      EXPECT_EQ(st.st_uid, kJobUid) << when;
      EXPECT_EQ(st.st_gid, kJobGid) << when;
    }
  };
  prepare_error_files(private_dir_, ranks, true);
  expect_fresh("the first start");
  EXPECT_EQ(root_cause_of(ranks[0], private_dir_, any_time_), "") << "an empty file names nothing";
  std::ofstream(error_file(1)) << kRecorded;  // rank 1 failed; the job restarts
  prepare_error_files(private_dir_, ranks, true);
  expect_fresh("the restart");
  EXPECT_EQ(root_cause_of(ranks[1], private_dir_, any_time_), "") << "the last start's exception is gone";
  safe_fs::forget_job_user();
}

// A link planted where an error file goes is removed, never followed: the
// file it pointed to is untouched.
TEST_F(JobErrorFile, ALinkPlantedWhereAnErrorFileGoesIsReplacedNotFollowed) {
  const std::string victim = private_dir_ + "/../victim";
  std::ofstream(victim) << "precious";
  ASSERT_EQ(::symlink(victim.c_str(), error_file(0).c_str()), 0);
  std::vector<ProcessSpec> ranks = {rank(0)};
  prepare_error_files(private_dir_, ranks, true);
  struct stat st {};
  ASSERT_EQ(::lstat(error_file(0).c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link is gone, a file made in its place";
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious");
}

TEST_F(JobErrorFile, FilesThatCannotBeMadeAreOneWarningAndWhatWasThereStays) {
  test::LogCapture log;
  std::vector<ProcessSpec> ranks = {rank(0), rank(1)};
  ASSERT_EQ(::mkdir(error_file(0).c_str(), 0755), 0);  // a directory where the file goes
  ASSERT_EQ(::mkdir(error_file(1).c_str(), 0755), 0);
  prepare_error_files(private_dir_, ranks, true);
  EXPECT_EQ(log.count("cannot make it for the job's user"), 1u) << log.all();
  EXPECT_TRUE(std::filesystem::is_directory(error_file(0))) << "what was there stays";
}

}  // namespace
}  // namespace trainit
