// --preflight devices as a real PID 1 (init/device_preflight.h): before any
// rank starts, one trainit-device-check per local device, over the fake
// device (TRAINIT_COLL_BACKEND = libtrainit_coll_fakedev.so) whose faults
// TRAINIT_FAKEDEV_FAULT injects, and over the Ascend plugin on the mock
// AscendCL (MOCK_ACL_FAULT): a device that fails, hangs or sums wrong ends
// the job with 79, one line naming the device, the host and the step, the
// same cause in the status file, no rank started and nothing left.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
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
  std::vector<std::string> left;
  DIR* proc = ::opendir("/proc");
  ASSERT_NE(proc, nullptr);
  while (const dirent* e = ::readdir(proc)) {
    const std::string environ = slurp(std::string("/proc/") + e->d_name + "/environ");
    if (environ.find(mark + '\0') != std::string::npos) {
      left.push_back(e->d_name);
    }
  }
  ::closedir(proc);
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
