// The exit-code table's pieces below init/: a reaped status as a code, and
// the code each kind of spawn failure calls for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "base/exit_code.h"
#include "emulation.h"
#include "proc/spawn.h"

namespace trainit {
namespace {

TEST(ExitCode, ExitedStatusIsItsCodeAndASignalIs128PlusIt) {
  siginfo_t exited{};
  exited.si_code = CLD_EXITED;
  exited.si_status = 7;
  EXPECT_EQ(exit_code::of(exited), 7);
  siginfo_t killed{};
  killed.si_code = CLD_KILLED;
  killed.si_status = SIGKILL;
  EXPECT_EQ(exit_code::of(killed), 137);
}

TEST(ExitCode, SpawnIntoAMissingWorkingDirectoryIs71NotNotFound) {
  TRAINIT_SKIP_UNDER_EMULATION(trainit::test::emulation::kVforkIsFork);
  SpawnOptions o;
  o.argv = {"/bin/true"};
  o.cwd = "/nonexistent/trainit-exit-code-test";
  auto r = spawn(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().exit_code, exit_code::kOsError) << r.error().message;
  EXPECT_NE(r.error().message.find("change directory"), std::string::npos) << r.error().message;
}

TEST(ExitCode, MissingProgramIs127AndAFileThatCannotRunIs126) {
  TRAINIT_SKIP_UNDER_EMULATION(trainit::test::emulation::kVforkIsFork);
  SpawnOptions missing;
  missing.argv = {"/nonexistent/trainit-program"};
  auto r = spawn(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().exit_code, exit_code::kNotFound);
  char path[] = "/tmp/trainit-not-executable-XXXXXX";
  const int fd = ::mkstemp(path);  // mode 0600: no execute bit
  ASSERT_GE(fd, 0);
  ::close(fd);
  SpawnOptions denied;
  denied.argv = {path};
  auto d = spawn(denied);
  ::unlink(path);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().exit_code, exit_code::kCannotExecute);
}

}  // namespace
}  // namespace trainit
