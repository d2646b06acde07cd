// trainit as PID 1 of a new PID namespace that still sees the host's /proc
// (`unshare --pid --fork` without --mount-proc): the pids listed there are
// not ours, so the stop must not walk them; kill(-1) in our own namespace
// reaches the daemon instead.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "emulation.h"

namespace {

TEST(HostProc, Pid1SeeingTheHostsProcStillStopsASetsidDaemonOnDrain) {
  char dir[] = "/tmp/trainit-hostproc-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string marker = std::string(dir) + "/cleaned";
  const std::string ready = std::string(dir) + "/ready";
  const std::string script = std::string(dir) + "/job.sh";
  ASSERT_EQ(::mkfifo(ready.c_str(), 0600), 0);
  // PROGRAM exits (and the drain begins) only once the daemon has set its
  // trap and said so through the fifo; the daemon's loop is the daemon.
  std::ofstream(script) << "setsid sh -c 'trap \"echo done > " << marker << "; exit 0\" TERM; echo > " << ready
                        << "; while :; do sleep 0.05; done' &\nread line < " << ready << "\nexit 0\n";
  const std::string command = "timeout -s KILL 20 unshare --pid --fork " +
                              (trainit::test::kEmulated ? trainit::test::kEmulator + " " : "") +
                              std::string(TRAINIT_BIN) + " --grace 5 -- sh " + script;
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << command;
  std::ifstream in(marker);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "done") << "the setsid daemon never got SIGTERM";
  ::unlink(marker.c_str());
  ::unlink(ready.c_str());
  ::unlink(script.c_str());
  ::rmdir(dir);
}

}  // namespace
