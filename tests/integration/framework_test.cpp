// The framework modes as a real PID 1: what each process receives, a job
// restarting after a failure (--restart on-failure, torchrun's
// --max_restarts), and the collective arena the init gives a host's ranks.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "emulation.h"
#include "harness.h"
#include "job_support.h"

namespace trainit::test {
namespace {

using job::count;
using job::slurp;
using job::wait_err;
using job::write_file;

// A rank program in sh: appends "RANK RESTART" to DIR/starts, writes its
// environment to DIR/env.RANK, and fails (exit 3) while `fail_below` says.
std::string write_rank_script(const TempDir& dir, unsigned failing_rank, unsigned fail_below) {
  const std::string path = dir / "rank.sh";
  const std::string script =
      "#!/bin/sh\n"
      "env > " +
      (dir / "env.") +
      "$RANK\n"
      "echo \"$RANK $TORCHELASTIC_RESTART_COUNT\" >> " +
      (dir / "starts") +
      "\n"
      "if [ \"$RANK\" = " +
      std::to_string(failing_rank) + " ] && [ \"$TORCHELASTIC_RESTART_COUNT\" -lt " + std::to_string(fail_below) +
      " ]; then\n"
      // Fail once every rank of this start has recorded it (10 s at most):
      // on a slow machine a peer stopped before its first line would be
      // missing from the starts, which is the test's, not trainit's, doing.
      "  i=0\n"
      "  while [ \"$(grep -c \" $TORCHELASTIC_RESTART_COUNT\\$\" " +
      (dir / "starts") +
      ")\" -lt \"$WORLD_SIZE\" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done\n"
      "  exit 3\n"
      "fi\n"
      "sleep 0.3\n";
  EXPECT_TRUE(write_file(path, script));
  ::chmod(path.c_str(), 0755);
  return path;
}

std::map<std::string, std::string> env_file(const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& line : lines_of(slurp(path))) {
    auto eq = line.find('=');
    if (eq != std::string::npos) {
      out[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return out;
}

Spec torchrun_spec(const TempDir& dir, std::vector<std::string> args, std::vector<std::string> env,
                   const std::string& program) {
  Spec s;
  s.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MA_NUM_GPUS=2",
           "MA_MOUNT_PATH=" + dir.path()};
  s.env.insert(s.env.end(), env.begin(), env.end());
  s.args = {"--mode", "torchrun", "--grace", "5"};
  s.args.insert(s.args.end(), args.begin(), args.end());
  s.args.push_back("--");
  s.args.push_back(program);
  return s;
}

TEST(TorchrunMode, EachRankGetsTorchrunsWorkerEnvironmentAndNoPetVariable) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string program = write_rank_script(dir, 99, 0);
  Trainit t(torchrun_spec(dir, {}, {"PET_NPROC_PER_NODE=2", "PET_NNODES=1"}, program));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (unsigned rank : {0U, 1U}) {
    auto env = env_file(dir / ("env." + std::to_string(rank)));
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], "18888");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(env.count("PET_NNODES"), 0U) << "PET_* are consumed";
    EXPECT_EQ(env.count("TORCHELASTIC_USE_AGENT_STORE"), 0U);
  }
}

// msrun told to network from the rank table (MS_RANKTABLE_ENABLE=True)
// waits for it as the Ascend launch does: nothing starts before the table
// is "completed", then the scheduler and the worker each get its path.
TEST(MsrunMode, WithMsRanktableEnableNothingStartsBeforeTheRankTableIsComplete) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string program = dir / "rank.sh";
  ASSERT_TRUE(write_file(program, "#!/bin/sh\necho \"$MS_ROLE $RANK_TABLE_FILE\" >> " + (dir / "seen") + "\n"));
  ASSERT_EQ(::chmod(program.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir / "table").c_str(), 0755), 0);
  const std::string table = dir / "table/jobstart_hccl.json";
  ASSERT_TRUE(write_file(table, job::template1("initializing", 1)));
  Spec s;
  s.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MA_NUM_GPUS=1",
           "MA_MOUNT_PATH=" + dir.path(), "MS_RANKTABLE_ENABLE=True", "RANK_TABLE_FILE=" + (dir / "table")};
  s.args = {"--mode", "msrun", "--rank-table-timeout", "20", "--", program};
  Trainit t(s);
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(wait_err(t, "not \"completed\"")) << t.transcript();
  EXPECT_FALSE(std::filesystem::exists(dir / "seen")) << "a process started before the table was complete";
  ASSERT_TRUE(job::replace_file(table, job::template1("completed", 1)));
  EXPECT_EQ(t.wait(15s), Exit::code(0)) << t.transcript();
  const std::string seen = slurp(dir / "seen");
  EXPECT_EQ(count(seen, "MS_SCHED " + table + "\n"), 1U) << seen;
  EXPECT_EQ(count(seen, "MS_WORKER " + table + "\n"), 1U) << seen;
}

// The job secret is PID 1's alone: once read, it is gone from the memory
// /proc/1/environ shows (not just from environ[]), and no rank gets it.
TEST(JobSecret, TheSecretLeavesPid1sEnvironmentBlockAndNoRankGetsIt) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string secret = "s3cret-0f-the-job-7d1c";
  const std::string path = dir / "rank.sh";
  ASSERT_TRUE(write_file(path,
                         "#!/bin/sh\n"
                         "env > " +
                             (dir / "env.") + "$RANK\n" + "touch " + (dir / "started.") + "$RANK\n" + "while [ ! -e " +
                             (dir / "go") + " ]; do sleep 0.05; done\n"));
  ::chmod(path.c_str(), 0755);
  Trainit t(torchrun_spec(dir, {}, {"TRAINIT_JOB_SECRET=" + secret, "SOMETHING_ELSE=kept"}, path));
  TRAINIT_ASSERT_STARTED(t);
  const auto until = Clock::now() + 20s;
  while ((!std::filesystem::exists(dir / "started.0") || !std::filesystem::exists(dir / "started.1")) &&
         Clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  const std::string environ_block = slurp("/proc/" + std::to_string(t.pid()) + "/environ");
  ASSERT_TRUE(write_file(dir / "go", ""));
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (unsigned rank : {0U, 1U}) {
    const std::string env = slurp(dir / ("env." + std::to_string(rank)));
    EXPECT_NE(env.find("SOMETHING_ELSE=kept"), std::string::npos) << env;
    EXPECT_EQ(env.find(secret), std::string::npos) << "rank " << rank << " got the secret";
  }
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kHostEnvironBlock);
  EXPECT_NE(environ_block.find("SOMETHING_ELSE=kept"), std::string::npos) << "read the wrong process?";
  EXPECT_EQ(environ_block.find(secret), std::string::npos) << "/proc/PID/environ still shows the secret";
}

TEST(JobRestart, AFailingRankRestartsTheWholeJobWhichThenSucceeds) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string program = write_rank_script(dir, 1, 2);  // rank 1 fails on starts 0 and 1
  Trainit t(torchrun_spec(dir, {"--restart", "on-failure", "--max-restarts", "2"}, {}, program));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  auto starts = lines_of(slurp(dir / "starts"));
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts, (std::vector<std::string>{"0 0", "0 1", "0 2", "1 0", "1 1", "1 2"})) << t.transcript();
  EXPECT_EQ(env_file(dir / "env.0")["TORCHELASTIC_MAX_RESTARTS"], "2");
}

// A job that fails at once is not started again at once, for ever: as in
// exec mode, 0.1 s before the first restart, doubling while each run lasts
// under 10 s (at most 10 s).
TEST(JobRestart, AJobThatKeepsFailingStartsAgainAfterABackoffThatDoubles) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string program = write_rank_script(dir, 1, 3);  // rank 1 fails on starts 0, 1 and 2
  const auto start = Clock::now();
  Trainit t(torchrun_spec(dir, {"--restart", "on-failure", "--max-restarts", "3"}, {}, program));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  EXPECT_GE(Clock::now() - start, 700ms) << "0.1 + 0.2 + 0.4 s of backoff";
  EXPECT_NE(t.err().find("starting the job again in 0.1 s (restart 1 of 3)"), std::string::npos) << t.transcript();
  EXPECT_NE(t.err().find("starting the job again in 0.2 s (restart 2 of 3)"), std::string::npos) << t.transcript();
  EXPECT_NE(t.err().find("starting the job again in 0.4 s (restart 3 of 3)"), std::string::npos) << t.transcript();
  EXPECT_EQ(count(slurp(dir / "starts"), "\n"), 8U) << "2 ranks × 4 starts";
}

// SIGTERM while the job waits out its backoff ends it at once with 143:
// nothing starts again.
TEST(JobRestart, SigtermDuringTheBackoffEndsTheJobWith143AndNothingStartsAgain) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string program = write_rank_script(dir, 1, 100);  // always fails
  Trainit t(torchrun_spec(dir, {"--restart", "on-failure"}, {}, program));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(wait_err(t, "starting the job again in 3.2 s (restart 6 of unlimited)", 30s)) << t.transcript();
  const size_t starts = count(slurp(dir / "starts"), "\n");
  ASSERT_EQ(t.signal(SIGTERM), 0);
  const auto sent = Clock::now();
  EXPECT_EQ(t.wait(), Exit::code(143)) << t.transcript();
  EXPECT_LT(Clock::now() - sent, 2s) << "the backoff (3.2 s) held the stop";
  EXPECT_EQ(count(slurp(dir / "starts"), "\n"), starts) << "a start after the stop" << t.transcript();
}

TEST(JobRestart, RestartsRunOutAndTheJobExitsWithTheFailingRanksCode) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  const std::string program = write_rank_script(dir, 1, 100);  // always fails
  // torchrun's own --max_restarts, through the platform's variable.
  Trainit t(torchrun_spec(dir, {}, {"MA_EXTRA_TORCHRUN_PARAMS=--max_restarts=1"}, program));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(3)) << t.transcript();
  EXPECT_EQ(count(slurp(dir / "starts"), "\n"), 4U) << "2 ranks × (the first start + 1 restart)";
}

TEST(JobRestart, SigtermWhileRestartingEndsTheJobWith143) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  // Rank 1 fails every time once rank 0 is up (10 s at most); rank 0 ignores
  // SIGTERM for a while, so the job is still stopping for its restart when
  // trainit gets SIGTERM.
  const std::string path = dir / "rank.sh";
  ASSERT_TRUE(write_file(path,
                         "#!/bin/sh\n"
                         "cd \"${0%/*}\"\n"
                         "if [ \"$RANK\" = 1 ]; then\n"
                         "  i=0\n"
                         "  while ! grep -qx 0 starts && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done\n"
                         "  echo 1 >> starts\n"
                         "  exit 3\n"
                         "fi\n"
                         "trap 'sleep 1; exit 0' TERM\n"
                         "echo 0 >> starts\n"
                         "sleep 30 & wait\n"));
  ::chmod(path.c_str(), 0755);
  Trainit t(torchrun_spec(dir, {"--restart", "on-failure"}, {}, path));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(wait_err(t, "restarting the job (restart 1 of unlimited)")) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(143)) << t.transcript();
  EXPECT_EQ(count(slurp(dir / "starts"), "\n"), 2U) << "no second start" << t.transcript();
}

}  // namespace
}  // namespace trainit::test

namespace trainit::test {
namespace {

using job::slurp;

Spec coll_spec(const TempDir& dir, unsigned ranks, std::vector<std::string> args, const char* mode) {
  Spec s;
  s.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MA_NUM_GPUS=" + std::to_string(ranks),
           "MA_MOUNT_PATH=" + dir.path()};
  s.args = {"--mode", "torchrun", "--grace", "5"};
  s.args.insert(s.args.end(), args.begin(), args.end());
  s.args.insert(s.args.end(), {"--", helper_path("coll_rank"), dir.path(), mode});
  return s;
}

// "<code> <ns>" from a coll_rank file.
std::pair<int, long long> code_and_time(const std::string& path) {
  int code = 1;
  long long ns = 0;
  if (std::sscanf(slurp(path).c_str(), "%d %lld", &code, &ns) != 2) {
    return {1, 0};
  }
  return {code, ns};
}

TEST(CollArena, RanksStartedByTrainitReduceOverTheArenaTheInitCreated) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(coll_spec(dir, 4, {}, "ok"));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (unsigned r = 0; r < 4; ++r) {
    EXPECT_EQ(slurp(dir / ("r" + std::to_string(r) + ".ok")), "0 4\n") << "rank " << r << t.transcript();
  }
  EXPECT_NE(t.err().find("preflight passed"), std::string::npos) << t.transcript();
}

TEST(CollArena, RanksStartedByTrainitSwapDeviceHandlesOverTheSocketsTheInitMadeAndReduceOnTheDevice) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION("the fake device plugin is a host library: an emulated rank cannot load it");
  TempDir dir;
  Spec s = coll_spec(dir, 3, {}, "device");
  // Pieces of 2 KiB: the 20 KB allreduce takes many.
  s.env.insert(s.env.end(), {"TRAINIT_COLL_BACKEND=" TRAINIT_FAKEDEV_PLUGIN, "TRAINIT_COLL_DEVICE_STAGING=4096"});
  Trainit t(s);
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (unsigned r = 0; r < 3; ++r) {
    EXPECT_EQ(slurp(dir / ("r" + std::to_string(r) + ".ok")), "0 3 fakedev\n") << "rank " << r << t.transcript();
  }
}

// What a Python training script does: its rank finds libtrainit_coll.so
// through TRAINIT_COLL_LIBRARY in the job's environment (trainit withheld it
// once, as an unknown TRAINIT_* name) and reduces device memory through
// trainit_coll, after the device preflight; the rank program is
// bench/coll/gpu_check.sh's, on the fake device.
TEST(CollArena, PythonRanksFindTheLibraryTheJobNamesAndReduceOnTheDeviceAfterThePreflight) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION("this machine's python3 cannot load an aarch64 library");
  TempDir dir;
  Spec s;
  s.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "MA_NUM_GPUS=2",
           "MA_MOUNT_PATH=" + dir.path(),
           "TRAINIT_COLL_BACKEND=" TRAINIT_FAKEDEV_PLUGIN,
           "TRAINIT_COLL_LIBRARY=" TRAINIT_COLL_SHARED,
           "PYTHONPATH=" TRAINIT_SOURCE_DIR "/python"};
  s.args = {"--mode",
            "torchrun",
            "--grace",
            "5",
            "--preflight",
            "devices",
            "--",
            TRAINIT_PYTHON3,
            TRAINIT_SOURCE_DIR "/bench/coll/gpu_torch_rank.py",
            "--addresses-only"};
  Trainit t(s);
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (const char* line :
       {"rank 0 of 2: every result right (backend fakedev)", "rank 1 of 2: every result right (backend fakedev)"}) {
    EXPECT_NE(t.out().find(line), std::string::npos) << line << t.transcript();
  }
  EXPECT_NE(t.err().find("device preflight: 2 devices passed"), std::string::npos) << t.transcript();
}

// An unchanged DDP script with init_process_group("trainit"): its ranks join
// the arena trainit made (not a standalone communicator) and train to the
// same parameters.
TEST(CollArena, DdpRanksOnTheTrainitBackendJoinTheArenaTheInitMadeAndTrainAlike) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION("this machine's python3 cannot load an aarch64 library");
  TempDir dir;
  Spec s;
  s.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MA_NUM_GPUS=2",
           "MA_MOUNT_PATH=" + dir.path(), "TRAINIT_COLL_LIBRARY=" TRAINIT_COLL_SHARED,
           "PYTHONPATH=" TRAINIT_SOURCE_DIR "/python"};
  s.args = {
      "--mode", "torchrun", "--grace", "5", "--", TRAINIT_PYTHON3, TRAINIT_SOURCE_DIR "/tests/python/torch_rank.py"};
  Trainit t(s);
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (const char* line : {"rank 0 of 2: DDP over trainit's arena, parameters alike",
                           "rank 1 of 2: DDP over trainit's arena, parameters alike"}) {
    EXPECT_NE(t.out().find(line), std::string::npos) << line << t.transcript();
  }
}

TEST(CollArena, ARankHungInItsDeviceMidCollectiveIsReportedAsInThatCollective) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION("the fake device plugin is a host library: an emulated rank cannot load it");
  TempDir dir;
  Spec s = coll_spec(dir, 2, {"--hang-timeout", "1"}, "device-direct");
  // Local rank 1's device never finishes its first operation: the
  // allreduce's copy into its staging, between the call's host steps.
  s.env.insert(s.env.end(), {"TRAINIT_COLL_BACKEND=" TRAINIT_FAKEDEV_PLUGIN, "TRAINIT_FAKEDEV_FAULT=1:hang"});
  Trainit t(s);
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_TRUE(wait_err(t, "collective hang: local rank 1 has been in allreduce for")) << t.transcript();
  EXPECT_TRUE(wait_err(t, "collective hang: local rank 0 has been in allreduce for")) << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(143)) << t.transcript();
}

TEST(CollArena, ARankSigkilledMidCollectiveAbortsEveryPeerWithin100msAndTheJobExits137) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION("qemu-user's scheduling makes a 100 ms bound meaningless");
  TempDir dir;
  Trainit t(coll_spec(dir, 3, {}, "die"));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(137)) << t.transcript();
  long long died = std::atoll(slurp(dir / "died").c_str());
  ASSERT_GT(died, 0) << t.transcript();
  for (unsigned r : {0U, 2U}) {
    auto [code, ns] = code_and_time(dir / ("r" + std::to_string(r) + ".ret"));
    EXPECT_EQ(code, -ECONNABORTED) << "rank " << r << t.transcript();
    EXPECT_LE(ns - died, 100'000'000LL) << "rank " << r << " returned " << (ns - died) / 1000 << " µs after the death";
  }
}

TEST(CollArena, HangTimeoutNamesTheStuckRankAndItsCallAndStopStopsTheJobWith75) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(coll_spec(dir, 2, {"--hang-timeout", "1", "--hang-action", "stop"}, "hang"));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(75)) << t.transcript();
  EXPECT_NE(t.err().find("collective hang: local rank 0 has been in barrier for"), std::string::npos) << t.transcript();
  EXPECT_EQ(code_and_time(dir / "r0.ret").first, -ECONNABORTED) << "the stop aborts the waiting rank";
}

TEST(CollArena, WhatARankRunsAfterJoiningDoesNotInheritTheArenaDescriptor) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(coll_spec(dir, 2, {}, "children"));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (unsigned r = 0; r < 2; ++r) {
    EXPECT_EQ(slurp(dir / ("r" + std::to_string(r) + ".child")), "closed\n") << "rank " << r << t.transcript();
  }
}

// --- A rank turned against the arena: PID 1 owns it, trusts none of it ---

Spec attacked_spec(const TempDir& dir, const char* mode, std::vector<std::string> args = {}) {
  Spec s = coll_spec(dir, 3, std::move(args), mode);
  s.args.insert(s.args.begin(), {"--status-file", dir / "status.json"});
  return s;
}

// The status file's "state" and "cause" after the job: final, never "running".
void expect_final_status(const TempDir& dir, const std::string& cause_part, const Trainit& t) {
  const std::string status = slurp(dir / "status.json");
  EXPECT_EQ(status.find("\n  \"state\": \"running\""), std::string::npos) << status << t.transcript();
  EXPECT_NE(status.find(cause_part), std::string::npos) << status << t.transcript();
}

TEST(CollArenaTrust, ARankTruncatingTheArenaIsRefusedAndThePeersAbortAndTheJobExitsWithItsCode) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(attacked_spec(dir, "shrink"));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(3)) << "PID 1 must outlive the attack (135: it died of SIGBUS)" << t.transcript();
  EXPECT_EQ(slurp(dir / "attack"), "-1 " + std::to_string(EPERM) + "\n") << "the arena's size is sealed";
  for (unsigned r : {0U, 2U}) {
    EXPECT_EQ(code_and_time(dir / ("r" + std::to_string(r) + ".ret")).first, -ECONNABORTED) << "rank " << r;
  }
  expect_final_status(dir, "exited with 3", t);
}

TEST(CollArenaTrust, ARankGrowingTheArenaIsRefusedAndTheJobExitsWithItsCode) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(attacked_spec(dir, "grow"));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(3)) << t.transcript();
  EXPECT_EQ(slurp(dir / "attack"), "-1 " + std::to_string(EPERM) + "\n") << "the arena's size is sealed";
  expect_final_status(dir, "exited with 3", t);
}

TEST(CollArenaTrust, ARankScribblingOverTheArenaHeaderStopsTheJobWith76NamingTheArena) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(attacked_spec(dir, "scribble"));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(76)) << "PID 1 must notice, stop the job and live" << t.transcript();
  EXPECT_EQ(slurp(dir / "attack"), "done\n");
  EXPECT_NE(t.err().find("collective arena corrupted"), std::string::npos) << t.transcript();
  expect_final_status(dir, "collective arena corrupted", t);
}

TEST(CollArenaTrust, ARankForgingEveryRanksProgressStopsTheJobWith76NotAHangReport) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(attacked_spec(dir, "progress", {"--hang-timeout", "1", "--hang-action", "stop"}));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(76)) << t.transcript();
  EXPECT_NE(t.err().find("collective arena corrupted"), std::string::npos) << t.transcript();
  EXPECT_EQ(t.err().find("collective hang"), std::string::npos) << "forged progress is no hang" << t.transcript();
  expect_final_status(dir, "collective arena corrupted", t);
}

TEST(CollArena, ArenaOffStartsNoArenaAndTheRanksSeeNoArenaVariables) {
  TRAINIT_REQUIRE_ROOT();
  TempDir dir;
  Trainit t(coll_spec(dir, 2, {"--coll-arena", "off"}, "ok"));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(2)) << "coll_rank cannot join without an arena" << t.transcript();
  EXPECT_EQ(t.err().find("collective arena"), std::string::npos) << t.transcript();
}

}  // namespace
}  // namespace trainit::test
