// Exec mode's exit code, as PID 1: the child's code, 128+N for a death by
// signal N, -e remaps, 127/126 for a program that cannot run, 64 for bad usage.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "harness.h"

namespace trainit::test {
namespace {

Spec exec(std::vector<std::string> args) {
  Spec spec;
  spec.args = std::move(args);
  return spec;
}

TEST(ExecMode, EveryExitCodeFrom0To255PassesThrough) {
  TRAINIT_REQUIRE_ROOT();
  // Emulated, one start has taken past 10 s beside the 20,000-orphan storm
  // (Reaping.*) on a slow day: there 60 s a run to call it a hang.
  for (int code = 0; code <= 255; ++code) {
    Outcome r = run(exec({"--", helper_path("exitwith"), std::to_string(code)}), kEmulated ? 60s : kTimeout);
    ASSERT_EQ(r.exit, Exit::code(code)) << r.transcript;
    EXPECT_EQ(r.err, "") << "code " << code;
  }
}

// Socket activation through trainit: the descriptors pass as they are, and
// a LISTEN_PID that named trainit names PROGRAM, whose sd_listen_fds()
// checks it (a restart's PROGRAM too); one that named another process stays.
TEST(ExecMode, SocketActivationsListenPidNamesProgramInsteadOfTrainit) {
  TRAINIT_REQUIRE_ROOT();
  Spec spec = exec({"--", "/bin/sh", "-c", "echo \"$LISTEN_PID $$ $LISTEN_FDS\""});
  spec.env.push_back("LISTEN_FDS=1");
  spec.env.push_back("LISTEN_PID=1");  // trainit: PID 1 of its namespace
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  const auto words = lines_of(r.out);
  ASSERT_EQ(words.size(), 1U) << r.transcript;
  const auto space = words[0].find(' ');
  EXPECT_EQ(words[0].substr(0, space), words[0].substr(space + 1, words[0].rfind(' ') - space - 1)) << r.out;
  EXPECT_EQ(words[0].substr(words[0].rfind(' ') + 1), "1") << r.out;

  spec.env.back() = "LISTEN_PID=4242";  // not trainit's: not for PROGRAM either
  r = run(spec);
  EXPECT_EQ(r.out.rfind("4242 ", 0), 0U) << r.out;
}

TEST(ExecMode, ExitCodeOptionRemapsTheNamedCodesOnly) {
  TRAINIT_REQUIRE_ROOT();
  const std::string exitwith = helper_path("exitwith");
  Outcome r = run(exec({"-e", "3", "--", exitwith, "3"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  r = run(exec({"-e", "3", "--", exitwith, "4"}));
  EXPECT_EQ(r.exit, Exit::code(4)) << r.transcript;
  r = run(exec({"-e", "3", "--", exitwith, "0"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  // Repeated, and attached to the flag.
  for (const char* code : {"3", "4"}) {
    r = run(exec({"-e", "3", "-e4", "--", exitwith, code}));
    EXPECT_EQ(r.exit, Exit::code(0)) << "code " << code << r.transcript;
  }
  r = run(exec({"-e", "3", "-e4", "--", exitwith, "5"}));
  EXPECT_EQ(r.exit, Exit::code(5)) << r.transcript;
  // 128+N codes from a death by signal remap too, as in tini.
  r = run(exec({"-e", "143", "--", exitwith, "-s", "15"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  r = run(exec({"-e", "255", "--", exitwith, "255"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
}

TEST(ExecMode, ChildKilledBySigkillGives137) {
  TRAINIT_REQUIRE_ROOT();
  Outcome r = run(exec({"--", helper_path("exitwith"), "-s", "9"}));
  EXPECT_EQ(r.exit, Exit::code(137)) << r.transcript;
  // A shell that SIGKILLs itself, as in the wild.
  r = run(exec({"--", "sh", "-c", "kill -KILL $$"}));
  EXPECT_EQ(r.exit, Exit::code(137)) << r.transcript;
}

TEST(ExecMode, ChildDeathBySignalNGives128PlusN) {
  TRAINIT_REQUIRE_ROOT();
  // Core-dumping signals included: the code does not depend on the core flag.
  for (int signo : {SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGABRT, SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,
                    SIGXCPU, SIGSYS, SIGRTMIN, highest_signal()}) {
    Outcome r = run(exec({"--", helper_path("exitwith"), "-s", std::to_string(signo)}));
    EXPECT_EQ(r.exit, Exit::code(128 + signo)) << "signal " << signo << r.transcript;
  }
}

TEST(ExecMode, MissingProgramGives127WithOneLineNamingIt) {
  TRAINIT_REQUIRE_ROOT();
  for (const std::string& program : {std::string("trainit-no-such-program"), std::string("/nonexistent/dir/program")}) {
    Outcome r = run(exec({"--", program, "arg"}));
    EXPECT_EQ(r.exit, Exit::code(127)) << r.transcript;
    if (kEmulated) {
      continue;
    }
    auto lines = lines_of(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.transcript;
    EXPECT_NE(lines[0].find(program), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("No such file or directory"), std::string::npos) << lines[0];
    EXPECT_EQ(r.out, "");
  }
  // The exit codes held; the one line comes from spawn.
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kVforkIsFork);
}

// Most pods run ENTRYPOINT ["trainit", "--"]: exec mode writes how PROGRAM
// ended to the termination message too, when that file is there, with
// trainit's own exit code (after -e); a missing file is not created.
TEST(ExecMode, TheTerminationMessageSaysHowProgramEndedWithTrainitsCode) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string log = dir / "termination-log";
  const std::string exitwith = helper_path("exitwith");
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string line;
  };
  const std::vector<Case> cases = {
      {{"--", exitwith, "3"}, 3, "' \\(pid [0-9]+\\) exited with 3; exit 3\n"},
      {{"-e", "3", "--", exitwith, "3"}, 0, "' \\(pid [0-9]+\\) exited with 3; exit 0\n"},
      {{"--", exitwith, "-s", "11"}, 139, "' \\(pid [0-9]+\\) was killed by SIGSEGV; exit 139\n"},
  };
  for (const Case& c : cases) {
    std::ofstream(log) << "stale\n";
    std::vector<std::string> args = {"--termination-log", log};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Outcome r = run(exec(args));
    EXPECT_EQ(r.exit, Exit::code(c.code)) << r.transcript;
    std::ifstream in(log);
    const std::string line{std::istreambuf_iterator<char>(in), {}};
    EXPECT_TRUE(std::regex_match(line, std::regex("'" + exitwith + c.line))) << line;
  }
  std::ofstream(log) << "stale\n";
  Outcome missing = run(exec({"--termination-log", log, "--", "trainit-no-such-program"}));
  EXPECT_EQ(missing.exit, Exit::code(127)) << missing.transcript;
  std::ifstream in(log);
  const std::string line{std::istreambuf_iterator<char>(in), {}};
  EXPECT_NE(line.find("trainit-no-such-program"), std::string::npos) << line;
  EXPECT_NE(line.find("; exit 127\n"), std::string::npos) << line;
  std::filesystem::remove(log);
  EXPECT_EQ(run(exec({"--termination-log", log, "--", exitwith, "0"})).exit, Exit::code(0));
  EXPECT_FALSE(std::filesystem::exists(log)) << "a missing file is not created";
}

TEST(ExecMode, NonExecutableFileGives126WithOneLineNamingIt) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string script = dir / "not-executable";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  ::chmod(script.c_str(), 0644);
  // A directory cannot be executed either.
  for (const std::string& program : {script, dir.path()}) {
    Outcome r = run(exec({"--", program}));
    EXPECT_EQ(r.exit, Exit::code(126)) << r.transcript;
    if (kEmulated) {
      continue;
    }
    auto lines = lines_of(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.transcript;
    EXPECT_NE(lines[0].find("'" + program + "'"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("Permission denied"), std::string::npos) << lines[0];
  }
  // The exit codes held; the one line comes from spawn.
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kVforkIsFork);
}

TEST(ExecMode, BadUsageExits64WithOneErrorLineAndTheSynopsisAndSpawnsNothing) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string marker = dir / "spawned";
  const std::vector<std::string> command = {"sh", "-c", "touch " + marker};
  auto with_command = [&](std::vector<std::string> args) {
    args.insert(args.end(), command.begin(), command.end());
    return args;
  };
  const std::vector<std::vector<std::string>> cases = {
      with_command({"--bogus", "--"}),
      with_command({"-z", "--"}),
      {},
      {"-v"},
      {"--"},
      {"-g", "--"},
      with_command({"-p", "SIGFOO", "--"}),
      with_command({"-p", "99", "--"}),
      with_command({"-p", "0", "--"}),
      with_command({"-e", "256", "--"}),
      with_command({"-e", "-1", "--"}),
      with_command({"-e", "x", "--"}),
      with_command({"-e1x", "--"}),
      with_command({"--grace", "x", "--"}),
      with_command({"--grace=-1", "--"}),
      with_command({"--grace", "1s", "--"}),
      {"--grace"},
      {"-e"},
      {"-p"},
  };
  for (const auto& args : cases) {
    std::string shown;
    for (const auto& a : args) {
      shown += " '" + a + "'";
    }
    Outcome r = run(exec(args));
    EXPECT_EQ(r.exit, Exit::code(64)) << "trainit" << shown << r.transcript;
    auto lines = lines_of(r.err);
    ASSERT_FALSE(lines.empty()) << "trainit" << shown;
    EXPECT_EQ(lines[0].rfind("trainit: error: ", 0), 0u) << "trainit" << shown << r.transcript;
    // The synopsis and where the rest is, not --help's 180 lines over the error.
    EXPECT_NE(r.err.find("Usage: trainit"), std::string::npos) << "trainit" << shown << r.transcript;
    EXPECT_NE(r.err.find("trainit --help"), std::string::npos) << "trainit" << shown << r.transcript;
    EXPECT_LE(lines.size(), 5U) << "trainit" << shown << r.transcript;
    EXPECT_EQ(r.out, "") << "trainit" << shown;
    EXPECT_FALSE(std::filesystem::exists(marker)) << "trainit" << shown << " spawned its command";
  }
  // The same command with good flags does run: the marker test is sound.
  Outcome r = run(exec(with_command({"-e", "255", "-p", "SIGKILL", "--grace", "0.5", "--"})));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_TRUE(std::filesystem::exists(marker));
}

TEST(ExecMode, HelpVersionAndLicenseGoToStdoutAndExit0) {
  TRAINIT_REQUIRE_ROOT();
  Outcome r = run(exec({"-h"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(r.out.rfind("Usage: trainit", 0), 0u) << r.transcript;
  r = run(exec({"--version"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(r.out.rfind("trainit version ", 0), 0u) << r.transcript;
  r = run(exec({"-l"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_NE(r.out.find("License"), std::string::npos) << r.transcript;
}

}  // namespace
}  // namespace trainit::test
