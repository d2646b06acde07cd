// How a job says why it ended, where a person or the platform looks: the
// cause in one line (host, rank, code, state) in the status file and the
// termination message's file; `trainit status` reading the status file as a
// probe, while the job runs and after; a rank's @record-ed exception in the
// cause; and the verbosity a job mode means. trainit is PID 1 of its own
// namespace, as in a container.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "harness.h"
#include "job_support.h"

namespace trainit::test {
namespace {

using job::Job;
using job::slurp;
using job::template1;
using job::wait_ready;
using job::wait_until;
using job::write_file;

// Rank actions: "ready", wait for DIR/go, rank `failing` exits `code`, the
// others end on SIGTERM.
std::vector<std::string> failing_job(unsigned failing, int code) {
  return {"on-term", "exit", "ready", "wait-file", "go", "exit-if", std::to_string(failing), std::to_string(code),
          "pause"};
}

// `trainit status ARGS` in the test's own namespaces, as `kubectl exec`
// runs it beside PID 1.
Outcome status(std::vector<std::string> args) {
  Spec s;
  s.layout = Layout::kNoNamespace;
  s.args = {"status"};
  s.args.insert(s.args.end(), args.begin(), args.end());
  return run(std::move(s));
}

// The status file's "state", or "" while there is none.
std::string state_of(const std::string& path) {
  static const std::regex kState("\"state\": \"([a-z_]+)\"");
  std::smatch m;
  const std::string text = slurp(path);
  return std::regex_search(text, m, kState) ? m[1].str() : std::string();
}

TEST(TerminationLog, AFailingRankIsNamedWithItsHostRankCodeAndStateInOneLine) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 3)));
  const std::string log = job.path("termination-log");
  ASSERT_TRUE(write_file(log, "stale message of a previous run\n"));
  Trainit t(job.spec({"--grace", "5", "--termination-log", log}, failing_job(1, 3)));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_EQ(wait_ready(t, 3).size(), 3u);
  ASSERT_TRUE(job.release());
  EXPECT_EQ(t.wait(), Exit::code(3)) << t.transcript();
  const std::string line = slurp(log);
  const std::regex expected(
      "host 10.0.0.1 rank 1: proc-rank-1-device-1 \\(pid [0-9]+\\) exited with 3; exit 3 in state "
      "running\n");
  EXPECT_TRUE(std::regex_match(line, expected)) << line << t.transcript();
  // The same line is the status file's cause, and the log's error.
  EXPECT_NE(slurp(job.status()).find(line.substr(0, line.size() - 1)), std::string::npos) << slurp(job.status());
  EXPECT_NE(t.err().find("error: " + line.substr(0, line.find(";"))), std::string::npos) << t.transcript();
}

TEST(TerminationLog, AJobThatEndsWellSaysSoAndAMissingFileIsNotCreated) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 1)));
  const std::string log = job.path("termination-log");
  ASSERT_TRUE(write_file(log, ""));
  Outcome ok = run(job.spec({"--termination-log", log}, {"exit", "0"}), 20s);
  EXPECT_EQ(ok.exit, Exit::code(0)) << ok.transcript;
  EXPECT_EQ(slurp(log), "host 10.0.0.1: every rank exited 0; exit 0\n");
  // One rank: the count agrees.
  EXPECT_NE(ok.err.find("1 rank started"), std::string::npos) << ok.transcript;

  const std::string missing = job.path("no-such-log");
  Outcome quiet = run(job.spec({"--termination-log", missing}, {"exit", "0"}), 20s);
  EXPECT_EQ(quiet.exit, Exit::code(0)) << quiet.transcript;
  EXPECT_FALSE(job::exists(missing));
  EXPECT_EQ(quiet.err.find("termination"), std::string::npos) << quiet.transcript;
}

TEST(TerminationLog, AFifoPlantedThereIsRefusedWithoutBlockingTheExit) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 1)));
  const std::string fifo = job.path("termination-log");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  Outcome r = run(job.spec({"--termination-log", fifo}, {"exit", "4"}), 20s);
  EXPECT_EQ(r.exit, Exit::code(4)) << r.transcript;
  EXPECT_NE(r.err.find("cannot write the termination message to " + fifo + ": a FIFO is there; refused"),
            std::string::npos)
      << r.transcript;
}

TEST(TerminationLog, ARankTableThatNeverCompletesIsNamedWithTheWaitsState) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("initializing", 1)));
  const std::string log = job.path("termination-log");
  ASSERT_TRUE(write_file(log, ""));
  Outcome r = run(job.spec({"--rank-table-timeout", "1", "--termination-log", log}, {"exit", "0"}), 20s);
  EXPECT_EQ(r.exit, Exit::code(75)) << r.transcript;
  const std::regex expected("host ma-job-it5-worker-0: the rank table " + job.table() +
                            " was not complete within 1 s; last seen: .*; exit 75 in state wait_rank_table\n");
  EXPECT_TRUE(std::regex_match(slurp(log), expected)) << slurp(log) << r.transcript;
}

TEST(StatusCommand, ExitsZeroWhileTheJobRunsAndTheJobsCodeOnceItEnded) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  Trainit t(job.spec({"--grace", "5"}, failing_job(1, 7)));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_EQ(wait_ready(t, 2).size(), 2u);
  ASSERT_TRUE(wait_until([&] { return state_of(job.status()) == "running"; })) << t.transcript();

  Outcome running = status({"--status-file", job.status()});
  EXPECT_EQ(running.exit, Exit::code(0)) << running.transcript;
  EXPECT_NE(running.out.find("state   running since "), std::string::npos) << running.out;
  EXPECT_NE(running.out.find("reason  2 ranks started\n"), std::string::npos) << running.out;
  EXPECT_NE(running.out.find("cause   none\n"), std::string::npos) << running.out;
  EXPECT_TRUE(std::regex_search(running.out, std::regex("\nproc-rank-1-device-1 +1 +[0-9]+ +running +-\n")))
      << running.out;

  ASSERT_TRUE(job.release());
  EXPECT_EQ(t.wait(), Exit::code(7)) << t.transcript();
  Outcome ended = status({"--status-file", job.status()});
  EXPECT_EQ(ended.exit, Exit::code(7)) << ended.transcript;
  EXPECT_NE(ended.out.find("state   exit since "), std::string::npos) << ended.out;
  EXPECT_NE(ended.out.find("cause   host 10.0.0.1 rank 1: proc-rank-1-device-1 (pid "), std::string::npos) << ended.out;
  EXPECT_TRUE(std::regex_search(ended.out, std::regex("\nproc-rank-1-device-1 +1 +[0-9]+ +failed +7\n"))) << ended.out;
  Outcome json = status({"--json", "--status-file", job.status()});
  EXPECT_EQ(json.exit, Exit::code(7));
  EXPECT_EQ(json.out, slurp(job.status()));
}

TEST(StatusCommand, WithoutAStatusFileExits66AndReadsTheJobsVariable) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Outcome none = status({"--status-file", dir / "status.json"});
  EXPECT_EQ(none.exit, Exit::code(66)) << none.transcript;
  EXPECT_NE(none.err.find("no status file at " + (dir / "status.json")), std::string::npos) << none.transcript;
  ASSERT_TRUE(write_file(dir / "status.json", "{\"schema\": \"something else\"}"));
  Spec s;
  s.layout = Layout::kNoNamespace;
  s.args = {"status"};
  s.env.push_back("TRAINIT_STATUS_FILE=" + (dir / "status.json"));
  Outcome foreign = run(std::move(s));
  EXPECT_EQ(foreign.exit, Exit::code(65)) << foreign.transcript;
}

// A torchrun rank that fails after writing what @record writes: its
// exception and innermost frame are the job's cause (the e2e test
// torchrun_rank_raising_names_its_exception_as_the_cause_on_every_host.sh
// does the same with PyTorch itself, on two hosts).
TEST(TorchrunErrorFile, AFailingRanksRecordedExceptionIsInTheCause) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string program = dir / "rank.sh";
  ASSERT_TRUE(write_file(program,
                         "#!/bin/sh\n"
                         "[ \"$RANK\" = 1 ] || exec sleep 30\n"
                         "printf '%s' '{\"message\": {\"message\": \"ValueError: bad batch 17\", \"extraInfo\": "
                         "{\"py_callstack\": \"Traceback (most recent call last):\\n  File \\\"/w/train.py\\\", line "
                         "40, in <module>\\n    main()\\n  File \\\"/w/train.py\\\", line 12, in step\\n    raise "
                         "ValueError()\\nValueError: bad batch 17\\n\", \"timestamp\": \"1\"}}}' "
                         "> \"$TORCHELASTIC_ERROR_FILE\"\n"
                         "exit 1\n"));
  ::chmod(program.c_str(), 0755);
  const std::string log = dir / "termination-log";
  ASSERT_TRUE(write_file(log, ""));
  Spec s;
  s.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MA_NUM_GPUS=2",
           "MA_MOUNT_PATH=" + dir.path()};
  s.args = {"--mode",
            "torchrun",
            "--grace",
            "2",
            "--private-dir",
            dir / "private",
            "--status-file",
            dir / "status.json",
            "--termination-log",
            log,
            "--",
            program};
  Trainit t(std::move(s));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(20s), Exit::code(1)) << t.transcript();
  const std::regex expected(
      "host [^ ]+ rank 1: rank-1-local-1 \\(pid [0-9]+\\) exited with 1: ValueError: bad batch 17 at "
      "/w/train.py:12 in step; exit 1 in state running\n");
  EXPECT_TRUE(std::regex_match(slurp(log), expected)) << slurp(log) << t.transcript();
  EXPECT_NE(slurp(dir / "status.json").find("ValueError: bad batch 17 at /w/train.py:12 in step"), std::string::npos);
  EXPECT_NE(t.err().find("ValueError: bad batch 17 at /w/train.py:12 in step"), std::string::npos) << t.transcript();
  struct stat st {};
  ASSERT_EQ(::stat((dir / "private").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the error files' directory is trainit's alone";
}

// --user: the ranks cannot create files in trainit's directory (0711, its
// own); trainit makes each rank's error file for it and hands it over, and
// after a restart (trainit may no longer hand files over) keeps it, reading
// only what this start wrote: rank 1 records an exception in the first
// start only, so the job's cause, at its second failure, names none.
TEST(TorchrunErrorFile, UnderAnotherUserTheFileIsTheRanksAndALastStartsIsNotThisOnes) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  std::string error;
  ASSERT_TRUE(copy_for_other_users(dir, {}, &error)) << error;
  const std::string program = dir / "rank.sh";
  ASSERT_TRUE(write_file(program,
                         "#!/bin/sh\n"
                         "[ \"$RANK\" = 1 ] || exec sleep 30\n"
                         "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
                         "  printf '%s' '{\"message\": {\"message\": \"ValueError: first start\"}}' "
                         "> \"$TORCHELASTIC_ERROR_FILE\" || exit 9\n"
                         "fi\n"
                         "exit 1\n"));
  ::chmod(program.c_str(), 0755);
  const std::string log = dir / "termination-log";
  ASSERT_TRUE(write_file(log, ""));
  Spec s;
  s.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MA_NUM_GPUS=2",
           "MA_MOUNT_PATH=" + dir.path()};
  s.args = {"--mode",
            "torchrun",
            "--user",
            "1000:100",
            "--restart",
            "on-failure",
            "--max-restarts",
            "1",
            "--grace",
            "2",
            "--private-dir",
            dir / "private",
            "--status-file",
            dir / "status.json",
            "--termination-log",
            log,
            "--",
            program};
  Trainit t(std::move(s));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(20s), Exit::code(1)) << t.transcript();
  EXPECT_NE(t.err().find("rank-1-local-1 (pid "), std::string::npos) << t.transcript();
  EXPECT_TRUE(std::regex_search(t.err(), std::regex("rank-1-local-1 \\(pid [0-9]+\\) exited with 1: ValueError: "
                                                    "first start; restarting the job")))
      << "the first start's exception, read from the file the rank's user wrote" << t.transcript();
  const std::regex expected(
      "host [^ ]+ rank 1: rank-1-local-1 \\(pid [0-9]+\\) exited with 1; exit 1 in state running\n");
  EXPECT_TRUE(std::regex_match(slurp(log), expected)) << slurp(log) << t.transcript();
  struct stat st {};
  ASSERT_EQ(::stat((dir / "private/error-1.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u) << "the rank's own file";
}

// In a job mode the levels count from 2 (info: the transitions); a level
// given outright is that level: TRAINIT_VERBOSITY=1 keeps errors and
// warnings only, as --help says.
TEST(JobVerbosity, LevelOneShowsNoInfoLinesAndTheDefaultShowsTheTransitions) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 1)));
  Spec quiet = job.spec({}, {"exit", "0"});
  quiet.env.push_back("TRAINIT_VERBOSITY=1");
  Outcome q = run(quiet, 20s);
  EXPECT_EQ(q.exit, Exit::code(0)) << q.transcript;
  EXPECT_EQ(q.err.find("info:"), std::string::npos) << q.transcript;

  Outcome by_default = run(job.spec({}, {"exit", "0"}), 20s);
  EXPECT_EQ(by_default.exit, Exit::code(0)) << by_default.transcript;
  EXPECT_NE(by_default.err.find("info: spawn -> running"), std::string::npos) << by_default.transcript;
  EXPECT_EQ(by_default.err.find("debug:"), std::string::npos) << by_default.transcript;

  Outcome more = run(job.spec({"-v"}, {"exit", "0"}), 20s);
  EXPECT_EQ(more.exit, Exit::code(0)) << more.transcript;
  EXPECT_NE(more.err.find("debug:"), std::string::npos)
      << "-v is one level more than the mode's default" << more.transcript;
}

// -v takes no value: in `trainit -v 3 -- prog` the program is 3, as --help
// says.
TEST(JobVerbosity, DashVTakesNoValueSoTheWordAfterItIsTheProgram) {
  TRAINIT_REQUIRE_ROOT();
  Spec s;
  s.args = {"-v", "3", "--", "true"};
  Outcome r = run(std::move(s));
  EXPECT_EQ(r.exit, Exit::code(127)) << r.transcript;
  EXPECT_NE(r.err.find("'3'"), std::string::npos) << r.transcript;
  Spec h;
  h.layout = Layout::kNoNamespace;
  h.args = {"--help"};
  Outcome help = run(std::move(h));
  EXPECT_NE(help.out.find("\n  -v                      one level more, repeatable (-vv); takes no value\n"
                          "  --verbosity N           "),
            std::string::npos)
      << help.out;
}

}  // namespace
}  // namespace trainit::test
