// What trainit needs from, and passes to, its surroundings: stdin and other
// inherited descriptors, a non-root user, nothing but itself in an empty
// chroot (a static binary, no /proc, no /dev), and what -v says.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness.h"

namespace trainit::test {
namespace {

TEST(Environment, StdinReachesTheChild) {
  TRAINIT_REQUIRE_ROOT();
  // Line by line, through cat...
  Trainit cat({.args = {"--", "cat"}});
  TRAINIT_ASSERT_STARTED(cat);
  ASSERT_TRUE(cat.write_stdin("first line\n"));
  ASSERT_TRUE(cat.wait_line("first line")) << cat.transcript();
  ASSERT_TRUE(cat.write_stdin("second line\n"));
  ASSERT_TRUE(cat.wait_line("second line")) << cat.transcript();
  cat.close_stdin();  // end of file reaches cat too
  EXPECT_EQ(cat.wait(), Exit::code(0)) << cat.transcript();

  // ...and in bulk, through wc.
  Trainit wc({.args = {"--", "wc", "-c"}});
  TRAINIT_ASSERT_STARTED(wc);
  std::string data(1 << 20, 'x');
  ASSERT_TRUE(wc.write_stdin(data));
  wc.close_stdin();
  EXPECT_EQ(wc.wait(), Exit::code(0)) << wc.transcript();
  EXPECT_EQ(wc.out(), std::to_string(data.size()) + "\n");
}

TEST(Environment, WithoutATerminalTheChildHasNoForegroundGroup) {
  TRAINIT_REQUIRE_ROOT();
  Outcome r = run({.args = {"--", helper_path("sigreport")}});
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "tpgid"), "-1") << r.out;
}

TEST(Terminal, ChildBecomesTheForegroundProcessGroup) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"-v", "--", helper_path("sigreport"), "wait"}, .terminal = true});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  std::string out = t.out();
  EXPECT_EQ(field(out, "tpgid"), field(out, "pid")) << out;
  EXPECT_EQ(field(out, "pgid"), field(out, "pid")) << out;
  // Ctrl-C goes to the foreground group, the child's, not through trainit.
  ASSERT_TRUE(t.write_stdin("\x03"));
  ASSERT_TRUE(t.wait_line("signal " + std::to_string(SIGINT))) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_EQ(t.out().find("SIGINT"), std::string::npos) << "Ctrl-C went to trainit" << t.transcript();
}

TEST(Terminal, CtrlCGives130) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"--", "sh", "-c", "echo ready; exec sleep 60"}, .terminal = true});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_TRUE(t.write_stdin("\x03"));
  EXPECT_EQ(t.wait(), Exit::code(128 + SIGINT)) << t.transcript();
}

TEST(Terminal, AChildReadingTheTerminalIsNotStopped) {
  TRAINIT_REQUIRE_ROOT();
  // A background group reading its terminal gets SIGTTIN and stops: the
  // child must own the terminal to read what is typed.
  Trainit t({.args = {"--", "sh", "-c", "echo ready; read line; echo got $line"}, .terminal = true});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_TRUE(t.write_stdin("typed\n"));
  EXPECT_TRUE(t.wait_line("got typed")) << t.transcript();
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
}

TEST(Environment, InheritedDescriptorsPassThroughAndTrainitsOwnDoNot) {
  TRAINIT_REQUIRE_ROOT();
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  // Socket activation style: fd 3 given to trainit reaches the child; the
  // loop's epoll, signalfd, timerfd and pidfds do not.
  Outcome r = run({.args = {"--", helper_path("sigreport")}, .fds = {{fds[1], 3}}});
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "fds"), "0 1 2 3") << r.out;
  r = run({.args = {"--", helper_path("sigreport")}});
  EXPECT_EQ(field(r.out, "fds"), "0 1 2") << r.out;
}

TEST(Environment, RunsAsUid1000AsPid1) {
  TRAINIT_REQUIRE_ROOT();
  // The binaries where uid 1000 can run them, wherever the checkout is.
  TempDir bin;
  std::string error;
  ASSERT_TRUE(copy_for_other_users(bin, {"exitwith", "orphans", "sigreport"}, &error)) << error;
  const Spec user{.program = bin / "trainit", .uid = 1000, .gid = 100};
  auto as_user = [&](std::vector<std::string> args) {
    Spec spec = user;
    spec.args = std::move(args);
    return spec;
  };
  // Exit codes pass through.
  Outcome r = run(as_user({"--", bin / "exitwith", "42"}));
  EXPECT_EQ(r.exit, Exit::code(42)) << r.transcript;
  r = run(as_user({"--", bin / "exitwith", "-s", std::to_string(SIGUSR2)}));
  EXPECT_EQ(r.exit, Exit::code(128 + SIGUSR2)) << r.transcript;
  // Orphans are reaped.
  r = run(as_user({"-w", "--", bin / "orphans", "one"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  std::string orphan = field(r.out, "reaped");
  EXPECT_FALSE(orphan.empty()) << r.transcript;
  EXPECT_EQ(field(r.out, "orphan"), orphan + " ppid 1") << r.transcript;
  EXPECT_NE(r.err.find("reaped zombie process " + orphan + " "), std::string::npos) << r.transcript;
  // Signals are forwarded, and the escalation works.
  Trainit t(as_user({"--grace", "0.2", "--", bin / "sigreport", "wait"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  ASSERT_EQ(t.signal(SIGUSR1), 0);
  EXPECT_TRUE(t.wait_line("signal " + std::to_string(SIGUSR1))) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  Trainit stubborn(as_user({"--grace", "0.2", "--", "sh", "-c", "trap '' TERM; echo ready; exec sleep 60"}));
  TRAINIT_ASSERT_STARTED(stubborn);
  ASSERT_TRUE(stubborn.wait_line("ready")) << stubborn.transcript();
  ASSERT_EQ(stubborn.signal(SIGTERM), 0);
  EXPECT_EQ(stubborn.wait(), Exit::code(128 + SIGKILL)) << stubborn.transcript();
}

TEST(Static, BinaryIsStaticallyLinked) {
  std::string command = "file -L '" + trainit_path() + "'";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) {
    out.append(buf, n);
  }
  int status = ::pclose(pipe);
  if (status != 0 && out.empty()) {
    GTEST_SKIP() << "no `file` command";
  }
  EXPECT_TRUE(out.find("statically linked") != std::string::npos || out.find("static-pie linked") != std::string::npos)
      << out;
  if (kEmulated) {  // the aarch64 build
    EXPECT_NE(out.find("ARM aarch64"), std::string::npos) << out;
  }
}

// GCC's __builtin_cpu_supports() links libgcc's CPU probe, a constructor
// that runs about 12 CPUIDs before main(): in a VM each one traps to the
// hypervisor (3–4 µs each on the development machine), at every start of
// the init and of every program that links the collective core. The
// kernels ask CPUID themselves, once a collective first needs them.
TEST(Static, StartsWithoutLibgccsCpuProbe) {
  std::ifstream in(trainit_path(), std::ios::binary);
  ASSERT_TRUE(in) << trainit_path();
  const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The symbol table is there (the build's binary is not stripped), so a
  // name missing from it is code not linked.
  ASSERT_NE(image.find("__libc_start_main"), std::string::npos) << "no symbol table in " << trainit_path();
  EXPECT_EQ(image.find("__cpu_indicator_init"), std::string::npos);
}

TEST(Static, RunsAStaticProgramInAnEmptyChroot) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(
      "an empty chroot has no emulator: the aarch64 trainit and helper it execs there would need qemu-user inside "
      "it (or binfmt_misc), which an empty root does not have");
  TempDir root;
  namespace fs = std::filesystem;
  fs::copy_file(trainit_path(), root / "trainit");
  fs::copy_file(helper_path("exitwith"), root / "exitwith");
  // Nothing else: no /proc, no /dev, no libraries, no /etc.
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(root.path())) {
    entries.push_back(entry.path().filename());
  }
  ASSERT_EQ(entries.size(), 2u);
  auto in_chroot = [&](std::vector<std::string> args) {
    return Spec{.args = std::move(args), .program = "/trainit", .env = {}, .root = root.path()};
  };
  Outcome r = run(in_chroot({"--", "/exitwith", "42"}));
  EXPECT_EQ(r.exit, Exit::code(42)) << r.transcript;
  EXPECT_EQ(r.err, "");
  r = run(in_chroot({"-v", "--", "/exitwith", "-s", std::to_string(SIGTERM)}));
  EXPECT_EQ(r.exit, Exit::code(128 + SIGTERM)) << r.transcript;
  r = run(in_chroot({"--", "/nothing-here"}));
  EXPECT_EQ(r.exit, Exit::code(127)) << r.transcript;
  // Not PID 1 either (a subreaper, in the test's PID namespace).
  Spec spec = in_chroot({"--", "/exitwith", "3"});
  spec.layout = Layout::kNoNamespace;
  r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(3)) << r.transcript;
}

TEST(Verbosity, DefaultIsSilentOnSuccess) {
  TRAINIT_REQUIRE_ROOT();
  Outcome r = run({.args = {"--", helper_path("exitwith"), "3"}});
  EXPECT_EQ(r.exit, Exit::code(3)) << r.transcript;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
}

TEST(Verbosity, DashVLogsTheSpawnForwardingAndExit) {
  TRAINIT_REQUIRE_ROOT();
  Trainit t({.args = {"-v", "--", helper_path("sigreport"), "wait"}});
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(t.wait_line("ready")) << t.transcript();
  std::string child = field(t.out(), "pid");
  ASSERT_EQ(t.signal(SIGUSR1), 0);
  ASSERT_TRUE(t.wait_line("signal " + std::to_string(SIGUSR1))) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  ASSERT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  std::string err = t.err();
  EXPECT_NE(err.find("trainit: info: spawned '" + helper_path("sigreport") + "' with pid " + child + "\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("trainit: info: forwarded SIGUSR1 to pid " + child + "\n"), std::string::npos) << err;
  EXPECT_NE(err.find("trainit: info: stopping: SIGTERM"), std::string::npos) << err;
  EXPECT_NE(err.find("trainit: info: main child " + child + " exited with 0\n"), std::string::npos) << err;
  for (const auto& l : lines_of(err)) {
    EXPECT_EQ(l.rfind("trainit: info: ", 0), 0u) << "unexpected line at -v: " << l;
  }
}

TEST(Verbosity, TiniVerbosityVariableActsLikeDashV) {
  TRAINIT_REQUIRE_ROOT();
  Spec spec{.args = {"--", helper_path("exitwith"), "-s", std::to_string(SIGHUP)}};
  spec.env.push_back("TINI_VERBOSITY=2");
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(128 + SIGHUP)) << r.transcript;
  EXPECT_NE(r.err.find("trainit: info: spawned '"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" was killed by signal " + std::to_string(SIGHUP) + "\n"), std::string::npos) << r.err;
}

TEST(Verbosity, ZeroKeepsErrorsOnly) {
  TRAINIT_REQUIRE_ROOT();
  Spec spec{.args = {"-w", "--", helper_path("orphans"), "one"}};
  spec.env.push_back("TINI_VERBOSITY=0");
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(r.err, "") << "a warning at verbosity 0";
  spec = Spec{.args = {"--", "trainit-no-such-program"}};
  spec.env.push_back("TINI_VERBOSITY=0");
  r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(127)) << r.transcript;
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kVforkIsFork);
  EXPECT_NE(r.err.find("trainit: error: "), std::string::npos) << r.transcript;
}

}  // namespace
}  // namespace trainit::test
