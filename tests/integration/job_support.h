// What the job-mode tests (job_test.cpp) need beside the harness: a job's
// directories and environment, rank tables in both templates, the records
// tests/helpers/job_rank leaves, the streams it writes (regenerated here to
// check log files byte for byte), host pids of ranks and pidfds on them.
//
// A Job is one temporary tree:
//   DIR/config      RANK_TABLE_FILE (the directory holding jobstart_hccl.json)
//   DIR/ma          MA_MOUNT_PATH; DIR/ma/log exists, so logs go there
//   DIR/rec         job_rank's records (DIR/rec/starts, rR.info, ...)
//   DIR/status.json the --status-file every job_spec() passes
// Times are CLOCK_MONOTONIC, the clock of steady_clock: a rank's record and
// the test's Clock::now() compare directly.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness.h"
#include "notify_listener.h"
#include "process_support.h"

namespace trainit::test::job {

inline constexpr std::string_view kVjName = "ma-job-it5";
inline constexpr std::string_view kJobId = "modelarts-job-it5";  // JOB_ID for kVjName
inline constexpr std::string_view kHostIp = "10.0.0.1";
inline constexpr std::string_view kInstance = "ma-job-it5-worker-0";

// The pieces every process-watching test shares, under the names the job
// tests use (job::Pidfd, job::wait_err, ...).
using test::from_ns;
using test::host_pid;
using test::ms;
using test::NotifyListener;
using test::Pidfd;
using test::slurp;
using test::wait_err;
using test::wait_until;

// --- files ---------------------------------------------------------------------

inline bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Writes `text` to `path` in place (O_TRUNC, the way an editor or `>` does).
inline bool write_file(const std::string& path, std::string_view text, int flags = O_TRUNC) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0) {
    return false;
  }
  bool ok = true;
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      ok = false;
      break;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return ::close(fd) == 0 && ok;
}

// Writes a temporary file beside `path` and renames it into place.
inline bool replace_file(const std::string& path, std::string_view text) {
  std::string tmp = path.substr(0, path.rfind('/') + 1) + ".tmp-" + std::to_string(::getpid());
  return write_file(tmp, text) && ::rename(tmp.c_str(), path.c_str()) == 0;
}

inline size_t count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

// --- rank tables ---------------------------------------------------------------

// Template 1: one server, `devices` devices with rank_id 0..devices-1.
inline std::string template1(std::string_view status, unsigned devices, std::string_view server = kHostIp) {
  std::string text = "{\n  \"status\": \"" + std::string(status) +
                     "\",\n  \"version\": \"1.0\",\n  \"server_count\": \"1\",\n  \"server_list\": [\n    {\n"
                     "      \"server_id\": \"" +
                     std::string(server) + "\",\n      \"device\": [\n";
  for (unsigned d = 0; d < devices; ++d) {
    text += "        {\"device_id\": \"" + std::to_string(d) + "\", \"device_ip\": \"192.168.100." +
            std::to_string(101 + d) + "\", \"rank_id\": \"" + std::to_string(d) + "\"}" +
            (d + 1 < devices ? ",\n" : "\n");
  }
  return text + "      ]\n    }\n  ]\n}\n";
}

// Template 2: one group "worker" of `pods` pods named <kVjName>-worker-<i>,
// each on server 10.0.0.<i+1> with `devices` devices (device_id 0..).
inline std::string template2(std::string_view status, unsigned pods, unsigned devices) {
  std::string text = "{\"status\": \"" + std::string(status) +
                     "\", \"group_count\": \"1\", \"group_list\": [{\"group_name\": \"worker\", "
                     "\"device_count\": \"" +
                     std::to_string(pods * devices) + "\", \"instance_count\": \"" + std::to_string(pods) +
                     "\", \"instance_list\": [";
  // Listed in reverse: the conversion sorts pods by their numeric suffix.
  for (unsigned p = pods; p-- > 0;) {
    text += "{\"pod_name\": \"" + std::string(kVjName) + "-worker-" + std::to_string(p) +
            "\", \"server_id\": \"10.0.0." + std::to_string(p + 1) + "\", \"devices\": [";
    for (unsigned d = 0; d < devices; ++d) {
      text += "{\"device_id\": \"" + std::to_string(d) + "\", \"device_ip\": \"192.168." + std::to_string(p) + "." +
              std::to_string(d + 1) + "\"}" + (d + 1 < devices ? ", " : "");
    }
    text += std::string("]}") + (p > 0 ? ", " : "");
  }
  return text + "]}]}\n";
}

// --- the job -------------------------------------------------------------------

class Job {
 public:
  Job() {
    for (const auto& d : {config(), mount(), log_dir(), rec()}) {
      ::mkdir(d.c_str(), 0755);
    }
  }
  [[nodiscard]] const std::string& root() const { return dir_.path(); }
  [[nodiscard]] std::string config() const { return dir_ / "config"; }
  [[nodiscard]] std::string table() const { return dir_ / "config/jobstart_hccl.json"; }
  [[nodiscard]] std::string mount() const { return dir_ / "ma"; }
  [[nodiscard]] std::string log_dir() const { return dir_ / "ma/log"; }
  [[nodiscard]] std::string rec() const { return dir_ / "rec"; }
  [[nodiscard]] std::string status() const { return dir_ / "status.json"; }
  [[nodiscard]] std::string path(std::string_view name) const { return dir_ / name; }

  // Rank `rank`'s log file (device index `device`, rank == device unless told).
  [[nodiscard]] std::string log_file(unsigned rank, std::optional<unsigned> device = std::nullopt) const {
    return log_dir() + "/" + std::string(kJobId) + "-proc-rank-" + std::to_string(rank) + "-device-" +
           std::to_string(device.value_or(rank)) + ".txt";
  }
  [[nodiscard]] std::string record(unsigned rank, std::string_view what) const {
    return rec() + "/r" + std::to_string(rank) + "." + std::string(what);
  }
  // Lets job_rank go past `wait-file NAME`.
  bool release(std::string_view name = "go") const { return write_file(rec() + "/" + std::string(name), ""); }

  // The platform's variables for a one-server job (template 1) on kHostIp;
  // an `extra` "NAME=value" replaces the variable of that name.
  [[nodiscard]] std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "MA_VJ_NAME=" + std::string(kVjName),
        "MA_CURRENT_INSTANCE_NAME=" + std::string(kInstance),
        "MA_CURRENT_HOST_IP=" + std::string(kHostIp),
        "MA_NUM_HOSTS=1",
        "RANK_TABLE_FILE=" + config(),
        "MA_MOUNT_PATH=" + mount(),
    };
    for (auto& x : extra) {
      auto same = std::find_if(e.begin(), e.end(), [&](const std::string& v) {
        return v.substr(0, v.find('=') + 1) == x.substr(0, x.find('=') + 1);
      });
      if (same != e.end()) {
        *same = std::move(x);
      } else {
        e.push_back(std::move(x));
      }
    }
    return e;
  }

  // `trainit --status-file DIR/status.json ARGS -- job_rank DIR/rec ACTIONS...`
  [[nodiscard]] Spec spec(std::vector<std::string> trainit_args, std::vector<std::string> actions) const {
    Spec s;
    s.env = env();
    s.args = {"--status-file", status()};
    s.args.insert(s.args.end(), trainit_args.begin(), trainit_args.end());
    s.args.push_back("--");
    for (auto& a : command(std::move(actions))) {
      s.args.push_back(std::move(a));
    }
    return s;
  }
  [[nodiscard]] std::vector<std::string> command(std::vector<std::string> actions) const {
    std::vector<std::string> c = {helper_path("job_rank"), rec()};
    c.insert(c.end(), actions.begin(), actions.end());
    return c;
  }

  // The "start R NS" lines of DIR/rec/starts: (rank, time), in order.
  [[nodiscard]] std::vector<std::pair<unsigned, Clock::time_point>> starts() const {
    std::vector<std::pair<unsigned, Clock::time_point>> out;
    for (const auto& line : lines_of(slurp(rec() + "/starts"))) {
      unsigned rank = 0;
      long long ns = 0;
      if (std::sscanf(line.c_str(), "start %u %lld", &rank, &ns) == 2) {
        out.emplace_back(rank, from_ns(ns));
      }
    }
    return out;
  }
  // Rank `rank`'s rR.info as a map ("pid" -> "12", "cwd" -> "/...").
  [[nodiscard]] std::map<std::string, std::string> info(unsigned rank) const {
    std::map<std::string, std::string> out;
    for (const auto& line : lines_of(slurp(record(rank, "info")))) {
      auto sp = line.find(' ');
      if (sp != std::string::npos) {
        out[line.substr(0, sp)] = line.substr(sp + 1);
      }
    }
    return out;
  }
  // Rank `rank`'s environment, in the order received.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> environ(unsigned rank) const {
    std::vector<std::pair<std::string, std::string>> out;
    std::string text = slurp(record(rank, "environ"));
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\0', at);
      if (end == std::string::npos) {
        end = text.size();
      }
      std::string entry = text.substr(at, end - at);
      auto eq = entry.find('=');
      out.emplace_back(entry.substr(0, eq), eq == std::string::npos ? "" : entry.substr(eq + 1));
      at = end + 1;
    }
    return out;
  }
  // When rank `rank` took SIGTERM, if it did.
  [[nodiscard]] std::optional<Clock::time_point> term(unsigned rank) const {
    std::string text = slurp(record(rank, "term"));
    if (text.empty()) {
      return std::nullopt;
    }
    return from_ns(std::atoll(text.c_str()));
  }

 private:
  TempDir dir_;
};

// --- what job_rank writes --------------------------------------------------------

// job_rank's `random BYTES SEED` for rank `rank`.
inline std::string random_stream(size_t bytes, uint64_t seed, unsigned rank) {
  std::string out(bytes, '\0');
  uint64_t state = seed + rank;
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    for (size_t k = 0; k < 8 && i + k < bytes; ++k) {
      out[i + k] = static_cast<char>(z >> (8 * k));
    }
  }
  return out;
}

// job_rank's `lines BYTES` for rank `rank`.
inline std::string lines_stream(size_t bytes, unsigned rank) {
  std::string out;
  out.reserve(bytes);
  char line[128];
  for (size_t i = 0; i < bytes / 100; ++i) {
    int n = std::snprintf(line, sizeof(line), "rank %u line %010zu ", rank, i);
    out.append(line, static_cast<size_t>(n));
    out.append(static_cast<size_t>(99 - n), 'x');
    out += '\n';
  }
  return out;
}

// "identical", or where `got` first differs from `want`.
inline std::string compare_bytes(const std::string& got, const std::string& want) {
  if (got == want) {
    return "identical";
  }
  size_t at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) {
    ++at;
  }
  return "differs: " + std::to_string(got.size()) + " bytes, " + std::to_string(want.size()) +
         " expected; first difference at byte " + std::to_string(at);
}

// --- processes -------------------------------------------------------------------

// Waits for "[rank R] ready R pid P" on trainit's stdout for each rank in
// 0..ranks-1; returns each rank's host pid (-1 where the line did not come).
inline std::vector<pid_t> wait_ready(Trainit& t, unsigned ranks) {
  std::vector<pid_t> pids;
  for (unsigned r = 0; r < ranks; ++r) {
    std::string prefix = "[rank " + std::to_string(r) + "] ready " + std::to_string(r) + " pid ";
    auto line = t.wait_line_starting(prefix);
    pids.push_back(line ? host_pid(t.pid(), std::atoi(line->c_str() + prefix.size())) : -1);
  }
  return pids;
}

}  // namespace trainit::test::job
