// trainit configured by TRAINIT_* variables alone (issue 14), as a platform
// does it: the image's ENTRYPOINT ["trainit", "--"] untouched, the options in
// the job's environment. trainit is PID 1 of a new PID namespace.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "harness.h"
#include "lifecycle_support.h"

namespace trainit::test {
namespace {

using lifecycle::proc_helper;
using lifecycle::stamp;

// `trainit -- lifecycle DIR REST...`, with `variables` added to the
// environment: no option on the command line.
Spec entrypoint(const TempDir& dir, std::vector<std::string> variables, std::vector<std::string> rest) {
  Spec spec;
  spec.args = {"--", proc_helper(), dir.path()};
  spec.args.insert(spec.args.end(), rest.begin(), rest.end());
  spec.env.insert(spec.env.end(), variables.begin(), variables.end());
  return spec;
}

// SIGTERM to trainit whose child ignores it: the child's SIGKILL (137) comes
// `grace` after the SIGTERM. Returns how long trainit took.
Clock::duration stop_child_that_ignores_sigterm(Spec spec) {
  Trainit t(std::move(spec));
  EXPECT_TRUE(t.started()) << t.error();
  if (!t.started()) {
    return {};
  }
  EXPECT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  const auto sent = Clock::now();
  EXPECT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(5s), Exit::code(137)) << t.transcript();
  return Clock::now() - sent;
}

TEST(Variables, TrainitGraceIsTheGraceBeforeSigkillAsPid1) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const auto took =
      stop_child_that_ignores_sigterm(entrypoint(dir, {"TRAINIT_GRACE=0.3"}, {"serve", "main", "ignore", "0"}));
  std::printf("[ measured ] TRAINIT_GRACE=0.3: SIGTERM to trainit's exit (137) %.1f ms\n", ms(took));
  EXPECT_GE(took, 300ms - 20ms);
  EXPECT_LT(took, 300ms + reaction(500ms)) << "the default grace is 8 s: was TRAINIT_GRACE read?";
}

TEST(Variables, CommandLineGraceWinsOverTrainitGrace) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Spec spec = entrypoint(dir, {"TRAINIT_GRACE=30"}, {"serve", "main", "ignore", "0"});
  spec.args.insert(spec.args.begin(), {"--grace", "0.3"});
  const auto took = stop_child_that_ignores_sigterm(std::move(spec));
  EXPECT_GE(took, 300ms - 20ms);
  EXPECT_LT(took, 300ms + reaction(500ms)) << "TRAINIT_GRACE=30 won over --grace 0.3";
}

// PROGRAM exits; a setsid daemon it left would take 4 s to clean up after a
// SIGTERM. TRAINIT_NO_DRAIN=1: trainit exits at once and leaves the daemon to
// the runtime (here the kernel's SIGKILL as the namespace's PID 1 goes).
TEST(Variables, TrainitNoDrainExitsAtOnceLeavingTheDaemonToTheRuntime) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(entrypoint(dir, {"TRAINIT_NO_DRAIN=1"}, {"daemon", "d", "exit", "4000", "serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("d ready")) << t.transcript();
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  t.close_stdin();  // PROGRAM exits 0
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_LT(t.waited(), reaction(1s)) << "waited as if draining";
  EXPECT_FALSE(stamp(dir, "d.term")) << "TRAINIT_NO_DRAIN=1 still sent the daemon a SIGTERM";
  EXPECT_FALSE(stamp(dir, "d.done")) << "the kernel's SIGKILL should have cut the daemon off";
}

// The same with TRAINIT_NO_DRAIN=0: the default drain, the daemon's cleanup
// waited for.
TEST(Variables, TrainitNoDrainZeroDrainsAsTheDefaultDoes) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(entrypoint(dir, {"TRAINIT_NO_DRAIN=0", "TRAINIT_GRACE=5"},
                       {"daemon", "d", "exit", "200", "serve", "main", "exit", "0"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line_starting("d ready")) << t.transcript();
  ASSERT_TRUE(t.wait_line_starting("main ready")) << t.transcript();
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_TRUE(stamp(dir, "d.term")) << "no drain" << t.transcript();
  EXPECT_TRUE(stamp(dir, "d.done")) << "the daemon's cleanup was cut off" << t.transcript();
}

// trainit's variables are its own, as NOTIFY_SOCKET is: PROGRAM sees none of
// them but the one documented as the ranks' (TRAINIT_COLL_TIMEOUT).
TEST(Variables, TrainitsVariablesDoNotReachTheProgram) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(entrypoint(dir,
                       {"TRAINIT_GRACE=2", "TRAINIT_WARN_ON_REAP=1", "TRAINIT_JOB_SECRET=s3cret",
                        "TINI_KILL_PROCESS_GROUP=1", "TINI_VERBOSITY=1", "TRAINIT_COLL_TIMEOUT=30", "KEPT=1"},
                       {"env"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("env end")) << t.transcript();
  t.close_stdin();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  std::vector<std::string> env;
  for (const std::string& line : t.out_lines()) {
    if (line.starts_with("env ") && line != "env end") {
      env.push_back(line.substr(4));
    }
  }
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                           "TRAINIT_COLL_TIMEOUT=30", "KEPT=1"}))
      << t.transcript();
}

// A bad value is exit 64 before anything starts, the one-line error naming
// the variable and the value.
TEST(Variables, BadValueExits64NamingTheVariableAndStartsNothing) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string marker = dir / "spawned";
  for (const std::string variable :
       {"TRAINIT_GRACE=soon", "TRAINIT_NO_DRAIN=maybe", "TRAINIT_EXIT_ZERO=143,256", "TRAINIT_MODE=horovod"}) {
    Spec spec;
    spec.args = {"--", "sh", "-c", "touch " + marker};
    spec.env.push_back(variable);
    Outcome r = run(spec);
    EXPECT_EQ(r.exit, Exit::code(64)) << variable << r.transcript;
    auto lines = lines_of(r.err);
    ASSERT_FALSE(lines.empty()) << variable;
    const std::string name = variable.substr(0, variable.find('='));
    const std::string value = variable.substr(variable.find('=') + 1);
    std::string expected = "trainit: error: ";
    expected.append(name).append("=\"").append(value).append("\": ");
    EXPECT_EQ(lines[0].rfind(expected, 0), 0u) << r.transcript;
    EXPECT_FALSE(std::filesystem::exists(marker)) << variable << " spawned the command";
  }
}

// A TRAINIT_* typo is a warning at the default verbosity; the job runs.
TEST(Variables, UnknownTrainitVariableIsWarnedAboutAndTheProgramRuns) {
  TRAINIT_REQUIRE_ROOT();
  Spec spec;
  spec.args = {"--", "sh", "-c", "exit 3"};
  spec.env.push_back("TRAINIT_GRCAE=2");
  spec.env.push_back("TRAINIT_JOB_SECRET=s3cret");  // documented: no warning
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(3)) << r.transcript;
  EXPECT_EQ(lines_of(r.err),
            (std::vector<std::string>{"trainit: warning: TRAINIT_GRCAE is not one of trainit's variables (trainit "
                                      "--help lists them): ignored; did you mean TRAINIT_GRACE?"}))
      << r.transcript;
}

}  // namespace
}  // namespace trainit::test
