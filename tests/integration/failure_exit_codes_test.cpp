// trainit's own exit codes (src/base/exit_code.h, README "Exit codes"), one
// test per code not proven elsewhere: 64, 75, 78, 126, 127 and 128+N are in
// exec_mode_exit_code_test.cpp and job_test.cpp; 70 (the loop itself broke)
// has no way in from outside and is proven at the unit level of the fatal
// path's parts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job_support.h"

namespace trainit::test {
namespace {

using job::Job;
using job::template1;
using job::template2;
using job::write_file;

// EX_OSERR: the ranks' log pipes cannot be made (too few descriptors).
TEST(ExitCodes, JobWhoseLogPipesCannotBeMadeExits71NamingThePipe) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 16)));
  // Without the collective arena, whose preflight would take the
  // descriptors first (a pidfd for each of its 16 helpers).
  Spec spec = job.spec({"--coll-arena", "off"}, {"exit", "0"});
  // prlimit execs trainit in its place: PID 1 with at most 20 descriptors.
  spec.args.insert(spec.args.begin(), {"--nofile=20:20", trainit_path()});
  if (kEmulated) {  // prlimit execs trainit itself: through the emulator
    spec.args.insert(spec.args.begin() + 1, kEmulator);
  }
  spec.program = "/usr/bin/prlimit";
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(71)) << r.transcript;
  EXPECT_NE(r.err.find("log pipe"), std::string::npos) << r.transcript;
  EXPECT_NE(r.err.find("Too many open files"), std::string::npos) << r.transcript;
}

// EX_CANTCREAT: a rank's working directory cannot be created (a file is in
// the way of the mount path).
TEST(ExitCodes, JobWhoseWorkingDirectoryCannotBeCreatedExits73StartingNothing) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  ASSERT_TRUE(write_file(job.path("not-a-dir"), "x"));
  Spec spec = job.spec({}, {"record", "exit", "0"});
  spec.env = job.env({"MA_MOUNT_PATH=" + job.path("not-a-dir") + "/ma"});
  Outcome bad = run(spec);
  EXPECT_EQ(bad.exit, Exit::code(73)) << bad.transcript;
  EXPECT_NE(bad.err.find("cannot create directory"), std::string::npos) << bad.transcript;
}

// The directory of a file the job needs (template 2's converted table) is
// no log directory: refused, it stops the job at once, named as what it is.
TEST(ExitCodes, JobWhoseConvertedTablesDirectoryIsRefusedExits73NamingThatDirectory) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template2("completed", 1, 2)));
  const std::string dir = job.mount() + "/rank_table";
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);  // every user may write it, without the sticky bit
  Outcome bad = run(job.spec({}, {"record", "exit", "0"}));
  EXPECT_EQ(bad.exit, Exit::code(73)) << bad.transcript;
  EXPECT_NE(bad.err.find("cannot create directory " + dir + ": "), std::string::npos) << bad.transcript;
  EXPECT_EQ(bad.err.find("log directory"), std::string::npos) << bad.transcript;
  EXPECT_TRUE(job.starts().empty()) << bad.transcript;
}

// EX_IOERR: `trainit plan` cannot write the plan (stdout is /dev/full).
TEST(ExitCodes, PlanThatCannotBeWrittenExits74) {
  int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(full, 0);
  Spec spec;
  spec.layout = Layout::kNoNamespace;
  spec.args = {"plan", "--mode", "exec", "--", "/bin/true"};
  spec.fds = {{full, STDOUT_FILENO}};
  Outcome r = run(spec);
  ::close(full);
  EXPECT_EQ(r.exit, Exit::code(74)) << r.transcript;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.transcript;
}

}  // namespace
}  // namespace trainit::test
