// Waiting for the rank table (issue 9), against the real kernel with trainit
// as PID 1: a table rewritten in place over and over, each time in two
// write(2) calls with nothing between them, is caught torn again and again;
// a torn read is "not complete yet", never a refused table, whatever the
// file holds by the time trainit looks again, and the job starts once the
// table is complete.
//
// And an unchanged table is not read again on every event.
//
// The ranks are tests/helpers/job_rank (see job_support.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "harness.h"
#include "job_support.h"

namespace trainit::test {
namespace {

using job::count;
using job::Job;
using job::wait_err;

// A template-1 table of `servers` servers: this host's (kHostIp, 2 devices,
// ranks 0 and 1) first, then servers of 8 devices each. Large enough (about
// 1 MB at 1,500 servers) that a write(2) of half of it takes a while, and
// that a look at it overlaps the writer. "status" comes first, as the
// platform writes it, or last: then no torn copy of the table says its
// status, and every one is text that does not parse.
std::string large_table(std::string_view status, unsigned servers, bool status_last) {
  const std::string status_member = "\"status\": \"" + std::string(status) + "\"";
  std::string text = "{" + (status_last ? "" : status_member + ", ") + "\"version\": \"1.0\", \"server_count\": \"" +
                     std::to_string(servers) + "\", \"server_list\": [";
  unsigned rank = 0;
  for (unsigned s = 0; s < servers; ++s) {
    const unsigned devices = s == 0 ? 2 : 8;
    text += s == 0 ? "" : ", ";
    text += "{\"server_id\": \"" +
            (s == 0 ? std::string(job::kHostIp)
                    : "10." + std::to_string(1 + s / 65536) + "." + std::to_string(s / 256 % 256) + "." +
                          std::to_string(s % 256)) +
            "\", \"device\": [";
    for (unsigned d = 0; d < devices; ++d, ++rank) {
      text += d == 0 ? "" : ", ";
      text += "{\"device_id\": \"" + std::to_string(d) + "\", \"device_ip\": \"192.168." + std::to_string(d) + "." +
              std::to_string(s % 250 + 1) + "\", \"rank_id\": \"" + std::to_string(rank) + "\"}";
    }
    text += "]}";
  }
  return text + "]" + (status_last ? ", " + status_member : "") + "}\n";
}

// Rewrites `path` in place: truncated, then `text` in two write(2) calls with
// nothing between them. False on an I/O error.
bool rewrite_in_two_writes(const std::string& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return false;
  }
  const size_t half = text.size() / 2;
  bool ok = ::write(fd, text.data(), half) == static_cast<ssize_t>(half) &&
            ::write(fd, text.data() + half, text.size() - half) == static_cast<ssize_t>(text.size() - half);
  return ::close(fd) == 0 && ok;
}

TEST(RankTableRewrite, TableRewrittenInPlaceInTwoWritesOverAndOverIsNeverRefusedAndStartsTheJob) {
  TRAINIT_REQUIRE_ROOT();
  constexpr int kRewrites = 400;  // per run, before the complete table is written
  size_t torn = 0;                // looks that found text that does not parse, over all runs
  for (bool status_last : {true, true, false}) {
    SCOPED_TRACE(status_last ? "status last" : "status first");
    const std::string initializing = large_table("initializing", 1500, status_last);
    const std::string completed = large_table("completed", 1500, status_last);
    Job job;
    ASSERT_TRUE(job::write_file(job.table(), initializing));
    Trainit t(job.spec({"--rank-table-timeout", "60"}, {"record"}));
    TRAINIT_ASSERT_STARTED(t);
    ASSERT_TRUE(wait_err(t, "its status is \"initializing\"")) << t.transcript();

    // The writer stops early if trainit exits (a refusal ends the run).
    std::atomic<bool> io_error{false};
    std::atomic<int> rewrites{0};
    std::thread writer([&] {
      siginfo_t info{};
      for (int i = 0; i < kRewrites; ++i) {
        info.si_pid = 0;  // WNOWAIT: the harness still reaps it
        if (::waitid(P_PID, static_cast<id_t>(t.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0) {
          return;
        }
        if (!rewrite_in_two_writes(job.table(), initializing)) {
          io_error = true;
          return;
        }
        ++rewrites;
      }
      if (!rewrite_in_two_writes(job.table(), completed)) {
        io_error = true;
      }
    });
    Exit exit = t.wait(60s);
    writer.join();
    ASSERT_FALSE(io_error) << "cannot rewrite " << job.table();
    EXPECT_NE(exit, Exit::code(78)) << "a table caught mid-rewrite was refused after " << rewrites << " rewrites"
                                    << t.transcript();
    EXPECT_EQ(exit, Exit::code(0)) << t.transcript();
    EXPECT_EQ(rewrites, kRewrites) << "trainit ended before the table was complete" << t.transcript();
    EXPECT_EQ(job.starts().size(), 2u) << t.transcript();
    EXPECT_EQ(count(t.err(), "wait_rank_table -> spawn"), 1u) << t.transcript();
    torn += count(t.err(), "it does not parse yet");
    if (HasFailure()) {
      return;
    }
  }
  // Otherwise the writer never caught trainit looking mid-rewrite, and this
  // test showed nothing.
  EXPECT_GT(torn, 0u) << "no look found the table torn";
}

// When the table last changed (its ctime), on the wall clock.
std::chrono::system_clock::time_point changed_at(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return {};
  }
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(st.st_ctim.tv_sec) + std::chrono::nanoseconds(st.st_ctim.tv_nsec)));
}

// Events in the table's directory that leave the table alone cost a stat, not
// a read: once the table has been left alone for a few seconds (FileWatch's
// 3 s, within which a write could hide behind an equal stamp), trainit does
// not read it again until it changes, then reads it at once.
TEST(RankTableLook, AnUnchangedTableIsNotReadAgainOnEachEventAndAChangeIsSeenAtOnce) {
  TRAINIT_REQUIRE_ROOT();
  Job job;
  ASSERT_TRUE(job::write_file(job.table(), job::template1("initializing", 2)));
  Trainit t(job.spec({"-vv", "--rank-table-timeout", "60"}, {"record"}));
  TRAINIT_ASSERT_STARTED(t);
  ASSERT_TRUE(wait_err(t, "its status is \"initializing\"")) << t.transcript();
  const std::string poke = job.config() + "/unrelated";
  auto looks = [&] {
    return count(t.err(), "the rank table " + job.table() + " is as it was") +
           count(t.err(), "reading the rank table " + job.table());
  };
  // Past the settling time, one more look (an event, or the 2 s poll) can
  // trust what it finds.
  const auto settled = changed_at(job.table()) + 3500ms;
  ASSERT_TRUE(job::wait_until([&] { return std::chrono::system_clock::now() >= settled; }, 10s));
  size_t seen = looks();
  ASSERT_TRUE(job::write_file(poke, "x"));
  ASSERT_TRUE(job::wait_until([&] { return looks() > seen; })) << t.transcript();

  const size_t reads = count(t.err(), "reading the rank table");
  for (int i = 0; i < 10; ++i) {
    seen = looks();
    ASSERT_TRUE(job::write_file(poke, std::to_string(i)));  // IN_MODIFY, IN_CLOSE_WRITE in the directory
    ASSERT_TRUE(job::wait_until([&] { return looks() > seen; }))
        << "event " << i << " was not looked at" << t.transcript();
  }
  EXPECT_EQ(count(t.err(), "reading the rank table"), reads) << "an unchanged table was read again" << t.transcript();
  EXPECT_TRUE(job.starts().empty());

  const auto before = Clock::now();
  ASSERT_TRUE(job::write_file(job.table(), job::template1("completed", 2)));
  EXPECT_EQ(t.wait(), Exit::code(0)) << t.transcript();
  ASSERT_EQ(job.starts().size(), 2u) << t.transcript();
  EXPECT_LT(job.starts()[0].second - before, 1s) << "the change was not seen at once" << t.transcript();
}

}  // namespace
}  // namespace trainit::test
