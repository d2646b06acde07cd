// The job state machine (issue 5), against the real kernel with trainit as
// PID 1: ranks get exactly the planned environment, working directory and a
// session each; the rank table is waited for however it arrives (late,
// flipped to "completed", renamed into place, swapped by a ConfigMap symlink,
// caught torn) and the job starts once; a table that never completes exits
// 75, one that is complete and wrong exits 78; the first failing rank stops
// the others; a SIGTERM stops every rank; log files lose nothing, whatever
// the console or the log file system does; the status file and STATUS= show
// the state; the whole job runs as uid 1000.
//
// The ranks are tests/helpers/job_rank, which leaves records in the job's
// rec/ directory (see job_support.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "job_support.h"

namespace trainit::test {
namespace {

using job::count;
using job::exists;
using job::Job;
using job::ms;
using job::Pidfd;
using job::slurp;
using job::template1;
using job::template2;
using job::wait_err;
using job::wait_ready;
using job::wait_until;
using job::write_file;
using Json = nlohmann::ordered_json;

// inotify must see every change at once; the fallback poll (2 s after the
// wait began, 1.4 s after the change at the earliest) would come later. A
// start later than this after the change is a missed event; the margin is for
// a loaded machine.
constexpr auto kPromptStart = 1s;

// What `trainit plan --mode ascend -- COMMAND` prints in `env` (parsed), or
// null with the reason in `error`.
Json plan_of(const std::vector<std::string>& env, const std::vector<std::string>& command, std::string* error) {
  Spec spec;
  spec.layout = Layout::kNoNamespace;
  spec.env = env;
  spec.args = {"plan", "--mode", "ascend", "--"};
  spec.args.insert(spec.args.end(), command.begin(), command.end());
  Outcome o = run(spec);
  if (o.exit != Exit::code(0)) {
    *error = "trainit plan failed: " + o.transcript;
    return nullptr;
  }
  Json plan = Json::parse(o.out, nullptr, false);
  if (plan.is_discarded()) {
    *error = "trainit plan printed no JSON: " + o.transcript;
    return nullptr;
  }
  return plan;
}

std::vector<std::pair<std::string, std::string>> env_pairs(const Json& object) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, value] : object.items()) {
    out.emplace_back(name, value.get<std::string>());
  }
  return out;
}

// Every rank in `plan` got the planned environment (same variables, same
// values, same order), then, with more than one rank, the collective arena's
// five variables trainit sets at spawn; and its working directory, ran in a
// session and process group of its own (pid == pgid == sid) as a child of
// trainit (PID 1), and has its log file.
void expect_ranks_as_planned(const Job& job, const Json& plan) {
  std::set<std::string> pids;
  const size_t ranks = plan["processes"].size();
  size_t local = 0;
  for (const Json& p : plan["processes"]) {
    const unsigned rank = p["rank"].get<unsigned>();
    SCOPED_TRACE("rank " + std::to_string(rank) + " (" + p["name"].get<std::string>() + ")");
    auto got = job.environ(rank);
    auto planned = env_pairs(p["env"]);
    if (ranks > 1) {
      ASSERT_EQ(got.size(), planned.size() + 5);
      const std::vector<std::pair<std::string, std::string>> arena(got.end() - 5, got.end());
      EXPECT_EQ(arena[0].first, "TRAINIT_COLL_FD");
      EXPECT_EQ(arena[1], std::make_pair(std::string("TRAINIT_LOCAL_RANK"), std::to_string(local++)));
      EXPECT_EQ(arena[2], std::make_pair(std::string("TRAINIT_LOCAL_SIZE"), std::to_string(ranks)));
      EXPECT_EQ(arena[3].first, "TRAINIT_COLL_ID");
      // One socket a local peer, "-" at the rank's own index.
      EXPECT_EQ(arena[4].first, "TRAINIT_COLL_PEER_FDS");
      EXPECT_EQ(std::count(arena[4].second.begin(), arena[4].second.end(), ','), static_cast<long>(ranks) - 1);
      got.resize(got.size() - 5);
    }
    EXPECT_EQ(got, planned);
    auto info = job.info(rank);
    EXPECT_EQ(info["cwd"], p["cwd"].get<std::string>());
    EXPECT_FALSE(info["pid"].empty());
    EXPECT_EQ(info["pgid"], info["pid"]) << "not the leader of its own process group";
    EXPECT_EQ(info["sid"], info["pid"]) << "not the leader of its own session";
    EXPECT_EQ(info["ppid"], "1") << "not a child of trainit as PID 1";
    EXPECT_TRUE(pids.insert(info["pid"]).second) << "two ranks share a pid";
    EXPECT_TRUE(exists(p["output"]["log_file"].get<std::string>()));
  }
}

// The job started exactly once, every rank 0..ranks-1 once, no earlier than
// `before` (just before the table became complete) and promptly after it.
void expect_started_once(const Job& job, const Trainit& t, unsigned ranks, Clock::time_point before) {
  auto starts = job.starts();
  ASSERT_EQ(starts.size(), ranks) << "ranks started " << starts.size() << " times" << t.transcript();
  std::set<unsigned> seen;
  for (auto [rank, at] : starts) {
    EXPECT_TRUE(seen.insert(rank).second) << "rank " << rank << " started twice";
    EXPECT_GT(at, before) << "rank " << rank << " started before the table was complete";
    EXPECT_LT(at - before, kPromptStart) << "rank " << rank << " started " << ms(at - before)
                                         << " ms after the table was complete: inotify missed it";
  }
  EXPECT_EQ(count(t.err(), "wait_rank_table -> spawn"), 1u) << t.transcript();
}

// Starts a 2-rank job with `table` not yet complete, checks after 600 ms
// that nothing started, and returns the running trainit.
std::unique_ptr<Trainit> start_waiting(const Job& job) {
  auto t = std::make_unique<Trainit>(job.spec({"--rank-table-timeout", "30"}, {"record"}));
  if (t->started()) {
    EXPECT_TRUE(wait_err(*t, "wait_rank_table: ")) << t->transcript();
    std::this_thread::sleep_for(600ms);  // past any first look; well before the 2 s poll
    EXPECT_TRUE(job.starts().empty()) << "the job started before its table was complete" << t->transcript();
  }
  return t;
}

// --- The planned environment -------------------------------------------------

TEST(JobEnvironment, RanksReceiveExactlyThePlannedEnvironmentAndCwdEachInItsOwnSession) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 4)));
  Spec spec = job.spec({}, {"record"});
  spec.env.push_back("HCCL_CONNECT_TIMEOUT=600");  // the user's: kept
  spec.env.push_back("RANK_ID=stale");             // trainit's to set: replaced
  spec.env.push_back("TRAINIT_GRACE=2");           // trainit's own: withheld
  spec.env.push_back("TRAINIT_JOB_SECRET=s3cret");
  spec.env.push_back("TINI_KILL_PROCESS_GROUP=1");
  std::string error;
  Json plan = plan_of(spec.env, job.command({"record"}), &error);
  ASSERT_FALSE(plan.is_null()) << error;
  ASSERT_EQ(plan["processes"].size(), 4u) << plan.dump(2);
  for (const Json& p : plan["processes"]) {  // the plan itself is what the contract says
    const std::string rank = std::to_string(p["rank"].get<unsigned>());
    EXPECT_EQ(p["env"]["RANK_ID"], rank);
    EXPECT_EQ(p["env"]["DEVICE_ID"], rank);
    EXPECT_EQ(p["env"]["RANK_SIZE"], "4");
    EXPECT_EQ(p["env"]["JOB_ID"], std::string(job::kJobId));
    EXPECT_EQ(p["env"]["HCCL_CONNECT_TIMEOUT"], "600");
    EXPECT_EQ(p["cwd"], job.mount() + "/workspace/device" + rank);
    for (const char* name : {"TRAINIT_GRACE", "TRAINIT_JOB_SECRET", "TINI_KILL_PROCESS_GROUP"}) {
      EXPECT_FALSE(p["env"].contains(name)) << name;
    }
  }
  EXPECT_EQ(plan["settings"]["grace"]["source"], "variable TRAINIT_GRACE");

  Outcome r = run(spec);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  expect_ranks_as_planned(job, plan);
}

TEST(JobEnvironment, Template2PodRunsOnlyItsDevicesWithThePlannedEnvironmentAndTheConvertedTable) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template2("completed", 2, 2)));  // pods 0 and 1, 2 devices each
  Spec spec = job.spec({}, {"record"});
  std::string error;
  Json plan = plan_of(spec.env, job.command({"record"}), &error);
  ASSERT_FALSE(plan.is_null()) << error;
  ASSERT_EQ(plan["processes"].size(), 2u) << plan.dump(2);
  ASSERT_EQ(plan["files"].size(), 1u) << plan.dump(2);

  Outcome r = run(spec);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  expect_ranks_as_planned(job, plan);
  auto starts = job.starts();
  ASSERT_EQ(starts.size(), 2u);
  std::set<unsigned> ranks = {starts[0].first, starts[1].first};
  EXPECT_EQ(ranks, (std::set<unsigned>{0, 1})) << "pod 0 (sorted first) holds ranks 0 and 1";
  // The converted template-1 table the ranks' RANK_TABLE_FILE names.
  const std::string converted = plan["files"][0]["path"].get<std::string>();
  EXPECT_EQ(converted, job.mount() + "/rank_table/jobstart_hccl.json");
  EXPECT_EQ(slurp(converted), plan["files"][0]["content"].get<std::string>());
  EXPECT_EQ(plan["processes"][0]["env"]["RANK_TABLE_FILE"], converted);
}

// --- Waiting for the rank table ------------------------------------------------

TEST(RankTableWait, TableAppearingFiveSecondsLateStartsTheJobOnce) {
  TRAINIT_REQUIRE_ROOT();
  Job job;  // config/ is there, the table is not
  auto t = start_waiting(job);
  TRAINIT_ASSERT_STARTED(*t);
  std::this_thread::sleep_for(5s - 600ms);
  EXPECT_TRUE(job.starts().empty()) << t->transcript();
  EXPECT_NE(slurp(job.status()).find("\"wait_rank_table\""), std::string::npos) << slurp(job.status());
  const auto before = Clock::now();
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));  // created and written in place
  EXPECT_EQ(t->wait(), Exit::code(0)) << t->transcript();
  expect_started_once(job, *t, 2, before);
}

TEST(RankTableWait, TableFlippingFromInitializingToCompletedStartsTheJobOnce) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("initializing", 2)));
  auto t = start_waiting(job);
  TRAINIT_ASSERT_STARTED(*t);
  const auto before = Clock::now();
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));  // rewritten in place (O_TRUNC)
  EXPECT_EQ(t->wait(), Exit::code(0)) << t->transcript();
  expect_started_once(job, *t, 2, before);
}

TEST(RankTableWait, TableRenamedIntoPlaceStartsTheJobOnce) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  auto t = start_waiting(job);
  TRAINIT_ASSERT_STARTED(*t);
  const std::string tmp = job.config() + "/.jobstart_hccl.json.tmp";
  ASSERT_TRUE(write_file(tmp, template1("completed", 2)));  // complete, under another name
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(job.starts().empty()) << "a file of another name started the job" << t->transcript();
  const auto before = Clock::now();
  ASSERT_EQ(::rename(tmp.c_str(), job.table().c_str()), 0);
  EXPECT_EQ(t->wait(), Exit::code(0)) << t->transcript();
  expect_started_once(job, *t, 2, before);
}

TEST(RankTableWait, ConfigMapStyleSymlinkSwapStartsTheJobOnce) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  // What the kubelet makes of a ConfigMap volume: the file is a symlink into
  // ..data, itself a symlink to a timestamped directory; an update writes a
  // new directory and renames a new ..data symlink over the old one.
  const std::string old_dir = job.config() + "/..2026_01_01_00_00_00.000000001";
  const std::string new_dir = job.config() + "/..2026_01_01_00_00_05.000000002";
  ASSERT_EQ(::mkdir(old_dir.c_str(), 0755), 0);
  ASSERT_TRUE(write_file(old_dir + "/jobstart_hccl.json", template1("initializing", 2)));
  ASSERT_EQ(::symlink("..2026_01_01_00_00_00.000000001", (job.config() + "/..data").c_str()), 0);
  ASSERT_EQ(::symlink("..data/jobstart_hccl.json", job.table().c_str()), 0);
  auto t = start_waiting(job);
  TRAINIT_ASSERT_STARTED(*t);

  ASSERT_EQ(::mkdir(new_dir.c_str(), 0755), 0);
  ASSERT_TRUE(write_file(new_dir + "/jobstart_hccl.json", template1("completed", 2)));
  ASSERT_EQ(::symlink("..2026_01_01_00_00_05.000000002", (job.config() + "/..data_tmp").c_str()), 0);
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(job.starts().empty()) << "started before the swap" << t->transcript();
  const auto before = Clock::now();
  ASSERT_EQ(::rename((job.config() + "/..data_tmp").c_str(), (job.config() + "/..data").c_str()), 0);
  ::unlink((old_dir + "/jobstart_hccl.json").c_str());
  ::rmdir(old_dir.c_str());
  EXPECT_EQ(t->wait(), Exit::code(0)) << t->transcript();
  expect_started_once(job, *t, 2, before);
}

TEST(RankTableWait, TableCaughtTornIsNotReadyUntilWholeThenStartsTheJobOnce) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  auto t = start_waiting(job);
  TRAINIT_ASSERT_STARTED(*t);
  const std::string table = template1("completed", 2);
  const size_t half = table.size() / 2;
  int fd = ::open(job.table().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, table.data(), half), static_cast<ssize_t>(half));  // "status": "completed" is in it
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(job.starts().empty()) << "a torn table started the job" << t->transcript();
  siginfo_t info{};  // WNOWAIT: the harness still reaps it
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(t->pid()), &info, WEXITED | WNOHANG | WNOWAIT), 0);
  EXPECT_EQ(info.si_pid, 0) << "a torn table ended the wait" << t->transcript();
  const auto before = Clock::now();
  ASSERT_EQ(::write(fd, table.data() + half, table.size() - half), static_cast<ssize_t>(table.size() - half));
  ::close(fd);
  EXPECT_EQ(t->wait(), Exit::code(0)) << t->transcript();
  expect_started_once(job, *t, 2, before);
}

// --- A table that never completes, or is wrong ---------------------------------

TEST(RankTableWait, TableThatNeverCompletesExits75NamingTheLastStatusSeen) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("initializing", 2)));
  Outcome r = run(job.spec({"--rank-table-timeout", "1"}, {"record"}));
  EXPECT_EQ(r.exit, Exit::code(75)) << r.transcript;
  EXPECT_GE(r.elapsed, 900ms) << r.transcript;
  EXPECT_LT(r.elapsed, 3s) << r.transcript;
  EXPECT_NE(r.err.find(job.table()), std::string::npos) << "the message names no file" << r.transcript;
  EXPECT_NE(r.err.find("\"initializing\""), std::string::npos) << "the message names no status" << r.transcript;
  EXPECT_TRUE(job.starts().empty());
}

TEST(RankTableWait, TableThatNeverAppearsExits75SayingSo) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  Outcome r = run(job.spec({"--rank-table-timeout", "1"}, {"record"}));
  EXPECT_EQ(r.exit, Exit::code(75)) << r.transcript;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.transcript;
  EXPECT_TRUE(job.starts().empty());
}

TEST(RankTableWait, TableThatNeverParsesExits75WithTheParseErrorsLineAndColumn) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  // Torn for good after its third line; the parser stops at line 3, column 20.
  ASSERT_TRUE(write_file(job.table(), "{\n  \"status\": \"completed\",\n  \"server_list\": [ {\"server_id\""));
  Outcome r = run(job.spec({"--rank-table-timeout", "1"}, {"record"}));
  EXPECT_EQ(r.exit, Exit::code(75)) << r.transcript;
  EXPECT_NE(r.err.find("line 3, column"), std::string::npos) << "no line and column" << r.transcript;
  EXPECT_TRUE(job.starts().empty());
}

// A complete template-1 table of 2 devices that lists rank 0 twice.
std::string invalid_table() {
  std::string table = template1("completed", 2);
  table.replace(table.find("\"rank_id\": \"1\""), 14, "\"rank_id\": \"0\"");
  return table;
}

TEST(RankTableWait, CompletedTableThatFailsValidationExits78AtOnceStartingNothing) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), invalid_table()));
  Outcome r = run(job.spec({"--rank-table-timeout", "60"}, {"record"}));
  EXPECT_EQ(r.exit, Exit::code(78)) << r.transcript;
  EXPECT_LT(r.elapsed, 1s) << "waited for a table that cannot get better" << r.transcript;
  EXPECT_NE(r.err.find("repeated rank_id"), std::string::npos) << r.transcript;
  EXPECT_TRUE(job.starts().empty()) << "a rank started";
  EXPECT_FALSE(exists(job.log_file(0))) << "a rank's log file was made";
  EXPECT_EQ(count(r.err, "-> spawn"), 0u) << r.transcript;
}

TEST(RankTableWait, TableFlippingToCompletedButInvalidExits78AtTheFlip) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("initializing", 2)));
  auto t = start_waiting(job);
  TRAINIT_ASSERT_STARTED(*t);
  const auto before = Clock::now();
  ASSERT_TRUE(job::replace_file(job.table(), invalid_table()));
  EXPECT_EQ(t->wait(), Exit::code(78)) << t->transcript();
  EXPECT_LT(Clock::now() - before, 1s) << t->transcript();
  EXPECT_NE(t->err().find("repeated rank_id"), std::string::npos) << t->transcript();
  EXPECT_TRUE(job.starts().empty()) << "a rank started";
}

// A table that gives its status twice, "initializing" then "completed": the
// look at the status first does not take the first one (the run waited out
// --rank-table-timeout for it, exit 75), it is refused for its repeated key,
// at once, as `trainit plan` refuses it (tests/golden/cases/error-repeated-status).
TEST(RankTableWait, TableGivingItsStatusTwiceExits78AtOnceAsPlanRefusesIt) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  std::string table = template1("initializing", 2);
  table.insert(table.rfind('}'), ", \"status\": \"completed\"\n");
  ASSERT_TRUE(write_file(job.table(), table));
  Outcome r = run(job.spec({"--rank-table-timeout", "60"}, {"record"}));
  EXPECT_EQ(r.exit, Exit::code(78)) << r.transcript;
  EXPECT_LT(r.elapsed, 1s) << "waited for a table that cannot get better" << r.transcript;
  EXPECT_NE(r.err.find(job.table() + ": status: repeated key"), std::string::npos) << r.transcript;
  EXPECT_TRUE(job.starts().empty()) << "a rank started";
}

// --- Stopping ------------------------------------------------------------------

// Rank actions: record, SIGTERM as `on_term` says, "ready", wait for DIR/go,
// rank `failing` exits `code`, the others wait for signals.
std::vector<std::string> stop_job(const char* on_term, unsigned failing, int code) {
  return {"record",
          "on-term",
          on_term,
          "ready",
          "wait-file",
          "go",
          "exit-if",
          std::to_string(failing),
          std::to_string(code),
          "pause"};
}

TEST(JobStop, RankExiting7StopsTheOthersWithSigtermAndTrainitExits7) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 4)));
  Trainit t(job.spec({"--grace", "5"}, stop_job("exit", 2, 7)));
  TRAINIT_ASSERT_STARTED(t);
  auto pids = wait_ready(t, 4);
  ASSERT_EQ(std::count(pids.begin(), pids.end(), -1), 0) << t.transcript();
  Pidfd failing(pids[2]);
  ASSERT_TRUE(job.release());
  auto failed = failing.wait_dead(kTimeout);
  ASSERT_TRUE(failed) << t.transcript();
  EXPECT_EQ(t.wait(), Exit::code(7)) << t.transcript();
  const auto exited = Clock::now();
  EXPECT_LT(exited - *failed, 1s) << "trainit took " << ms(exited - *failed) << " ms to end the job";
  for (unsigned r : {0u, 1u, 3u}) {
    auto term = job.term(r);
    ASSERT_TRUE(term) << "rank " << r << " got no SIGTERM" << t.transcript();
    EXPECT_GE(*term, *failed - 50ms) << "rank " << r;
  }
  EXPECT_FALSE(job.term(2)) << "the failed rank was signalled";
  auto status = Json::parse(slurp(job.status()), nullptr, false);
  ASSERT_FALSE(status.is_discarded()) << slurp(job.status());
  EXPECT_EQ(status["exit_code"], 7);
}

TEST(JobStop, RankIgnoringSigtermIsKilledAfterTheGraceNotBefore) {
  TRAINIT_REQUIRE_ROOT();
  constexpr auto kGrace = 500ms;
  constexpr auto kMargin = 50ms;
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  Trainit t(job.spec({"--grace", "0.5"}, stop_job("ignore", 1, 7)));
  TRAINIT_ASSERT_STARTED(t);
  auto pids = wait_ready(t, 2);
  Pidfd stubborn(pids[0]);
  ASSERT_TRUE(stubborn.valid()) << t.transcript();
  ASSERT_TRUE(job.release());
  ASSERT_TRUE(wait_until([&] { return job.term(0).has_value(); })) << "no SIGTERM" << t.transcript();
  const auto term = *job.term(0);
  EXPECT_FALSE(stubborn.wait_dead(kGrace - kMargin - (Clock::now() - term))) << "killed before the grace was over";
  auto death = stubborn.wait_dead(kGrace + 2s);
  ASSERT_TRUE(death) << "still alive 2 s after the grace" << t.transcript();
  EXPECT_GE(*death - term, kGrace - kMargin);
  EXPECT_LT(*death - term, kGrace + 500ms) << "SIGKILL came " << ms(*death - term) << " ms after SIGTERM";
  EXPECT_EQ(t.wait(), Exit::code(7)) << "the failed rank's code" << t.transcript();
}

TEST(JobStop, SigtermToTrainitReachesEveryRankAndExits143) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 4)));
  Trainit t(job.spec({"--grace", "5"}, {"record", "on-term", "exit", "ready", "pause"}));
  TRAINIT_ASSERT_STARTED(t);
  auto pids = wait_ready(t, 4);
  ASSERT_EQ(std::count(pids.begin(), pids.end(), -1), 0) << t.transcript();
  const auto sent = Clock::now();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(143)) << "every rank exited 0; 143 is trainit's own stop" << t.transcript();
  EXPECT_LT(Clock::now() - sent, 1s);
  for (unsigned r = 0; r < 4; ++r) {
    auto term = job.term(r);
    ASSERT_TRUE(term) << "rank " << r << " got no SIGTERM" << t.transcript();
    EXPECT_GT(*term, sent);
  }
}

TEST(JobStop, SigtermWhileWaitingForTheTableExits143StartingNothing) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("initializing", 2)));
  auto t = start_waiting(job);
  TRAINIT_ASSERT_STARTED(*t);
  const auto sent = Clock::now();
  ASSERT_EQ(t->signal(SIGTERM), 0);
  EXPECT_EQ(t->wait(), Exit::code(143)) << t->transcript();
  EXPECT_LT(Clock::now() - sent, 1s) << t->transcript();
  EXPECT_TRUE(job.starts().empty());
}

TEST(JobStop, RankExiting0EarlyLeavesTheOthersRunningAndTheJobExits0) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 3)));
  // Rank 0 is done at once; the others finish 300 ms later, untouched.
  Trainit t(job.spec({}, {"on-term", "exit", "exit-if", "0", "0", "sleep", "300", "print", "finished"}));
  TRAINIT_ASSERT_STARTED(t);
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (unsigned r = 1; r < 3; ++r) {
    EXPECT_FALSE(job.term(r)) << "rank " << r << " was stopped when rank 0 exited 0" << t.transcript();
    EXPECT_EQ(slurp(job.log_file(r)), "finished\n") << "rank " << r;
  }
}

// A child of this test whose pid (and so its process group and session) is
// `pid`, made by setting the next pid the kernel hands out; -1 when other
// forks on the machine took it every time.
pid_t fork_with_pid(pid_t pid) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (!write_file("/proc/sys/kernel/ns_last_pid", std::to_string(pid - 1))) {
      return -1;
    }
    pid_t child = ::fork();
    if (child == 0) {
      if (::getpid() != pid) {
        ::_exit(0);
      }
      ::setsid();
      for (;;) {
        ::pause();
      }
    }
    if (child == pid) {
      return child;
    }
    if (child > 0) {
      ::waitpid(child, nullptr, 0);
    }
  }
  return -1;
}

// Not PID 1 (under systemd, say), trainit's stop must not reach a process
// outside its tree that took the pid, and so the group id, of a rank that
// exited before the stop.
TEST(JobStop, StopDoesNotSignalAStrangerHoldingTheGroupIdOfARankAlreadyReaped) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kNoSubreaper);
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  Spec spec = job.spec({"--grace", "5"}, {"on-term", "exit", "exit-if", "0", "0", "ready", "pause"});
  spec.layout = Layout::kNoNamespace;
  Trainit t(spec);
  TRAINIT_ASSERT_STARTED(t);
  pid_t reaped = -1;
  ASSERT_TRUE(wait_until([&] {
    auto status = Json::parse(slurp(job.status()), nullptr, false);
    if (status.is_discarded() || status["ranks"].size() != 2 || status["ranks"][0]["state"] != "exited") {
      return false;
    }
    reaped = status["ranks"][0]["pid"].get<pid_t>();
    return true;
  })) << "rank 0 did not exit"
      << t.transcript();
  const pid_t stranger = fork_with_pid(reaped);
  ASSERT_EQ(stranger, reaped) << "could not take pid " << reaped;
  ASSERT_EQ(t.signal(SIGTERM), 0);
  const Exit exit = t.wait();
  int status = 0;
  const pid_t gone = ::waitpid(stranger, &status, WNOHANG);
  ::kill(stranger, SIGKILL);
  ::waitpid(stranger, nullptr, 0);
  EXPECT_EQ(exit, Exit::code(143)) << t.transcript();
  EXPECT_EQ(gone, 0) << "the stranger in group " << reaped << " was killed by signal "
                     << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

TEST(JobStop, CommandThatCannotBeExecutedExits127WithNothingLeft) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  Spec spec = job.spec({}, {});
  spec.args = {"--status-file", job.status(), "--", job.path("no-such-program")};
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(127)) << r.transcript;
  TRAINIT_SKIP_UNDER_EMULATION(emulation::kVforkIsFork);
  EXPECT_NE(r.err.find("no-such-program"), std::string::npos) << r.transcript;
}

// --- Logs ------------------------------------------------------------------------

// trainit's stdout (the console) replaced by `fd`.
Spec with_console(Spec spec, int fd) {
  spec.fds.emplace_back(fd, STDOUT_FILENO);
  return spec;
}

TEST(JobLogs, SixtyFourMiBOfRandomDataThenSigkillHasEveryByteInTheLogFile) {
  TRAINIT_REQUIRE_ROOT();
  constexpr size_t kBytes = size_t{64} << 20;
  constexpr uint64_t kSeed = 20260105;
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 1)));
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  // The rank writes as fast as the pipe takes it and dies with whatever the
  // pipe still holds unread.
  Spec spec =
      with_console(job.spec({}, {"random", std::to_string(kBytes), std::to_string(kSeed), "kill-self"}), devnull);
  Outcome r = run(spec, 30s);
  ::close(devnull);
  EXPECT_EQ(r.exit, Exit::code(137)) << r.transcript;
  std::string got = slurp(job.log_file(0));
  std::string want = job::random_stream(kBytes, kSeed, 0);
  EXPECT_EQ(got.size(), kBytes);
  EXPECT_TRUE(got == want) << job::compare_bytes(got, want);
}

TEST(JobLogs, ConsolePipeNobodyReadsDoesNotStopFourRanksAndTheirLogsAreComplete) {
  TRAINIT_REQUIRE_ROOT();
  constexpr size_t kBytes = size_t{8} << 20;  // per rank, 128 times the console pipe
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 4)));
  int console[2];
  ASSERT_EQ(::pipe2(console, O_CLOEXEC), 0);  // read end held open, never read
  // stdout and stderr share it (`2>&1 | slow-reader`): trainit's own lines
  // wait behind the ranks' output, and must never block the loop.
  Spec spec = with_console(job.spec({}, {"lines", std::to_string(kBytes)}), console[1]);
  spec.fds.emplace_back(console[1], STDERR_FILENO);
  Outcome r = run(spec, 30s);
  ::close(console[0]);
  ::close(console[1]);
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_LT(r.elapsed, 10s) << r.transcript;
  for (unsigned rank = 0; rank < 4; ++rank) {
    std::string got = slurp(job.log_file(rank));
    std::string want = job::lines_stream(kBytes, rank);
    EXPECT_TRUE(got == want) << "rank " << rank << ": " << job::compare_bytes(got, want);
  }
  auto status = Json::parse(slurp(job.status()), nullptr, false);
  ASSERT_FALSE(status.is_discarded()) << slurp(job.status());
  EXPECT_EQ(status["state"], "exit");
  EXPECT_EQ(status["exit_code"], 0);
}

TEST(JobLogs, ConsoleShowsEachRanksWholeLinesPrefixedByItsRank) {
  TRAINIT_REQUIRE_ROOT();
  // Per rank; the four together with their prefixes (209 KiB) fit trainit's
  // console buffer (256 KiB) even if the reader stalled, so nothing may be
  // dropped.
  constexpr size_t kBytes = size_t{48} << 10;
  constexpr size_t kLines = kBytes / 100;
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 4)));
  Outcome r = run(job.spec({}, {"lines", std::to_string(kBytes)}), 20s);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  // Four ranks write at once: each console line is one whole line of one
  // rank, after that rank's prefix, in the rank's order, none missing.
  std::vector<long long> last(4, -1);
  std::vector<size_t> shown(4, 0);
  size_t bad = 0;
  std::string first_bad;
  for (const auto& line : lines_of(r.out)) {
    unsigned rank = 0, also = 0;
    long long n = -1;
    int used = 0;
    bool ok = std::sscanf(line.c_str(), "[rank %u] rank %u line %lld %n", &rank, &also, &n, &used) == 3 && rank < 4 &&
              also == rank && line.size() == 9 + 99 &&
              line.find_first_not_of('x', static_cast<size_t>(used)) == std::string::npos && n == last[rank] + 1;
    if (ok) {
      last[rank] = n;
      ++shown[rank];
    } else if (bad++ == 0) {
      first_bad = line.substr(0, 200);
    }
  }
  EXPECT_EQ(bad, 0u) << "e.g. '" << first_bad << "'";
  EXPECT_EQ(shown, std::vector<size_t>(4, kLines));
  EXPECT_EQ(r.err.find("not shown on the console"), std::string::npos) << r.transcript;
}

TEST(JobLogs, RankKilledMidLineKeepsThePartialLineInItsFileAndShowsItWhole) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 1)));
  Outcome r = run(job.spec({}, {"print", "first", "write", "half a line", "kill-self"}));
  EXPECT_EQ(r.exit, Exit::code(137)) << r.transcript;
  EXPECT_EQ(slurp(job.log_file(0)), "first\nhalf a line") << "the file gets the bytes as written";
  EXPECT_NE(r.out.find("[rank 0] first\n[rank 0] half a line\n"), std::string::npos) << r.transcript;
}

// A tmpfs mounted over `path` for the test's lifetime.
class Tmpfs {
 public:
  Tmpfs(std::string path, const char* options) : path_(std::move(path)) {
    if (::mount("tmpfs", path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options) < 0) {
      error_ = std::strerror(errno);
    }
  }
  ~Tmpfs() {
    if (error_.empty()) {
      ::umount2(path_.c_str(), MNT_DETACH);
    }
  }
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  std::string path_;
  std::string error_;
};

// Fills the file system of `path` with the file `path`; false when it
// could not (no file made, or another error than ENOSPC ended the writes).
bool fill_up(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return false;
  }
  const std::string block(4096, 'f');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  const bool full = errno == ENOSPC;
  ::close(fd);
  return full;
}

TEST(JobLogs, FullLogTmpfsDoesNotStopTheJobAndTheErrorIsReportedOncePerJob) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  Tmpfs tmpfs(job.log_dir(), "size=1m,mode=0755");
  ASSERT_TRUE(tmpfs.error().empty()) << "mount -t tmpfs: " << tmpfs.error();
  ASSERT_TRUE(fill_up(job.log_dir() + "/filler"));
  Outcome r = run(job.spec({}, {"print", "hello", "lines", std::to_string(256 << 10), "print", "done"}), 20s);
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  for (unsigned rank = 0; rank < 2; ++rank) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    EXPECT_NE(r.out.find(prefix + "done\n"), std::string::npos) << "the console did not carry on" << r.transcript;
  }
  // Both ranks' files fail the same way: one line says so, not one per rank.
  EXPECT_EQ(job::count(r.err, "No space left on device"), 1u) << r.transcript;
}

// A full disk is often brief (a checkpoint deleted, a quota raised): the
// rank's file is kept and written again once there is room, not given up
// for the rest of a job that may run for days; what could not go in is
// counted and said.
TEST(JobLogs, ARanksLogOnAFullDiskIsWrittenAgainOnceThereIsRoomAndTheLossIsSaid) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 1)));
  Tmpfs tmpfs(job.log_dir(), "size=1m,mode=0755");
  ASSERT_TRUE(tmpfs.error().empty()) << "mount -t tmpfs: " << tmpfs.error();
  const std::string filler = job.log_dir() + "/filler";
  ASSERT_TRUE(fill_up(filler));
  Trainit t(job.spec({}, {"print", "before", "ready", "wait-file", "go", "print", "after"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_EQ(wait_ready(t, 1).at(0) > 0, true) << t.transcript();
  ASSERT_TRUE(wait_err(t, "No space left on device")) << t.transcript();
  ASSERT_EQ(::unlink(filler.c_str()), 0);
  ASSERT_TRUE(job.release());
  EXPECT_EQ(t.wait(10s), Exit::code(0)) << t.transcript();
  const std::string log = job::slurp(job.log_file(0));
  EXPECT_EQ(log.find("before"), std::string::npos) << log;
  EXPECT_NE(log.find("after\n"), std::string::npos) << "the file was given up for good" << t.transcript();
  EXPECT_EQ(job::count(t.err(), "written again;"), 1u) << t.transcript();
}

// Issue 5: "A log directory that cannot be written (full, read-only) is
// reported once and the job goes on with the console."
TEST(JobLogs, ReadOnlyLogDirectoryDoesNotStopTheJobAndIsReportedOncePerJob) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 4)));
  ASSERT_EQ(::mount(job.log_dir().c_str(), job.log_dir().c_str(), nullptr, MS_BIND, nullptr), 0)
      << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{job.log_dir()};
  ASSERT_EQ(::mount(nullptr, job.log_dir().c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0)
      << std::strerror(errno);
  Outcome r = run(job.spec({}, {"print", "done"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  for (unsigned rank = 0; rank < 4; ++rank) {
    EXPECT_NE(r.out.find("[rank " + std::to_string(rank) + "] done\n"), std::string::npos)
        << "the console did not carry on" << r.transcript;
  }
  EXPECT_EQ(job::count(r.err, "Read-only file system"), 1u) << "once per job, not per rank" << r.transcript;
  // The one line says that it stands for every rank's files, and how to see each.
  EXPECT_EQ(job::count(r.err, "other ranks' log files and directories failing alike are not named; -v names each"), 1u)
      << r.transcript;
}

// The log directory is the job user's, PID 1 root: a FIFO planted at rank
// 0's log file must not block PID 1 in open() (it would answer no signal and
// reap nothing), nor a symbolic link make root append elsewhere. Each is
// refused with one line naming it; the job goes on with the console.
TEST(JobLogs, AFifoOrSymlinkPlantedAtARanksLogFileIsRefusedAndPid1StillAnswersSigterm) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 3)));
  ASSERT_EQ(::mkfifo(job.log_file(0).c_str(), 0666), 0);
  const std::string victim = job.path("victim");
  ASSERT_TRUE(write_file(victim, "precious\n"));
  ASSERT_EQ(::symlink(victim.c_str(), job.log_file(1).c_str()), 0);
  Trainit t(job.spec({"--grace", "5"}, {"print", "hello", "ready", "pause"}));
  TRAINIT_ASSERT_STARTED(t);
  auto pids = wait_ready(t, 3);
  ASSERT_EQ(std::count(pids.begin(), pids.end(), -1), 0)
      << "PID 1 blocked before starting every rank" << t.transcript();
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(10s), Exit::code(143)) << t.transcript();
  EXPECT_EQ(job::slurp(victim), "precious\n") << "root wrote through the planted link";
  EXPECT_EQ(job::count(t.err(), job.log_file(0) + ": a FIFO is there; refused"), 1u) << t.transcript();
  EXPECT_EQ(job::count(t.err(), job.log_file(1) + ": a symbolic link is there; refused"), 1u) << t.transcript();
  EXPECT_EQ(job::slurp(job.log_file(2)).rfind("hello\nready 2 pid ", 0), 0u) << "the others' logs as usual";
}

// A rank (or anyone who can write the mount) replaces the log directory with
// a symbolic link to a directory only root may write: PID 1 refuses the
// link (once, naming it) instead of creating the ranks' logs there, and the
// job runs on with the console.
TEST(JobLogs, ASymbolicLinkForTheLogDirectoryIsRefusedAndRootWritesNothingThroughIt) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  const std::string root_only = job.path("root-only");
  ASSERT_EQ(::mkdir(root_only.c_str(), 0700), 0);
  std::filesystem::remove_all(job.log_dir());
  ASSERT_EQ(::symlink(root_only.c_str(), job.log_dir().c_str()), 0);
  Outcome r = run(job.spec({}, {"print", "hello", "exit", "0"}));
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  EXPECT_TRUE(std::filesystem::is_empty(root_only)) << "root wrote through the link" << r.transcript;
  EXPECT_EQ(job::count(r.err, job.log_dir() + ": a symbolic link is there; refused"), 1u) << r.transcript;
  EXPECT_EQ(job::count(r.out, "hello"), 2u) << "the ranks' output is on the console" << r.transcript;
}

// The default log directory, /tmp/log, where another local user was first:
// a file they made where a rank's log goes, or the directory itself, is
// refused (naming whose it is), never written into.
TEST(JobLogs, AnotherUsersFilesOrDirectoryAtTheDefaultTmpLogAreRefusedNotWrittenInto) {
  TRAINIT_REQUIRE_ROOT();
  constexpr uid_t kStranger = 4242;
  for (const bool whole_directory : {false, true}) {
    Job job;
    ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
    std::filesystem::remove_all(job.log_dir());  // no <mount>/log: the logs go to /tmp/log
    TempDir tmp;
    ASSERT_EQ(::chmod(tmp.path().c_str(), 01777), 0);
    const std::string log = tmp / "log";
    ASSERT_EQ(::mkdir(log.c_str(), 0755), 0);
    const std::string planted = log + "/" + std::filesystem::path(job.log_file(0)).filename().string();
    ASSERT_TRUE(write_file(planted, "theirs\n"));
    ASSERT_EQ(::chown((whole_directory ? log : planted).c_str(), kStranger, kStranger), 0);
    Spec s = job.spec({}, {"print", "hello", "exit", "0"});
    s.tmp = tmp.path();
    Outcome r = run(s);
    EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
    EXPECT_EQ(job::slurp(planted), "theirs\n") << "PID 1 wrote into another user's file" << r.transcript;
    EXPECT_NE(r.err.find("owned by uid 4242, neither trainit's user nor the job's; refused"), std::string::npos)
        << r.transcript;
    if (whole_directory) {
      EXPECT_EQ(std::distance(std::filesystem::directory_iterator(log), {}), 1) << "nothing made in their directory";
    }
  }
}

// --- Observable state ------------------------------------------------------------

TEST(JobStatus, StatusFileIsSchemaV1JsonFromRunningToExitWithEveryRanksCodeStateAndTheJobsCause) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 3)));
  Trainit t(job.spec({"--grace", "5"}, stop_job("exit", 1, 3)));
  TRAINIT_ASSERT_STARTED(t);
  auto pids = wait_ready(t, 3);
  ASSERT_EQ(std::count(pids.begin(), pids.end(), -1), 0) << t.transcript();

  const double now = static_cast<double>(std::time(nullptr));
  Json running = Json::parse(slurp(job.status()), nullptr, false);
  ASSERT_FALSE(running.is_discarded()) << "not JSON: " << slurp(job.status());
  EXPECT_EQ(running["schema"], "trainit.status/v1");
  EXPECT_EQ(running["state"], "running");
  EXPECT_EQ(running["mode"], "ascend");
  EXPECT_EQ(running["host"], std::string(job::kHostIp));
  EXPECT_EQ(running["pid"], 1);
  EXPECT_TRUE(running["exit_code"].is_null());
  EXPECT_TRUE(running["cause"].is_null()) << running.dump();
  ASSERT_TRUE(running["since"].is_number()) << running.dump();
  EXPECT_NEAR(running["since"].get<double>(), now, 10.0);
  ASSERT_EQ(running["ranks"].size(), 3u) << running.dump(2);
  for (const Json& rank : running["ranks"]) {
    EXPECT_EQ(rank["state"], "running") << rank.dump();
    EXPECT_TRUE(rank["exit_code"].is_null()) << rank.dump();
    EXPECT_TRUE(rank["pid"].is_number_integer()) << rank.dump();
    EXPECT_EQ(rank["name"], "proc-rank-" + std::to_string(rank["rank"].get<unsigned>()) + "-device-" +
                                std::to_string(rank["rank"].get<unsigned>()));
  }

  ASSERT_TRUE(job.release());
  EXPECT_EQ(t.wait(), Exit::code(3)) << t.transcript();
  Json done = Json::parse(slurp(job.status()), nullptr, false);
  ASSERT_FALSE(done.is_discarded()) << "not JSON: " << slurp(job.status());
  EXPECT_EQ(done["schema"], "trainit.status/v1");
  EXPECT_EQ(done["state"], "exit");
  EXPECT_EQ(done["exit_code"], 3);
  EXPECT_TRUE(done["reason"].is_string());
  // Why the job ended survives the transitions after it.
  ASSERT_TRUE(done["cause"].is_string()) << done.dump(2);
  EXPECT_NE(done["cause"].get<std::string>().find("proc-rank-1-device-1"), std::string::npos) << done.dump(2);
  EXPECT_NE(done["cause"].get<std::string>().find("exited with 3"), std::string::npos) << done.dump(2);
  ASSERT_EQ(done["ranks"].size(), 3u) << done.dump(2);
  for (const Json& rank : done["ranks"]) {
    // Rank 1 failed on its own; trainit stopped the others (they exit 0 on SIGTERM).
    EXPECT_EQ(rank["state"], rank["rank"] == 1 ? "failed" : "stopped") << rank.dump();
    EXPECT_EQ(rank["exit_code"], rank["rank"] == 1 ? 3 : 0) << rank.dump();
  }
  // Rewritten by rename: no temporary file is left beside it.
  for (const auto& entry : std::filesystem::directory_iterator(job.root())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("status.json.")) << entry.path();
  }
}

TEST(JobStatus, DefaultStatusFileIsPerInstanceUnderTmp) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 1)));
  const std::string pid = std::to_string(::getpid());
  // trainit's /tmp is the job's own directory here, so the test sees the file.
  const std::string tmp = job.path("tmp");
  ASSERT_EQ(::mkdir(tmp.c_str(), 01777), 0);
  const std::string expected = tmp + "/trainit-status-it5-" + pid + "_worker_0.json";  // '/' and ' ' made safe
  Spec spec;
  spec.tmp = tmp;
  spec.env = job.env({"MA_CURRENT_INSTANCE_NAME=it5-" + pid + "/worker 0"});
  spec.args = {"--"};
  for (auto& a : job.command({"exit", "0"})) {
    spec.args.push_back(a);
  }
  Outcome r = run(spec);
  EXPECT_EQ(r.exit, Exit::code(0)) << r.transcript;
  std::string text = slurp(expected);
  Json status = Json::parse(text, nullptr, false);
  ASSERT_FALSE(status.is_discarded()) << expected << ": " << text << r.transcript;
  EXPECT_EQ(status["state"], "exit");
  EXPECT_EQ(status["exit_code"], 0);
}

TEST(JobStatus, StatusReachesNotifySocketOnEveryTransition) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  job::NotifyListener listener(job.path("notify.sock"));
  ASSERT_TRUE(listener.error().empty()) << listener.error();
  Spec spec = job.spec({}, {"record", "exit", "0"});
  spec.env.push_back(listener.variable());
  Outcome r = run(spec);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  ASSERT_TRUE(wait_until(
      [&] {
        auto lines = listener.lines();
        return !lines.empty() && lines.back() == "STATUS=exited with 0";
      },
      2s))
      << "no final status";

  // Each state's STATUS= once, in the machine's order; READY=1 once running,
  // STOPPING=1 on the way out.
  std::vector<std::string> states;
  std::string all;
  size_t ready = 0, stopping = 0, running_at = 0, stopping_at = 0;
  for (const auto& line : listener.lines()) {
    all += line + "\n";
    if (line.starts_with("STATUS=") && line.find(": ") != std::string::npos) {
      states.push_back(line.substr(7, line.find(": ") - 7));
      if (states.back() == "running") {
        running_at = states.size();
      }
      if (states.back() == "stopping") {
        stopping_at = states.size();
      }
    } else if (line == "READY=1") {
      ready = states.size();
      EXPECT_EQ(running_at, states.size()) << "READY=1 before running\n" << all;
    } else if (line == "STOPPING=1") {
      stopping = states.size();
      EXPECT_EQ(stopping_at, states.size()) << "STOPPING=1 outside stopping\n" << all;
    }
  }
  EXPECT_EQ(states, (std::vector<std::string>{"wait_rank_table", "spawn", "running", "stopping", "reaping", "exit"}))
      << all;
  EXPECT_GT(ready, 0u) << all;
  EXPECT_GT(stopping, 0u) << all;
  for (unsigned rank = 0; rank < 2; ++rank) {
    for (const auto& [name, value] : job.environ(rank)) {
      EXPECT_NE(name, "NOTIFY_SOCKET") << "rank " << rank << " would talk to trainit's supervisor";
    }
  }
}

TEST(JobStatus, RanksExitingZeroOnTheirOwnAreExitedAndTheJobHasNoCause) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  Outcome r = run(job.spec({}, {"exit", "0"}));
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  Json done = Json::parse(slurp(job.status()), nullptr, false);
  ASSERT_FALSE(done.is_discarded()) << slurp(job.status());
  EXPECT_TRUE(done["cause"].is_null()) << done.dump(2);
  for (const Json& rank : done["ranks"]) {
    EXPECT_EQ(rank["state"], "exited") << rank.dump();
  }
}

// Under systemd's WatchdogSec= (container/trainit.service) a job mode must
// send WATCHDOG=1 itself, and no rank may see the supervisor's variables.
TEST(JobStatus, WatchdogIsPettedAndRanksDoNotInheritTheSupervisorsVariables) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  job::NotifyListener listener(job.path("notify.sock"));
  ASSERT_TRUE(listener.error().empty()) << listener.error();
  Spec spec = job.spec({}, {"record", "ready", "wait-file", "go", "exit", "0"});
  spec.env.push_back(listener.variable());
  spec.env.push_back("WATCHDOG_USEC=200000");  // WATCHDOG=1 every 100 ms
  Trainit t(spec);
  TRAINIT_ASSERT_STARTED(t);
  auto pids = wait_ready(t, 2);
  ASSERT_EQ(std::count(pids.begin(), pids.end(), -1), 0) << t.transcript();
  ASSERT_TRUE(wait_until([&] {
    auto lines = listener.lines();
    return std::count(lines.begin(), lines.end(), "WATCHDOG=1") >= 3;
  })) << "no WATCHDOG=1 every 100 ms";
  ASSERT_TRUE(job.release());
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  for (unsigned rank = 0; rank < 2; ++rank) {
    for (const auto& [name, value] : job.environ(rank)) {
      EXPECT_TRUE(name != "NOTIFY_SOCKET" && name != "WATCHDOG_USEC" && name != "WATCHDOG_PID")
          << "rank " << rank << " got " << name;
    }
  }
}

// --- As a user -------------------------------------------------------------------

TEST(JobAsUser, WholeJobRunsAsUid1000AsPid1) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(write_file(job.table(), template1("completed", 2)));
  ASSERT_EQ(::chmod(job.root().c_str(), 0755), 0);
  for (const auto& path : {job.root(), job.config(), job.table(), job.mount(), job.log_dir(), job.rec()}) {
    ASSERT_EQ(::chown(path.c_str(), 1000, 100), 0) << path;
  }
  // The binaries where uid 1000 can run them, wherever the checkout is.
  TempDir bin;
  std::string error;
  ASSERT_TRUE(copy_for_other_users(bin, {"job_rank"}, &error)) << error;
  Spec spec = job.spec({}, {"record", "print", "hello", "exit", "0"});
  spec.program = bin / "trainit";
  std::replace(spec.args.begin(), spec.args.end(), helper_path("job_rank"), bin / "job_rank");
  spec.uid = 1000;
  spec.gid = 100;
  Outcome r = run(spec);
  ASSERT_EQ(r.exit, Exit::code(0)) << r.transcript;
  for (unsigned rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    auto info = job.info(rank);
    EXPECT_EQ(info["uid"], "1000");
    EXPECT_EQ(info["gid"], "100");
    EXPECT_EQ(info["ppid"], "1");
    EXPECT_EQ(info["sid"], info["pid"]);
    for (const auto& path : {job.log_file(rank), job.mount() + "/workspace/device" + std::to_string(rank)}) {
      struct stat st {};
      ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
      EXPECT_EQ(st.st_uid, 1000u) << path;
    }
    EXPECT_EQ(slurp(job.log_file(rank)), "hello\n");
  }
  Json status = Json::parse(slurp(job.status()), nullptr, false);
  ASSERT_FALSE(status.is_discarded()) << slurp(job.status()) << r.transcript;
  EXPECT_EQ(status["state"], "exit");
  EXPECT_EQ(status["pid"], 1);
}

}  // namespace
}  // namespace trainit::test
