// The device preflight's pure parts (init/job/device_preflight.h): what PID 1
// accepts of a check's pipes, the failure line it makes of the checks' ends,
// which device a rank's environment names, the backend and the check's path;
// and the fake device's fault knob (src/coll/plugins/fakedev/fakedev_fault.h).
#include "job/device_preflight.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "coll/device_check.h"
#include "coll/plugins/fakedev/fakedev_fault.h"

namespace trainit {
namespace {

using namespace std::chrono_literals;

// --- StepLog -----------------------------------------------------------------

TEST(DevicePreflightSteps, EveryStepInOrderIsTakenEvenSplitAcrossReads) {
  StepLog log;
  EXPECT_EQ(log.step(), -1);
  EXPECT_EQ(log.step_name(), "start");
  log.feed("open\nal");
  EXPECT_EQ(log.step_name(), "open") << "a line counts once it is whole";
  log.feed("loc\njoin\nallreduce\ncheck\n");
  EXPECT_EQ(log.step_name(), "check");
  EXPECT_EQ(log.step(), coll::kDeviceCheckStepCount - 1);
  EXPECT_FALSE(log.broken());
}

TEST(DevicePreflightSteps, ANameThatIsNoStepBreaksTheLogAndKeepsTheLastGoodStep) {
  StepLog log;
  log.feed("open\nreboot the host\nalloc\n");
  ASSERT_TRUE(log.broken());
  EXPECT_NE(log.broken()->find("\"reboot the host\""), std::string::npos) << *log.broken();
  EXPECT_EQ(log.step_name(), "open") << "nothing after the bad line counts";
}

TEST(DevicePreflightSteps, AStepOutOfOrderOrRepeatedBreaksTheLog) {
  StepLog skipped;
  skipped.feed("open\njoin\n");
  ASSERT_TRUE(skipped.broken());
  EXPECT_EQ(*skipped.broken(), "announced step join after open");
  StepLog repeated;
  repeated.feed("open\nopen\n");
  EXPECT_TRUE(repeated.broken());
}

TEST(DevicePreflightSteps, MoreThanTheBoundOfOutputBreaksTheLogWithoutKeepingIt) {
  StepLog log;
  log.feed(std::string(StepLog::kMaxBytes + 1, 'x'));
  ASSERT_TRUE(log.broken());
  EXPECT_NE(log.broken()->find("more than 256 bytes"), std::string::npos) << *log.broken();
}

// Found by the device_check fuzz target: the steps before the bound counted
// when the pipe gave them a byte at a time, not when it gave them at once,
// so the failure line's step depended on how the reads fell.
TEST(DevicePreflightSteps, TheStepBeforeTooMuchOutputIsTheSameWhateverPiecesTheBytesCameIn) {
  const std::string out = "open\nalloc\n" + std::string(StepLog::kMaxBytes, 'x');
  StepLog whole;
  whole.feed(out);
  StepLog bytewise;
  for (char c : out) {
    bytewise.feed(std::string_view(&c, 1));
  }
  EXPECT_EQ(whole.step(), 1);
  EXPECT_EQ(bytewise.step(), 1);
  EXPECT_TRUE(whole.broken() && bytewise.broken());
  EXPECT_EQ(*whole.broken(), *bytewise.broken());
}

TEST(DevicePreflightSteps, ControlBytesInABadLineAreQuotedNotPassedOn) {
  StepLog log;
  log.feed(std::string("op\x1b[2Jen\n"));
  ASSERT_TRUE(log.broken());
  EXPECT_EQ(log.broken()->find('\x1b'), std::string::npos) << *log.broken();
}

// --- ReasonLog ----------------------------------------------------------------

TEST(DevicePreflightReason, TheLastNonEmptyLineIsTheReasonMadePrintable) {
  ReasonLog log;
  log.feed("trainit fakedev [12] device 2: fault injected\n");
  log.feed("check: wrong i32 sum\x07 at element 0\n\n");
  EXPECT_EQ(log.reason(), "check: wrong i32 sum\\x07 at element 0");
}

TEST(DevicePreflightReason, ALineCutShortByTheEndIsTheReasonAndALongOneIsBounded) {
  ReasonLog log;
  log.feed("first\nsecond, unfinished");
  EXPECT_EQ(log.reason(), "second, unfinished");
  ReasonLog flood;
  flood.feed(std::string(1 << 20, 'y'));
  EXPECT_EQ(flood.reason().size(), ReasonLog::kMaxLine);
}

// --- preflight_failure ------------------------------------------------------------

CheckEnd end(std::string device, CheckEnd::How how, std::string step, std::string reason = {}, int status = 1) {
  CheckEnd e;
  e.device = std::move(device);
  e.how = how;
  e.step = std::move(step);
  e.reason = std::move(reason);
  e.status = status;
  return e;
}

TEST(DevicePreflightFailure, EveryCheckPassedIsNoFailure) {
  EXPECT_FALSE(
      preflight_failure({end("0", CheckEnd::How::kPassed, "check"), end("1", CheckEnd::How::kPassed, "check")}, 10s));
}

TEST(DevicePreflightFailure, ADevicesOwnFailureNamesItsDeviceAndTheStepPid1SawNotTheOneItClaims) {
  auto line = preflight_failure({end("1", CheckEnd::How::kPeer, "allreduce", "allreduce: f32 sum: timed out"),
                                 end("2", CheckEnd::How::kFailed, "check", "check: wrong i32 sum at element 0")},
                                10s);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "device preflight failed: device 2: check: wrong i32 sum at element 0");
  auto claimed = preflight_failure({end("3", CheckEnd::How::kFailed, "open", "check: all is fine")}, 10s);
  EXPECT_EQ(*claimed, "device preflight failed: device 3: open: check: all is fine");
}

TEST(DevicePreflightFailure, AHangWinsOverChecksThatGaveUpWaitingForIt) {
  auto line = preflight_failure({end("0", CheckEnd::How::kPeer, "allreduce", "allreduce: f32 sum: timed out"),
                                 end("1", CheckEnd::How::kHung, "allreduce")},
                                2500ms);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "device preflight failed: device 1: hung in step allreduce after 2.5 s");
}

// Checks that hang all hang until the same bound, and give up waiting for
// each other at about the same time: the order the kernel reaps them in is
// no order. The line names the lowest device of them, whatever that order.
TEST(DevicePreflightFailure, SeveralHungChecksNameTheLowestDeviceWhateverOrderTheyEndedIn) {
  auto line = preflight_failure({end("10", CheckEnd::How::kHung, "start"), end("1", CheckEnd::How::kHung, "start"),
                                 end("2", CheckEnd::How::kHung, "start")},
                                1s);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "device preflight failed: device 1: hung in step start after 1.0 s");
  auto peers = preflight_failure({end("3", CheckEnd::How::kPeer, "join", "join: timed out"),
                                  end("0", CheckEnd::How::kPeer, "join", "join: timed out")},
                                 10s);
  EXPECT_EQ(*peers, "device preflight failed: device 0: join: timed out");
}

TEST(DevicePreflightFailure, OnlyChecksThatGaveUpNameTheFirstOfThem) {
  auto line = preflight_failure({end("0", CheckEnd::How::kPeer, "join",
                                     "join: with the other 1 device check(s): "
                                     "timed out")},
                                10s);
  EXPECT_EQ(*line, "device preflight failed: device 0: join: with the other 1 device check(s): timed out");
}

TEST(DevicePreflightFailure, AKilledCheckNamesItsSignalAndSilentFailuresTheirStatus) {
  EXPECT_EQ(*preflight_failure({end("4", CheckEnd::How::kKilled, "alloc", "", SIGSEGV)}, 10s),
            "device preflight failed: device 4: alloc: killed by SIGSEGV");
  EXPECT_EQ(*preflight_failure({end("5", CheckEnd::How::kFailed, "start", "", 127)}, 10s),
            "device preflight failed: device 5: start: exited with 127");
}

TEST(DevicePreflightFailure, OtherDevicesThatFailedOnTheirOwnAreCountedInTheSameLine) {
  auto line = preflight_failure({end("2", CheckEnd::How::kFailed, "open", "open: no device"),
                                 end("0", CheckEnd::How::kFailed, "open", "open: no device"),
                                 end("3", CheckEnd::How::kBroken, "open", "wrote \"x\" to stdout")},
                                10s);
  EXPECT_EQ(*line, "device preflight failed: device 2: open: no device (failed too: devices 0, 3)");
}

// --- the device a rank names ------------------------------------------------------

long device(const char* device_id, const char* cuda, const char* ascend, const char* local) {
  return coll::device_number(nullptr, device_id, cuda, ascend, local);
}

TEST(DeviceNumber, TheBackendsOverrideWinsOverEveryOtherVariable) {
  EXPECT_EQ(coll::device_number("5", "3", "1", "2", "0"), 5);
  EXPECT_EQ(coll::device_number("", "3", nullptr, nullptr, nullptr), 3) << "empty is unset";
  EXPECT_EQ(coll::device_number("x", "3", nullptr, nullptr, nullptr), 3) << "no number is unset";
}

TEST(DeviceNumber, DeviceIdWinsThenTheVisibleListThenTheLocalRankThenZero) {
  EXPECT_EQ(device("3", "5", "6", "1"), 3);
  EXPECT_EQ(device(nullptr, "5", "6", nullptr), 5);
  EXPECT_EQ(device(nullptr, nullptr, "6", nullptr), 6);
  EXPECT_EQ(device(nullptr, nullptr, nullptr, "2"), 2);
  EXPECT_EQ(device(nullptr, nullptr, nullptr, nullptr), 0);
  EXPECT_EQ(device("", "", "", ""), 0) << "empty is unset";
}

TEST(DeviceNumber, ALocalRankPicksItsEntryOfSeveralVisibleDevicesAndAnOnlyEntryIsTheDevice) {
  EXPECT_EQ(device(nullptr, "4,5,6,7", nullptr, "2"), 6);
  EXPECT_EQ(device(nullptr, "4,5,6,7", nullptr, "9"), 4) << "past the list: its first";
  EXPECT_EQ(device(nullptr, "7", nullptr, "3"), 7) << "a rank that sees one device uses it";
  EXPECT_EQ(device(nullptr, nullptr, "0,1", "1"), 1);
}

TEST(DeviceNumber, ValuesThatAreNoNumberCountAsUnset) {
  EXPECT_EQ(device("x", "GPU-8f0c", nullptr, "1"), 1);
  EXPECT_EQ(device("-1", nullptr, nullptr, nullptr), 0);
}

TEST(DeviceNumber, DeviceOfAPlannedRankReadsItsEnvironment) {
  ProcessSpec rank;
  rank.env = {{"PATH", "/bin"}, {"LOCAL_RANK", "1"}, {"CUDA_VISIBLE_DEVICES", "2,3"}};
  EXPECT_EQ(device_of(rank), "3");
  rank.env.push_back({"DEVICE_ID", "0"});
  EXPECT_EQ(device_of(rank), "0");
}

// --- backend and path ------------------------------------------------------------

TEST(DevicePreflightBackend, TheJobsVariableWinsElseAscendOnAscendHostsElseCuda) {
  EXPECT_EQ(
      preflight_backend(Environment(std::vector<EnvVar>{{"TRAINIT_COLL_BACKEND", "/opt/fake.so"}}), Mode::kAscend),
      "/opt/fake.so");
  EXPECT_EQ(preflight_backend(Environment(), Mode::kAscend), "ascend");
  EXPECT_EQ(preflight_backend(Environment(), Mode::kMsrun), "ascend");
  EXPECT_EQ(preflight_backend(Environment(std::vector<EnvVar>{{"ASCEND_VISIBLE_DEVICES", "0,1"}}), Mode::kTorchrun),
            "ascend");
  EXPECT_EQ(preflight_backend(Environment(), Mode::kTorchrun), "cuda");
  EXPECT_EQ(preflight_backend(Environment(std::vector<EnvVar>{{"TRAINIT_COLL_BACKEND", ""}}), Mode::kPytorch), "cuda")
      << "empty is unset";
}

TEST(DevicePreflightPath, TheCheckBesideTrainitComesFirstThenTheInstalledOneAndAMissingOneNamesBoth) {
  const std::string dir = "/tmp/trainit-device-check-test-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string beside = dir + "/trainit-device-check";
  EXPECT_EQ(find_device_check("", dir + "/trainit", "/bin/true").value(), "/bin/true") << "nothing beside yet";
  FILE* f = std::fopen(beside.c_str(), "w");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fclose(f), 0);
  ASSERT_EQ(::chmod(beside.c_str(), 0755), 0);
  EXPECT_EQ(find_device_check("", dir + "/trainit", "/bin/true").value(), beside);
  EXPECT_EQ(find_device_check("/bin/true", dir + "/trainit", "").value(), "/bin/true") << "--device-check wins";
  auto missing = find_device_check("", "/nonexistent/bin/trainit", "/nonexistent/lib/trainit-device-check");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().exit_code, 78);
  EXPECT_NE(missing.error().message.find("/nonexistent/bin/trainit-device-check or "
                                         "/nonexistent/lib/trainit-device-check"),
            std::string::npos)
      << missing.error().message;
  auto given = find_device_check("/nonexistent/check", "", "");
  ASSERT_FALSE(given.ok());
  EXPECT_NE(given.error().message.find("--device-check /nonexistent/check"), std::string::npos);
  ::unlink(beside.c_str());
  ::rmdir(dir.c_str());
}

// --- the fake device's fault knob -------------------------------------------------

TEST(FakedevFault, EachEntryGivesItsDeviceItsFaultAndOthersNone) {
  using coll::FakedevFault;
  const char* knob = "0:fail,2:hang,13:wrong,3:late,4:mute";
  EXPECT_EQ(coll::fakedev_fault(knob, 0).fault, FakedevFault::kFail);
  EXPECT_EQ(coll::fakedev_fault(knob, 2).fault, FakedevFault::kHang);
  EXPECT_EQ(coll::fakedev_fault(knob, 13).fault, FakedevFault::kWrong);
  EXPECT_EQ(coll::fakedev_fault(knob, 3).fault, FakedevFault::kLate);
  EXPECT_EQ(coll::fakedev_fault(knob, 4).fault, FakedevFault::kMute);
  EXPECT_EQ(coll::fakedev_fault(knob, 1).fault, FakedevFault::kNone);
  EXPECT_TRUE(coll::fakedev_fault(knob, 1).valid);
  EXPECT_EQ(coll::fakedev_fault(nullptr, 0).fault, FakedevFault::kNone);
  EXPECT_EQ(coll::fakedev_fault("", 0).fault, FakedevFault::kNone);
  EXPECT_EQ(coll::fakedev_fault("1:hang,1:fail", 1).fault, FakedevFault::kHang) << "the first entry wins";
}

TEST(FakedevFault, AMalformedEntryAnywhereMakesTheKnobInvalid) {
  for (const char* knob : {"1", "1:", ":fail", "x:fail", "1:explode", "1:fail,", "1:fail,,2:hang", "-1:fail",
                           "1234567:fail", "1:fail 2:hang"}) {
    EXPECT_FALSE(coll::fakedev_fault(knob, 0).valid) << knob;
  }
}

}  // namespace
}  // namespace trainit
