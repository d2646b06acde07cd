// --preflight devices as a real PID 1 (init/job/device_preflight.h): before any
// rank starts, one trainit-device-check per local device, over the fake
// device (TRAINIT_COLL_BACKEND = libtrainit_coll_fakedev.so) whose faults
// TRAINIT_FAKEDEV_FAULT injects, and over the Ascend plugin on the mock
// AscendCL (MOCK_ACL_FAULT): a device that fails, hangs or sums wrong ends
// the job with 79, one line naming the device, the host and the step, the
// same cause in the status file, no rank started and nothing left.
#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "emulation.h"
#include "harness.h"
#include "job_support.h"

namespace trainit::test {
namespace {

using job::Job;
using job::slurp;
using job::template1;
using job::write_file;

constexpr std::string_view kHost = job::kHostIp;  // a template-1 table names the host by its server_id

#define TRAINIT_REQUIRE_DEVICE_CHECK()                                                               \
  do {                                                                                               \
    TRAINIT_REQUIRE_ROOT();                                                                          \
    TRAINIT_SKIP_UNDER_EMULATION("trainit execs trainit-device-check, a dynamic program, directly"); \
  } while (0)

// An Ascend job of `devices` devices on the fake device, each rank
// recording its start; `fault` is TRAINIT_FAKEDEV_FAULT (empty: none).
Spec preflight_spec(const Job& job, unsigned devices, const std::string& fault,
                    std::vector<std::string> args = {"--preflight", "devices", "--preflight-timeout", "2"}) {
  EXPECT_TRUE(write_file(job.table(), template1("completed", devices)));
  Spec s = job.spec(std::move(args), {"record", "exit", "0"});
  s.env.push_back(std::string("TRAINIT_COLL_BACKEND=") + TRAINIT_FAKEDEV_PLUGIN);
  if (!fault.empty()) {
    s.env.push_back("TRAINIT_FAKEDEV_FAULT=" + fault);
  }
  return s;
}

// The one line PID 1 logged for the failure, and the status file's cause.
void expect_failure_named(const Job& job, const Outcome& r, const std::string& line) {
  EXPECT_EQ(r.exit, Exit::code(79)) << r.transcript;
  const std::string where = "host " + std::string(kHost) + ": " + line;
  EXPECT_NE(r.err.find(where), std::string::npos) << "wanted: " << where << r.transcript;
  const std::string status = slurp(job.status());
  EXPECT_NE(status.find(where), std::string::npos) << status;
  EXPECT_NE(status.find("exit 79 in state spawn"), std::string::npos) << status;
  EXPECT_TRUE(job.starts().empty()) << "a rank started" << r.transcript;
}

TEST(DevicePreflight, HealthyDevicesPassAndThenTheRanksRunAndTheJobSucceeds) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Outcome r = run(preflight_spec(job, 3, ""));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_NE(r.err.find("device preflight: 3 devices passed on backend " + std::string(TRAINIT_FAKEDEV_PLUGIN)),
            std::string::npos)
      << r.transcript;
  EXPECT_EQ(job.starts().size(), 3U) << r.transcript;
}

TEST(DevicePreflight, ADeviceThatCannotOpenFailsTheJobWith79BeforeAnyRankStarts) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Outcome r = run(preflight_spec(job, 4, "2:fail"));
  expect_failure_named(job, r, "device preflight failed: device 2: open: backend ");
  EXPECT_NE(r.err.find("no device or no driver (-ENODEV)"), std::string::npos) << r.transcript;
  EXPECT_LT(r.elapsed, 2s) << "a device's own failure ends the preflight at once, not at its bound";
}

TEST(DevicePreflight, ADeviceThatHangsIsKilledAtTheBoundAndFailsTheJobWith79NamingItsStep) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Outcome r = run(preflight_spec(job, 3, "1:hang"));
  expect_failure_named(job, r, "device preflight failed: device 1: hung in step allreduce after 2.0 s");
  EXPECT_EQ(r.err.find("device 0:"), std::string::npos) << "the devices that waited for it are not blamed";
  EXPECT_LT(r.elapsed, 6s) << r.transcript;
}

TEST(DevicePreflight, ADeviceThatSumsWrongFailsTheJobWith79InTheCheckStep) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Outcome r = run(preflight_spec(job, 2, "1:wrong"));
  expect_failure_named(job, r, "device preflight failed: device 1: check: wrong ");
  EXPECT_NE(r.err.find("(alone, this device sums wrong too: "), std::string::npos) << r.transcript;
}

TEST(DevicePreflight, TorchrunWorkersDevicesAreTheirLocalRanks) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  TempDir dir;
  Spec s;
  s.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MA_NUM_GPUS=3",
           "MA_MOUNT_PATH=" + dir.path(), std::string("TRAINIT_COLL_BACKEND=") + TRAINIT_FAKEDEV_PLUGIN,
           "TRAINIT_FAKEDEV_FAULT=1:fail"};
  s.args = {"--mode",
            "torchrun",
            "--status-file",
            dir / "status.json",
            "--preflight",
            "devices",
            "--",
            "/bin/sh",
            "-c",
            "touch " + (dir / "started.") + "$RANK"};
  Outcome r = run(s);
  EXPECT_EQ(r.exit, Exit::code(79)) << r.transcript;
  EXPECT_NE(r.err.find("device preflight failed: device 1: open: "), std::string::npos) << r.transcript;
  for (const char* rank : {"0", "1", "2"}) {
    EXPECT_FALSE(job::exists(dir / (std::string("started.") + rank))) << "rank " << rank << " started";
  }
}

// The pids of the processes whose environment holds `variable` ("NAME=value").
std::vector<std::string> processes_with(const std::string& variable) {
  std::vector<std::string> pids;
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(proc)) {
      const std::string environ = slurp(std::string("/proc/") + e->d_name + "/environ");
      if (environ.find(variable + '\0') != std::string::npos) {
        pids.push_back(e->d_name);
      }
    }
    ::closedir(proc);
  }
  return pids;
}

// PID 1's end kills what is left in its namespace anyway: here trainit is no
// PID 1, so a check it did not kill and reap would outlive it.
TEST(DevicePreflight, AHungCheckIsKilledAndReapedSoNothingOutlivesTrainit) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Spec s = preflight_spec(job, 2, "0:hang", {"--preflight", "devices", "--preflight-timeout", "1"});
  s.layout = Layout::kNoNamespace;
  const std::string mark = "DEVICE_PREFLIGHT_TEST_MARK=" + job.root();
  s.env.push_back(mark);
  Outcome r = run(s);
  EXPECT_EQ(r.exit, Exit::code(79)) << r.transcript;
  EXPECT_NE(r.err.find("device 0: hung in step allreduce after 1.0 s"), std::string::npos) << r.transcript;
  const std::vector<std::string> left = processes_with(mark);
  EXPECT_TRUE(left.empty()) << "still running: pid " << (left.empty() ? "" : left[0]);
}

// --- The Ascend plugin over the mock AscendCL (tests/coll/mock_ascendcl) ---

// An Ascend job whose checks load libtrainit_coll_ascend.so, which finds the
// mock libascendcl.so on LD_LIBRARY_PATH; `fault` is MOCK_ACL_FAULT.
Spec ascend_spec(const Job& job, unsigned devices, const std::string& fault) {
  Spec s = preflight_spec(job, devices, "");
  std::string mock = TRAINIT_MOCK_ACL;
  s.env.back() = std::string("TRAINIT_COLL_BACKEND=") + TRAINIT_ASCEND_PLUGIN;
  s.env.push_back("LD_LIBRARY_PATH=" + mock.substr(0, mock.rfind('/')));
  s.env.push_back("MOCK_ACL_DIR=" + job.path("acl"));
  if (!fault.empty()) {
    s.env.push_back("MOCK_ACL_FAULT=" + fault);
  }
  return s;
}

TEST(DevicePreflightAscend, HealthyNpusOnTheMockAscendClPassAndThenTheRanksRun) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Outcome r = run(ascend_spec(job, 3, ""));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_NE(r.err.find("device preflight: 3 devices passed on backend " + std::string(TRAINIT_ASCEND_PLUGIN)),
            std::string::npos)
      << r.transcript;
  EXPECT_EQ(job.starts().size(), 3U) << r.transcript;
}

TEST(DevicePreflightAscend, AnNpuThatCannotBeSetUpFailsTheJobWith79InTheOpenStep) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Outcome r = run(ascend_spec(job, 3, "1:fail"));
  expect_failure_named(job, r, "device preflight failed: device 1: open: backend ");
}

TEST(DevicePreflightAscend, AHungNpuIsKilledAtTheBoundAndFailsTheJobWith79) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Outcome r = run(ascend_spec(job, 3, "2:hang"));
  expect_failure_named(job, r, "device preflight failed: device 2: hung in step allreduce after 2.0 s");
  EXPECT_LT(r.elapsed, 6s) << r.transcript;
}

TEST(DevicePreflightAscend, AnNpuThatSumsWrongFailsTheJobWith79) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  Job job;
  Outcome r = run(ascend_spec(job, 2, "0:wrong"));
  expect_failure_named(job, r, "device preflight failed: device 0: check: wrong ");
  EXPECT_NE(r.err.find("(this device reads its own pattern back wrong: "), std::string::npos) << r.transcript;
}

TEST(DevicePreflight, AMissingDeviceCheckFailsTheJobWith78NamingWhereItLooked) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  Outcome r = run(preflight_spec(job, 2, "", {"--preflight", "devices", "--device-check", "/nonexistent/check"}));
  EXPECT_EQ(r.exit, Exit::code(78)) << r.transcript;
  EXPECT_NE(r.err.find("--device-check /nonexistent/check: No such file or directory"), std::string::npos)
      << r.transcript;
  EXPECT_TRUE(job.starts().empty()) << r.transcript;
}

TEST(DevicePreflight, ACheckThatFloodsItsOutputIsStillKilledAtTheBound) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  // A check (or the driver it loads) that never stops writing: PID 1 reads
  // its pipes a bounded amount at a time and still keeps the bound.
  const std::string check = job.root() + "/flooding-check";
  ASSERT_TRUE(write_file(check, "#!/bin/sh\nexec yes 'driver: retrying' >&2\n"));
  ASSERT_EQ(::chmod(check.c_str(), 0755), 0);
  Outcome r =
      run(preflight_spec(job, 2, "", {"--preflight", "devices", "--preflight-timeout", "1", "--device-check", check}));
  expect_failure_named(job, r, "device preflight failed: device 0: hung in step start after 1.0 s");
  EXPECT_LT(r.elapsed, 5s) << r.transcript;
}

// --- Nothing of the preflight waits: it runs from trainit's loop ------------

// A --device-check that marks DIR/check-<pid> as it starts, then is the real
// check.
std::string marking_check(const Job& job) {
  const std::string real = trainit_path().substr(0, trainit_path().rfind('/') + 1) + "trainit-device-check";
  const std::string path = job.path("marking-check");
  EXPECT_TRUE(write_file(path, "#!/bin/sh\n: > '" + job.root() + "/check-'$$\nexec '" + real + "' \"$@\"\n"));
  EXPECT_EQ(::chmod(path.c_str(), 0755), 0);
  return path;
}

size_t checks_started(const Job& job) {
  size_t n = 0;
  if (DIR* dir = ::opendir(job.root().c_str())) {
    while (const dirent* e = ::readdir(dir)) {
      n += std::string_view(e->d_name).starts_with("check-") ? 1 : 0;
    }
    ::closedir(dir);
  }
  return n;
}

class SignalDuringTheDevicePreflight : public ::testing::TestWithParam<int> {};

// A stop during a hung device's check ends the job at once with 128+S (not
// at the bound, with 79); the status file is final and names the signal.
// SIGHUP stops nothing: the preflight goes on to its bound.
TEST_P(SignalDuringTheDevicePreflight, StopsTheJobAtOnceOrForSighupLetsItGoOn) {
  TRAINIT_REQUIRE_DEVICE_CHECK();
  const int signo = GetParam();
  const bool stop = signo != SIGHUP;
  Job job;
  Spec s = preflight_spec(
      job, 2, "0:hang",
      {"--preflight", "devices", "--preflight-timeout", stop ? "60" : "2", "--device-check", marking_check(job)});
  Trainit t(s);
  ASSERT_TRUE(t.started()) << t.error();
  ASSERT_TRUE(job::wait_until([&] { return checks_started(job) == 2; })) << t.transcript();
  // The working device's check waits for the hung one in the meeting.
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(t.signal(signo), 0);
  const auto sent = Clock::now();
  const Exit exit = t.wait(10s);
  const auto took = Clock::now() - sent;
  if (!stop) {
    EXPECT_EQ(exit, Exit::code(79)) << t.transcript();
    EXPECT_NE(t.err().find("device 0: hung in step allreduce after 2.0 s"), std::string::npos) << t.transcript();
    return;
  }
  EXPECT_EQ(exit, Exit::code(128 + signo)) << t.transcript();
  EXPECT_LT(took, 1s) << "the stop waited for the preflight" << t.transcript();
  const std::string status = slurp(job.status());
  EXPECT_NE(status.find("\"state\": \"exit\""), std::string::npos) << status;
  EXPECT_NE(status.find(fmt::format("\"exit_code\": {}", 128 + signo)), std::string::npos) << status;
  EXPECT_NE(status.find(fmt::format("trainit got {}; exit {} in state spawn", signo == SIGTERM ? "SIGTERM" : "SIGINT",
                                    128 + signo)),
            std::string::npos)
      << status;
  EXPECT_TRUE(job.starts().empty()) << "a rank started" << t.transcript();
}

INSTANTIATE_TEST_SUITE_P(Signals, SignalDuringTheDevicePreflight, ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGTERM  ? "SIGTERM"
                                              : info.param == SIGINT ? "SIGINT"
                                                                     : "SIGHUP");
                         });

// A check that moves itself into another process group (that of a child it
// forked) and hangs: a signal to its own group reaches nothing, yet it is
// killed at the bound (by its pidfd), and the stop sweeps what it forked.
TEST(DevicePreflight, ACheckThatLeavesItsProcessGroupAndHangsIsStillKilledAtTheBoundAndWhatItForkedIsSwept) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);  // outside a PID namespace trainit must be a subreaper
  Job job;
  const std::string check = job.path("group-leaving-check");
  ASSERT_TRUE(write_file(check, R"(#!/usr/bin/python3
import os, time
child = os.fork()
if child == 0:
    time.sleep(1000)
    os._exit(0)
os.setpgid(child, child)
os.setpgid(0, child)
time.sleep(1000)
)"));
  ASSERT_EQ(::chmod(check.c_str(), 0755), 0);
  Spec s = preflight_spec(job, 1, "", {"--preflight", "devices", "--preflight-timeout", "1", "--device-check", check});
  s.layout = Layout::kNoNamespace;  // no PID namespace to end it all: trainit must
  const std::string mark = "DEVICE_PREFLIGHT_TEST_MARK=" + job.root();
  s.env.push_back(mark);
  Outcome r = run(s, 20s);
  EXPECT_EQ(r.exit, Exit::code(79)) << r.transcript;
  EXPECT_NE(r.err.find("device 0: hung in step start after 1.0 s"), std::string::npos) << r.transcript;
  EXPECT_LT(r.elapsed, 5s) << r.transcript;
  const std::vector<std::string> left = processes_with(mark);
  for (const std::string& pid : left) {
    ::kill(std::stoi(pid), SIGKILL);
  }
  EXPECT_TRUE(left.empty()) << "still running: pid " << (left.empty() ? "" : left[0]);
}

TEST(DevicePreflight, WithoutPreflightDevicesNoDeviceIsCheckedAndTheRanksStart) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  Outcome r = run(preflight_spec(job, 2, "0:fail,1:fail", {}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(r.err.find("device preflight"), std::string::npos) << r.transcript;
  EXPECT_EQ(job.starts().size(), 2U) << r.transcript;
}

}  // namespace
}  // namespace trainit::test
