// `trainit status`: the status file as a person reads it, as it is with
// --json, and an exit status a probe can use; a missing, foreign or broken
// file is told apart by its own code.
#include "cmd/status_cmd.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/exit_code.h"
#include "os/fs.h"

namespace trainit {
namespace {

constexpr const char* kPath = "/run/trainit/status.json";
constexpr double kSince = 1767614403.25;  // 2026-01-05 12:00:03.25 UTC

std::string running_json() {
  return R"({
  "schema": "trainit.status/v1",
  "state": "running",
  "since": 1767614403.25,
  "mode": "torchrun",
  "host": "ma-job-demo-worker-0",
  "pid": 1,
  "reason": "2 ranks started",
  "cause": null,
  "exit_code": null,
  "ranks": [
    {"name": "rank-0-local-0", "rank": 0, "pid": 12, "state": "running", "exit_code": null},
    {"name": "rank-1-local-1", "rank": 1, "pid": 13, "state": "running", "exit_code": null}
  ]
}
)";
}

std::string ended_json() {
  return R"({"schema": "trainit.status/v1", "state": "exit", "since": 1767614403.25, "mode": "torchrun",
  "host": "w-0", "pid": 1, "reason": "no process is left",
  "cause": "host w-0 rank 1: rank-1-local-1 (pid 13) exited with 1: ValueError: boom at /w/train.py:10 in main; exit 1 in state running",
  "exit_code": 1,
  "ranks": [{"name": "rank-0-local-0", "rank": 0, "pid": 12, "state": "stopped", "exit_code": 143},
            {"name": "rank-1-local-1", "rank": 1, "pid": 13, "state": "failed", "exit_code": 1},
            {"name": "scheduler", "rank": null, "pid": 14, "state": "exited", "exit_code": 0}]})";
}

CommandOutput run(std::vector<const char*> args, const FileSystem& fs, std::vector<const char*> env = {},
                  double now = kSince + 192) {
  args.insert(args.begin(), "status");
  env.push_back(nullptr);
  return status_command(static_cast<int>(args.size()), args.data(), env.data(), fs, now);
}

TEST(StatusCommand, ARunningJobIsShownForAPersonAndExits0) {
  MemoryFileSystem fs;
  fs.add_file(kPath, running_json());
  const CommandOutput out = run({"--status-file", kPath}, fs);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.err, "");
  EXPECT_EQ(out.out,
            "state   running since 2026-01-05 12:00:03 UTC (3 min 12 s ago)\n"
            "reason  2 ranks started\n"
            "job     torchrun on ma-job-demo-worker-0, trainit pid 1\n"
            "cause   none\n"
            "exit    - (not ended)\n"
            "2 ranks:\n"
            "NAME            RANK  PID  STATE    CODE\n"
            "rank-0-local-0  0     12   running  -\n"
            "rank-1-local-1  1     13   running  -\n");
}

// A "since" ahead of this machine's clock (another machine's, or a clock
// set back) is not "0 s ago": it says so.
TEST(StatusCommand, ASinceAheadOfThisClockSaysSoRatherThanZeroSecondsAgo) {
  MemoryFileSystem fs;
  fs.add_file(kPath, running_json());
  const CommandOutput out = run({"--status-file", kPath}, fs, {}, kSince - 5);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.out.find("state   running since 2026-01-05 12:00:03 UTC (5 s ahead of this machine's clock)\n"),
            std::string::npos)
      << out.out;
}

TEST(StatusCommand, AnEndedJobExitsWithItsCodeAndShowsItsCause) {
  MemoryFileSystem fs;
  fs.add_file(kPath, ended_json());
  const CommandOutput out = run({"--status-file", kPath}, fs);
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.out.find("state   exit since 2026-01-05 12:00:03 UTC (3 min 12 s ago)\n"), std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find("cause   host w-0 rank 1: rank-1-local-1 (pid 13) exited with 1: ValueError: boom at "
                         "/w/train.py:10 in main; exit 1 in state running\n"),
            std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find("exit    1\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("rank-1-local-1  1     13   failed   1\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("scheduler       -     14   exited   0\n"), std::string::npos) << out.out;
}

TEST(StatusCommand, JsonIsTheFileAsItIs) {
  MemoryFileSystem fs;
  fs.add_file(kPath, ended_json());
  const CommandOutput out = run({"--json", "--status-file=/run/trainit/status.json"}, fs);
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_EQ(out.out, ended_json());
}

TEST(StatusCommand, ThePathComesFromTheOptionElseTheVariableElseTheDefault) {
  MemoryFileSystem fs;
  fs.add_file("/elsewhere/status.json", ended_json());
  EXPECT_EQ(run({}, fs, {"TRAINIT_STATUS_FILE=/elsewhere/status.json"}).exit_code, 1);
  EXPECT_EQ(run({"--status-file", kPath}, fs, {"TRAINIT_STATUS_FILE=/elsewhere/status.json"}).exit_code,
            exit_code::kNoInput);
  fs.add_file("/tmp/trainit-status-ma-job-demo-worker-3.json", running_json());
  EXPECT_EQ(run({}, fs, {"MA_CURRENT_INSTANCE_NAME=ma-job-demo-worker-3"}).exit_code, 0);
}

TEST(StatusCommand, NoStatusFileExits66NamingThePath) {
  MemoryFileSystem fs;
  const CommandOutput out = run({"--status-file", kPath}, fs);
  EXPECT_EQ(out.exit_code, exit_code::kNoInput);
  EXPECT_EQ(out.out, "");
  EXPECT_NE(out.err.find("trainit: error: status: no status file at /run/trainit/status.json"), std::string::npos)
      << out.err;
}

// A status file that is there but that this user may not read is not "no
// status file": its own code (77) and words.
TEST(StatusCommand, AFileThatCannotBeReadExits77SayingWhyNot66) {
  class Unreadable final : public FileSystem {
   public:
    [[nodiscard]] Result<std::string> read_file(const std::string& path, std::size_t) const override {
      return Error{path + ": Permission denied", EACCES};
    }
    [[nodiscard]] PathKind kind(const std::string&) const override { return PathKind::kOther; }
  } fs;
  const CommandOutput out = run({"--status-file", kPath}, fs);
  EXPECT_EQ(out.exit_code, exit_code::kNoPermission);
  EXPECT_NE(out.err.find("cannot read the status file /run/trainit/status.json: permission denied"), std::string::npos)
      << out.err;
  // Not "it is mode 0640": a directory on the way may be what refuses.
  EXPECT_NE(out.err.find("trainit writes it mode 0640, in directories its user and group may search"),
            std::string::npos)
      << out.err;
  EXPECT_EQ(out.err.find("no status file"), std::string::npos) << out.err;
}

TEST(StatusCommand, AFileThatIsNotAStatusExits65) {
  const std::vector<std::string> broken = {
      "",
      "{\"schema\": \"trainit.status/v1\", \"state\": \"running\"",  // cut
      "[]",
      R"({"schema": "trainit.plan/v1", "state": "running", "since": 1})",
      R"({"schema": "trainit.status/v1", "since": 1})",
      R"({"schema": "trainit.status/v1", "state": "", "since": 1})",
      R"({"schema": "trainit.status/v1", "state": "running"})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": "yesterday"})",
      R"({"schema": "trainit.status/v1", "state": "exit", "since": 1, "exit_code": null})",
      R"({"schema": "trainit.status/v1", "state": "exit", "since": 1, "exit_code": 256})",
      R"({"schema": "trainit.status/v1", "state": "exit", "since": 1, "exit_code": -1})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": 1, "cause": 7})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": 1, "ranks": {}})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": 1, "ranks": [7]})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": 1, "ranks": [{"pid": -4}]})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": 1, "ranks": [{"rank": 1e99}]})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": 1, "pid": 99999999999999999999})",
      // A time no clock gives: before 1970, after 9999 (1.3e68 s overflowed
      // the date's arithmetic).
      R"({"schema": "trainit.status/v1", "state": "running", "since": -1})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": 253402300800})",
      R"({"schema": "trainit.status/v1", "state": "running", "since": 1.3e68})",
  };
  for (const std::string& text : broken) {
    MemoryFileSystem fs;
    fs.add_file(kPath, text);
    const CommandOutput out = run({"--status-file", kPath}, fs);
    EXPECT_EQ(out.exit_code, exit_code::kDataError) << text << "\n" << out.err;
    EXPECT_EQ(out.out, "") << text;
    EXPECT_NE(out.err.find("not a trainit.status/v1 document"), std::string::npos) << out.err;
  }
}

TEST(StatusCommand, ForeignTextIsPrintedOnOneLineWithoutTerminalControls) {
  MemoryFileSystem fs;
  fs.add_file(kPath, R"({"schema": "trainit.status/v1", "state": "running", "since": 1767614403,
    "cause": "line one\nline two \u001b[2J", "ranks": [{"name": "r\u001b]0;x\u0007", "pid": 5, "state": "running"}]})");
  const CommandOutput out = run({"--status-file", kPath}, fs);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.out.find('\x1b'), std::string::npos) << out.out;
  EXPECT_EQ(out.out.find('\x07'), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("cause   line one\\x0aline two \\x1b[2J\n"), std::string::npos) << out.out;
}

TEST(StatusCommand, BadUsageExits64) {
  MemoryFileSystem fs;
  EXPECT_EQ(run({"--jsn"}, fs).exit_code, exit_code::kUsage);
  EXPECT_EQ(run({"--status-file"}, fs).exit_code, exit_code::kUsage);
  EXPECT_EQ(run({"--status-file", "relative.json"}, fs).exit_code, exit_code::kUsage);
  EXPECT_EQ(run({}, fs, {"TRAINIT_STATUS_FILE=relative.json"}).exit_code, exit_code::kUsage);
  const CommandOutput help = run({"--help"}, fs);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: trainit status [--json] [--status-file PATH]"), std::string::npos);
}

TEST(StatusCommand, TimesAreUtcDatesFromTheEpochOnAcrossLeapYears) {
  MemoryFileSystem fs;
  auto since = [&](const char* seconds) {
    fs.add_file(kPath, std::string(R"({"schema": "trainit.status/v1", "state": "running", "since": )") + seconds + "}");
    const std::string out = run({"--status-file", kPath}, fs, {}, 0).out;
    return out.substr(out.find("since ") + 6, 23);
  };
  EXPECT_EQ(since("0"), "1970-01-01 00:00:00 UTC");
  EXPECT_EQ(since("951782400"), "2000-02-29 00:00:00 UTC");
  EXPECT_EQ(since("1709251199.9"), "2024-02-29 23:59:59 UTC");
  EXPECT_EQ(since("4102444800"), "2100-01-01 00:00:00 UTC");
}

TEST(StatusCommand, DurationsReadAsAPersonSaysThem) {
  EXPECT_EQ(duration_text(-3), "0 s");
  EXPECT_EQ(duration_text(42.9), "42 s");
  EXPECT_EQ(duration_text(192), "3 min 12 s");
  EXPECT_EQ(duration_text(2 * 3600 + 5 * 60 + 7), "2 h 5 min");
  EXPECT_EQ(duration_text(3 * 86400 + 4 * 3600 + 1), "3 d 4 h");
}

}  // namespace
}  // namespace trainit
