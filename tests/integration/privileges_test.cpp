// Least privilege, against the real kernel: what a process started by trainit
// (PROGRAM, or a rank) reads of itself in /proc/self/status under --user,
// --caps and --no-new-privs; that it cannot signal or ptrace trainit; what
// trainit keeps of its own capabilities once PROGRAM runs; the modes of the
// files it writes; and that no secret reaches anything it writes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "harness.h"
#include "job_support.h"

namespace trainit::test {
namespace {

using namespace job;

// CAP_IPC_LOCK (14) and CAP_SYS_PTRACE (19), as /proc shows a set.
constexpr const char* kIpcLockAndPtrace = "0000000000084000";
constexpr const char* kNone = "0000000000000000";
// CAP_KILL (5).
constexpr const char* kKillOnly = "0000000000000020";

// What the privileges helper's PTRACE_ATTACH of its parent (trainit) gave:
// EPERM from a kernel; qemu-user refuses every ptrace (emulation::kNoPtrace).
std::string ptrace_refusal() {
  return kEmulated ? "Function not implemented" : "EPERM";
}

// What the privileges helper printed, run as PROGRAM by a root trainit as
// PID 1 with `args` before "--".
// With `parent_caps`, the helper first waits for trainit's CapEff to read so
// (trainit narrows its own just after PROGRAM has started).
Outcome report(std::vector<std::string> args, const TempDir& bin, const char* parent_caps = nullptr) {
  Spec spec{.program = bin / "trainit"};
  spec.args = std::move(args);
  spec.args.push_back("--");
  spec.args.push_back(bin / "privileges");
  if (parent_caps != nullptr) {
    spec.args.emplace_back(parent_caps);
  }
  return run(spec);
}

class Privileges : public ::testing::Test {
 protected:
  void SetUp() override {
    TRAINIT_REQUIRE_ROOT();
    std::string error;
    ASSERT_TRUE(copy_for_other_users(bin_, {"privileges"}, &error)) << error;
  }
  TempDir bin_;
};

TEST_F(Privileges, ByDefaultProgramKeepsWhatTheContainerGave) {
  Outcome r = report({}, bin_);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "Uid:"), "0 0 0 0") << r.out;
  EXPECT_EQ(field(r.out, "CapBnd:"), field(r.out, "CapPrm:")) << r.out;
  EXPECT_NE(field(r.out, "CapPrm:"), kNone) << r.out;
  EXPECT_EQ(field(r.out, "NoNewPrivs:"), "0") << r.out;
}

TEST_F(Privileges, UserByIdsRunsProgramAsThemWithNoCapabilities) {
  // A uid /etc/passwd does not name (the machine's own may name 1000).
  Outcome r = report({"--user", "4242:100"}, bin_);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "Uid:"), "4242 4242 4242 4242") << r.out;
  EXPECT_EQ(field(r.out, "Gid:"), "100 100 100 100") << r.out;
  EXPECT_EQ(field(r.out, "Groups:"), "100 ") << r.out;
  for (const char* set : {"CapPrm:", "CapEff:", "CapAmb:"}) {
    EXPECT_EQ(field(r.out, set), kNone) << set << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("env HOME=/\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("env USER=4242\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("env LOGNAME=4242\n"), std::string::npos) << r.out;
}

TEST_F(Privileges, UserByNameGetsItsGroupsAndHome) {
  // nobody is in every Debian image's /etc/passwd: 65534, group nogroup.
  Outcome r = report({"--user", "nobody"}, bin_);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "Uid:"), "65534 65534 65534 65534") << r.out;
  EXPECT_EQ(field(r.out, "Gid:"), "65534 65534 65534 65534") << r.out;
  EXPECT_EQ(field(r.out, "Groups:"), "65534 ") << r.out;
  EXPECT_NE(r.out.find("env USER=nobody\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("env LOGNAME=nobody\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("env HOME=/nonexistent\n"), std::string::npos) << r.out;
}

TEST_F(Privileges, ProgramOfAnotherUserCannotSignalOrPtraceTrainit) {
  Outcome r = report({"--user", "1000:100"}, bin_);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "kill parent:"), "EPERM") << r.out;
  EXPECT_EQ(field(r.out, "ptrace parent:"), ptrace_refusal()) << r.out;
}

TEST_F(Privileges, CapsDropEmptiesEverySetEvenForRoot) {
  Outcome r = report({"--caps", "drop"}, bin_);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "Uid:"), "0 0 0 0") << r.out;
  for (const char* set : {"CapBnd:", "CapPrm:", "CapEff:", "CapInh:", "CapAmb:"}) {
    EXPECT_EQ(field(r.out, set), kNone) << set << "\n" << r.out;
  }
}

TEST_F(Privileges, CapsListIsKeptInEverySetAcrossTheSwitchOfUser) {
  Outcome r = report({"--user", "1000:100", "--caps", "CAP_IPC_LOCK,cap_sys_ptrace", "--allow-job-ptrace"}, bin_);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "Uid:"), "1000 1000 1000 1000") << r.out;
  for (const char* set : {"CapBnd:", "CapPrm:", "CapEff:", "CapInh:", "CapAmb:"}) {
    EXPECT_EQ(field(r.out, set), kIpcLockAndPtrace) << set << "\n" << r.out;
  }
}

// CAP_SYS_PTRACE for another user's processes would let them read PID 1's
// memory: without --allow-job-ptrace it is one line and exit 64, and nothing
// starts.
TEST_F(Privileges, CapSysPtraceForAnotherUserWithoutTheOptInIsRefusedWith64) {
  Outcome r = report({"--user", "1000:100", "--caps", "CAP_IPC_LOCK,cap_sys_ptrace"}, bin_);
  EXPECT_EQ(r.exit, Exit::code(64)) << r.transcript;
  EXPECT_NE(r.err.find("--allow-job-ptrace"), std::string::npos) << r.transcript;
  EXPECT_EQ(field(r.out, "Uid:"), "") << "the program ran" << r.transcript;
}

TEST_F(Privileges, NoNewPrivsIsSet) {
  Outcome r = report({"--no-new-privs", "--user", "1000:100"}, bin_);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "NoNewPrivs:"), "1") << r.out;
}

TEST_F(Privileges, OnceProgramRunsTrainitKeepsOnlyCapKill) {
  Outcome r = report({"--user", "1000:100", "--caps", "drop"}, bin_, kKillOnly);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "parent CapEff:"), kKillOnly) << r.out;
  EXPECT_EQ(field(r.out, "parent CapBnd:"), kKillOnly) << r.out;
}

TEST_F(Privileges, WithRestartsTrainitKeepsWhatStartingProgramAgainTakes) {
  // CAP_KILL, CAP_SETGID (6), CAP_SETUID (7).
  constexpr const char* kKillAndSetIds = "00000000000000e0";
  Outcome r = report({"--user", "1000:100", "--restart", "on-failure"}, bin_, kKillAndSetIds);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_EQ(field(r.out, "parent CapEff:"), kKillAndSetIds) << r.out;
}

TEST_F(Privileges, UnknownUserIsAOneLineErrorBeforeAnythingStarts) {
  Outcome r = report({"--user", "no-such-user-here"}, bin_);
  EXPECT_EQ(r.exit, Exit::code(64)) << r.transcript;
  EXPECT_EQ(r.err, "trainit: error: --user no-such-user-here: no user 'no-such-user-here' in /etc/passwd\n")
      << r.transcript;
  EXPECT_EQ(r.out, "") << r.transcript;  // the helper never ran
}

TEST_F(Privileges, AUserTrainitMayNotSwitchToIsRefusedWith77) {
  Spec spec{.program = bin_ / "trainit", .uid = 1000, .gid = 100};
  spec.args = {"--user", "0:0", "--", bin_ / "privileges"};
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(77)) << r.transcript;
  EXPECT_NE(r.err.find("without CAP_SETUID"), std::string::npos) << r.transcript;
  EXPECT_EQ(r.out, "") << r.transcript;
}

TEST_F(Privileges, ACapabilityTrainitLacksIsRefusedWith77) {
  Spec spec{.program = bin_ / "trainit", .uid = 1000, .gid = 100};
  spec.args = {"--caps", "CAP_IPC_LOCK", "--", bin_ / "privileges"};
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(77)) << r.transcript;
  EXPECT_NE(r.err.find("--caps CAP_IPC_LOCK: trainit does not hold it"), std::string::npos) << r.transcript;
}

// --- job modes -------------------------------------------------------------------

TEST_F(Privileges, JobRanksRunAsTheUserAndItsFilesKeepOthersOut) {
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  Spec spec = job.spec({"--user", "1000:100", "--caps", "CAP_IPC_LOCK"}, {});
  spec.program = bin_ / "trainit";
  spec.args.resize(spec.args.size() - 2);  // job_rank and its record directory
  spec.args.push_back(bin_ / "privileges");
  Outcome r = run(spec);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  for (unsigned rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string log = slurp(job.log_file(rank));
    EXPECT_EQ(field(log, "Uid:"), "1000 1000 1000 1000") << log;
    EXPECT_EQ(field(log, "CapEff:"), "0000000000004000") << log;
    EXPECT_EQ(field(log, "kill parent:"), "EPERM") << log;
    EXPECT_EQ(field(log, "ptrace parent:"), ptrace_refusal()) << log;
    // Its working directory was made for it: the user's.
    struct stat st {};
    const std::string workspace = job.mount() + "/workspace/device" + std::to_string(rank);
    ASSERT_EQ(::stat(workspace.c_str(), &st), 0) << workspace;
    EXPECT_EQ(st.st_uid, 1000u);
    EXPECT_EQ(st.st_gid, 100u);
    ASSERT_EQ(::stat(job.log_file(rank).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u) << job.log_file(rank);
  }
  struct stat st {};
  ASSERT_EQ(::stat(job.status().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

// Every byte the job wrote: trainit's output and every file under `dir`
// (the status file, the rank logs), but what the rank recorded of itself.
std::string everything_written(const Outcome& r, const Job& job) {
  std::string all = r.out + r.err;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(job.root())) {
    if (entry.is_regular_file() && entry.path().parent_path() != job.rec()) {
      all += slurp(entry.path().string());
    }
  }
  return all;
}

TEST_F(Privileges, NoSecretReachesAnythingTheJobWrote) {
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  const std::vector<std::string> secrets = {"job-secret-4c1d9e", "hf_tokenvalue77", "s3cr3t-wandb-key", "pa55-w0rd-db",
                                            "cred-0f3e2a"};
  const std::vector<std::string> env =
      job.env({"TRAINIT_JOB_SECRET=" + secrets[0], "HF_TOKEN=" + secrets[1], "WANDB_THING=" + secrets[2],
               "DB_PASSWORD=" + secrets[3], "AWS_CREDENTIAL=" + secrets[4]});
  auto expect_none = [&](const std::string& text, const std::string& what) {
    for (const auto& secret : secrets) {
      EXPECT_EQ(text.find(secret), std::string::npos) << secret << " in " << what << ":\n" << text;
    }
  };

  // A job whose rank fails: its lines, its status file, its logs.
  Spec spec = job.spec({"-v", "-v", "--redact", "WANDB_*"}, {"record", "exit-if", "1", "3", "pause"});
  spec.env = env;
  Outcome r = run(spec);
  ASSERT_EQ(r.exit, Exit::code(3)) << r.transcript;
  expect_none(everything_written(r, job), "what the failing job wrote");
  EXPECT_EQ(slurp(job.record(0, "environ")).find(secrets[0]), std::string::npos) << "a rank holds the job secret";

  // A job whose program is not there, by a path holding the token: trainit
  // names the path in its error and in the status file, hidden.
  Job missing;
  ASSERT_TRUE(write_file(missing.table(), template1("completed", 1)));
  Spec lost{.env = env};
  lost.args = {"--status-file", missing.status(), "--redact", "WANDB_*", "--", "/nonexistent/" + secrets[1] + "/train"};
  lost.env = missing.env({"HF_TOKEN=" + secrets[1]});
  r = run(lost);
  ASSERT_EQ(r.exit, Exit::code(127)) << r.transcript;
  if (!kEmulated) {  // the error comes from spawn's report (emulation::kVforkIsFork)
    EXPECT_NE(r.err.find("/nonexistent/<redacted>/train"), std::string::npos) << r.transcript;
  }
  expect_none(everything_written(r, missing), "what the job without its program wrote");

  // `trainit plan` for a command line that holds them.
  Spec plan{.env = env};
  plan.args = {"plan", "--redact", "WANDB_*", "--", "train", "--token=" + secrets[1], "--key=" + secrets[2]};
  Outcome p = run(plan);
  ASSERT_EQ(p.exit, Exit::code(0)) << p.transcript;
  EXPECT_NE(p.out.find("\"--token=<redacted>\""), std::string::npos) << p.out;
  expect_none(p.out + p.err, "trainit plan");
}

}  // namespace
}  // namespace trainit::test
