// bench_plan: how long the Ascend planner takes, and how much memory it
// needs, on cluster-sized rank tables, side by side in one run. Three tables:
//
// 1. Time (in this process, median of N runs, interleaved round-robin):
//   - template 1 (server_list) and template 2 (group_list, pods listed in
//     reverse so the conversion sorts them), 16 devices per host;
//   - 16, 1,000 and 10,000 devices (the issue's target: a 10,000-device
//     table planned in < 100 ms with bounded memory);
//   - this host first and last in the table (host lookup is a scan);
//   - phases: parse + validate, host lookup + conversion, the whole
//     make_plan() from the file system, the plan's JSON form;
//   - peak heap: the most bytes live at once during one make_plan(), counted
//     by replacing the global operator new/delete in this program.
//   The table is read from memory (MemoryFileSystem) except in the "file"
//   rows, which read a real file under $TMPDIR.
// 2. Memory (issue 9): one make_plan() from a file, each in a fresh process
//   (this program re-executed), which then reports its VmHWM: the peak RSS of
//   the whole process, start-up included. Tables up to the 16 MiB limit: a
//   16 MiB "initializing" table (status first, as the platform writes it, and
//   last), 60,000 one-device pods (template 2) with --max-local-devices 16
//   and 4096, 16 MiB completed tables. Target: <= 64 MB each.
// 3. PID 1 (issue 9; needs root, skipped otherwise): the real trainit as PID 1
//   of a new PID namespace, waiting on the 16 MiB "initializing" table: its
//   VmHWM after the first look, the CPU it spends on 10 events in the table's
//   directory that leave the table as it is (once the table is 3.5 s old:
//   FileWatch::kSettle), then, once the table is replaced
//   by a complete one (8 devices, or 60,000 pods with --max-local-devices
//   4096), its VmRSS with the ranks running (steady state, target <= 2 MB)
//   and its VmHWM over the whole run.
//
// Run by hand; --quick does 3 runs of table 1; --memory skips table 1.
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "os/fs.h"
#include "plan/plan.h"
#include "plan/plan_json.h"
#include "platform/rank_table.h"

#ifndef BENCH_PLAN_TRAINIT
#define BENCH_PLAN_TRAINIT "trainit"
#endif

// ---------------------------------------------------------------- heap meter

namespace {
std::atomic<std::size_t> g_live{0};
std::atomic<std::size_t> g_peak{0};

void* counted_alloc(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr)
    throw std::bad_alloc();
  std::size_t live = g_live.fetch_add(malloc_usable_size(p), std::memory_order_relaxed) + malloc_usable_size(p);
  std::size_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr)
    return;
  g_live.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
  std::free(p);
}
}  // namespace

void* operator new(std::size_t size) {
  return counted_alloc(size);
}
void* operator new[](std::size_t size) {
  return counted_alloc(size);
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  counted_free(p);
}

namespace {

using trainit::Environment;
using trainit::EnvVar;
using trainit::PlanInput;
using Clock = std::chrono::steady_clock;

constexpr int kDevicesPerHost = 16;
const std::string kTablePath = "/user/config/jobstart_hccl.json";

// Host `host`'s server_id in every table made here.
std::string server_ip(int host) {
  return std::to_string(10 + host / 65536) + "." + std::to_string(host / 256 % 256) + "." + std::to_string(host % 256) +
         ".1";
}

// A table of `devices` devices, 16 per host, numbers as strings (as the
// platform writes them). Template 2 lists its pods last-first.
std::string make_table(bool template2, int devices) {
  const int hosts = (devices + kDevicesPerHost - 1) / kDevicesPerHost;
  std::string out;
  out.reserve(static_cast<std::size_t>(devices) * 80 + 256);
  auto ip = [](int host) {
    return std::to_string(10 + host / 65536) + "." + std::to_string(host / 256 % 256) + "." +
           std::to_string(host % 256) + ".1";
  };
  int rank = 0;
  if (!template2) {
    out += R"({"status":"completed","version":"1.0","server_count":")" + std::to_string(hosts) + R"(","server_list":[)";
    for (int h = 0; h < hosts; ++h) {
      out += h ? "," : "";
      out += R"({"server_id":")" + ip(h) + R"(","device":[)";
      for (int d = 0; d < kDevicesPerHost && rank < devices; ++d, ++rank) {
        out += d ? "," : "";
        out += R"({"device_id":")" + std::to_string(d) + R"(","device_ip":"192.168.)" + std::to_string(d) + "." +
               std::to_string(h % 250 + 1) + R"(","rank_id":")" + std::to_string(rank) + R"("})";
      }
      out += "]}";
    }
    out += "]}";
    return out;
  }
  out += R"({"status":"completed","group_count":"1","group_list":[{"group_name":"worker","device_count":")" +
         std::to_string(devices) + R"(","instance_count":")" + std::to_string(hosts) + R"(","instance_list":[)";
  for (int h = hosts - 1; h >= 0; --h) {
    out += h == hosts - 1 ? "" : ",";
    out +=
        R"({"pod_name":"ma-job-bench-worker-)" + std::to_string(h) + R"(","server_id":")" + ip(h) + R"(","devices":[)";
    const int here = std::min(kDevicesPerHost, devices - h * kDevicesPerHost);
    for (int d = 0; d < here; ++d) {
      out += d ? "," : "";
      out += R"({"device_id":")" + std::to_string(d) + R"(","device_ip":"192.168.)" + std::to_string(d) + "." +
             std::to_string(h % 250 + 1) + R"("})";
    }
    out += "]}";
  }
  out += "]}]}";
  return out;
}

struct Row {
  bool template2 = false;
  int devices = 0;
  bool last_host = false;
  bool real_file = false;
  std::string table;
  std::string file_path;  // real_file rows
  trainit::MemoryFileSystem memory_fs;
  PlanInput input;
  std::vector<double> parse_ms, convert_ms, plan_ms, json_ms;
  std::size_t peak_bytes = 0;
  std::size_t json_bytes = 0;
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_plan: %s\n", message.c_str());
  std::exit(1);
}

void run_once(Row& row, const trainit::FileSystem& fs) {
  trainit::RankTableLimits limits;
  auto t0 = Clock::now();
  auto parsed = trainit::parse_rank_table(row.table, kTablePath, limits);
  row.parse_ms.push_back(ms_since(t0));
  if (!parsed.ok() || !parsed->table)
    die(parsed.ok() ? "table not completed" : parsed.error().message);

  trainit::HostIdentity who;
  const int hosts = (row.devices + kDevicesPerHost - 1) / kDevicesPerHost;
  const int host = row.last_host ? hosts - 1 : 0;
  who.instance_name = "ma-job-bench-worker-" + std::to_string(host);
  who.host_ip = row.template2 ? "" : server_ip(host);
  auto t1 = Clock::now();
  auto entry = trainit::select_host(*parsed->table, who, kTablePath);
  std::string converted = trainit::to_template1_json(*parsed->table);
  row.convert_ms.push_back(ms_since(t1));
  if (!entry.ok())
    die(entry.error().message);

  g_peak.store(g_live.load());
  const std::size_t base = g_live.load();
  auto t2 = Clock::now();
  auto plan = trainit::make_plan(row.input);
  row.plan_ms.push_back(ms_since(t2));
  row.peak_bytes = std::max(row.peak_bytes, g_peak.load() - base);
  if (!plan.ok())
    die(plan.error().message);
  if (plan->processes.empty())
    die("no processes planned");

  auto t3 = Clock::now();
  std::string json = trainit::plan_to_json(*plan);
  row.json_ms.push_back(ms_since(t3));
  row.json_bytes = json.size();
  (void)fs;
}

// ------------------------------------------------------------- 2. memory

constexpr std::size_t kTableLimit = std::size_t{16} << 20;  // RankTableLimits::max_bytes
constexpr std::size_t kBigTable = kTableLimit - 4096;       // "16 MiB": just under the limit

// A template-2 table: pods ma-job-bench-worker-<p> in order, each on its own
// server with `per_pod` devices; `pods` of them, or as many as fit in
// `max_bytes` when `pods` is 0. "status" comes first, or last.
std::string make_pods_table(std::string_view status, int pods, int per_pod, std::size_t max_bytes = kTableLimit,
                            bool status_last = false) {
  std::string out;
  out.reserve(std::min<std::size_t>(max_bytes, static_cast<std::size_t>(std::max(pods, 1)) * 160 * per_pod) + 256);
  const std::string head = status_last ? "{" : R"({"status":")" + std::string(status) + R"(",)";
  const std::string tail = status_last ? R"(]}],"status":")" + std::string(status) + R"("})" : "]}]}";
  out += head + R"("group_count":"1","group_list":[{"group_name":"worker","instance_list":[)";
  std::string pod;
  for (int p = 0; pods == 0 || p < pods; ++p) {
    pod = p == 0 ? "" : ",";
    pod += R"({"pod_name":"ma-job-bench-worker-)" + std::to_string(p) + R"(","server_id":")" + server_ip(p) +
           R"(","devices":[)";
    for (int d = 0; d < per_pod; ++d) {
      pod += d ? "," : "";
      pod += R"({"device_id":")" + std::to_string(d) + R"(","device_ip":"192.168.)" + std::to_string(d) + "." +
             std::to_string(p % 250 + 1) + R"("})";
    }
    pod += "]}";
    if (out.size() + pod.size() + tail.size() > max_bytes)
      break;
    out += pod;
  }
  return out + tail;
}

// A completed template-1 table of 16 devices per server, as many servers as
// fit in `max_bytes`.
std::string make_servers_table(std::size_t max_bytes) {
  std::string out = R"({"status":"completed","version":"1.0","server_list":[)";
  std::string server;
  int rank = 0;
  for (int h = 0;; ++h) {
    server = h == 0 ? "" : ",";
    server += R"({"server_id":")" + server_ip(h) + R"(","device":[)";
    for (int d = 0; d < kDevicesPerHost; ++d) {
      server += d ? "," : "";
      server += R"({"device_id":")" + std::to_string(d) + R"(","device_ip":"192.168.)" + std::to_string(d) + "." +
                std::to_string(h % 250 + 1) + R"(","rank_id":")" + std::to_string(rank + d) + R"("})";
    }
    server += "]}";
    if (out.size() + server.size() + 2 > max_bytes)
      break;
    out += server;
    rank += kDevicesPerHost;
  }
  return out + "]}";
}

// Tables made to cost the most per byte: template 1 devices in their
// shortest form (integers, no device_ip), or a completed one-device table
// with an ignored object of as many keys as fit.
std::string make_dense_servers_table(std::size_t max_bytes) {
  std::string out = R"({"status":"completed","server_list":[)";
  std::string server;
  int rank = 0;
  for (int h = 0;; ++h) {
    server = h == 0 ? "" : ",";
    server += R"({"server_id":")" + server_ip(h) + R"(","device":[)";
    for (int d = 0; d < kDevicesPerHost; ++d) {
      server += d ? "," : "";
      server += R"({"device_id":)" + std::to_string(d) + R"(,"rank_id":)" + std::to_string(rank + d) + "}";
    }
    server += "]}";
    if (out.size() + server.size() + 2 > max_bytes)
      break;
    out += server;
    rank += kDevicesPerHost;
  }
  return out + "]}";
}

std::string make_many_keys_table(std::size_t max_bytes) {
  std::string out = R"({"status":"completed","server_list":[{"server_id":")" + server_ip(0) +
                    R"(","device":[{"device_id":"0","rank_id":"0"}]}],"x":{)";
  for (int k = 0; out.size() + 24 < max_bytes; ++k)
    out += (k ? ",\"k" : "\"k") + std::to_string(k) + "\":0";
  return out + "}}";
}

long status_kb(pid_t pid, const char* field) {
  std::string path = pid == 0 ? "/proc/self/status" : "/proc/" + std::to_string(pid) + "/status";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr)
    return -1;
  char line[256];
  long kb = -1;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = std::atol(line + n + 1);
      break;
    }
  }
  std::fclose(f);
  return kb;
}

std::string megabytes(long kb) {
  if (kb < 0)
    return "n/a";
  char text[48];
  std::snprintf(text, sizeof(text), "%.2f MB", static_cast<double>(kb) * 1024 / 1e6);
  return text;
}

bool write_text(const std::string& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  return ::close(fd) == 0 && ok;
}

// The child of a memory row: one make_plan() with the real file system.
// Prints "HWM_AT_START_KB HWM_KB MS OUTCOME".
int measure_child(const std::string& file, unsigned max_local_devices, const std::string& instance,
                  const std::string& host_ip) {
  const long start_kb = status_kb(0, "VmHWM");
  trainit::RealFileSystem fs;
  PlanInput input;
  input.options.mode = trainit::Mode::kAscend;
  input.options.max_local_devices = max_local_devices;
  input.argv = {"python", "train.py"};
  std::vector<EnvVar> env = {{"PATH", "/usr/bin:/bin"},
                             {"MA_VJ_NAME", "ma-job-bench"},
                             {"MA_MOUNT_PATH", "/home/ma-user/modelarts"},
                             {"RANK_TABLE_FILE", file},
                             {"MA_CURRENT_INSTANCE_NAME", instance}};
  if (!host_ip.empty())
    env.push_back({"MA_CURRENT_HOST_IP", host_ip});
  input.env = Environment(std::move(env));
  input.fs = &fs;
  auto t0 = Clock::now();
  auto plan = trainit::make_plan(input);
  const double ms = ms_since(t0);
  std::string outcome;
  if (!plan.ok()) {
    outcome = "refused: " + plan.error().message.substr(0, 60);
  } else if (!plan->rank_table || !plan->rank_table->ready) {
    outcome = "waits: " + (plan->rank_table ? plan->rank_table->pending : std::string("?"));
  } else {
    outcome = std::to_string(plan->processes.size()) + " of " + std::to_string(plan->rank_table->rank_size) +
              " ranks planned";
  }
  std::printf("%ld %ld %.1f %s\n", start_kb, status_kb(0, "VmHWM"), ms, outcome.c_str());
  return 0;
}

struct MemoryRow {
  std::string what;
  std::string table;
  unsigned max_local_devices = 16;
  std::string instance = "ma-job-bench-worker-0";
  std::string host_ip;
};

struct Measured {
  long start_kb = -1, hwm_kb = -1;
  double ms = 0;
  std::string outcome;
};

Measured measure(const char* self, const std::string& file, const MemoryRow& row) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) < 0)
    die("pipe");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    std::string max = std::to_string(row.max_local_devices);
    ::execl(self, self, "--measure", file.c_str(), max.c_str(), row.instance.c_str(), row.host_ip.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[512];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Measured m;
  int used = 0;
  if (std::sscanf(text.c_str(), "%ld %ld %lf %n", &m.start_kb, &m.hwm_kb, &m.ms, &used) < 3)
    die("a memory child printed nothing (status " + std::to_string(status) + ")");
  m.outcome = text.substr(static_cast<std::size_t>(used));
  while (!m.outcome.empty() && m.outcome.back() == '\n')
    m.outcome.pop_back();
  return m;
}

void memory_table(const char* self, const std::string& dir) {
  std::vector<MemoryRow> rows;
  auto add = [&](std::string what, std::string table, unsigned max_local_devices = 16, std::string host_ip = "") {
    MemoryRow row;
    row.what = std::move(what);
    row.table = std::move(table);
    row.max_local_devices = max_local_devices;
    row.host_ip = std::move(host_ip);
    rows.push_back(std::move(row));
  };
  add("16 MiB \"initializing\", status first", make_pods_table("initializing", 0, 1, kBigTable));
  add("16 MiB \"initializing\", status last", make_pods_table("initializing", 0, 1, kBigTable, true));
  add("template 2, 60,000 one-device pods, --max-local-devices 16", make_pods_table("completed", 60000, 1));
  add("template 2, 60,000 one-device pods, --max-local-devices 4096", make_pods_table("completed", 60000, 1), 4096);
  add("16 MiB template 2, one-device pods", make_pods_table("completed", 0, 1, kBigTable));
  add("16 MiB template 2, 16-device pods", make_pods_table("completed", 0, 16, kBigTable));
  add("16 MiB template 1, 16-device servers", make_servers_table(kBigTable), 16, server_ip(0));
  add("16 MiB template 1, shortest devices (integers, no device_ip)", make_dense_servers_table(kBigTable), 16,
      server_ip(0));
  add("16 MiB, one device and an ignored object of 1.3 M keys", make_many_keys_table(kBigTable));
  std::printf(
      "\nbench_plan: peak RSS (VmHWM) of one make_plan() from a file, each in a fresh process; target <= "
      "64 MB\n\n");
  std::printf("| table | table MiB | VmHWM at start | VmHWM after make_plan | make_plan ms | outcome | <= 64 MB |\n");
  std::printf("|---|---:|---:|---:|---:|---|---|\n");
  for (const MemoryRow& row : rows) {
    const std::string file = dir + "/bench_plan_memory.json";
    if (!write_text(file, row.table))
      die("cannot write " + file);
    Measured m = measure(self, file, row);
    ::unlink(file.c_str());
    std::printf("| %s | %.2f | %s | %s | %.0f | %s | %s |\n", row.what.c_str(),
                static_cast<double>(row.table.size()) / (1024.0 * 1024.0), megabytes(m.start_kb).c_str(),
                megabytes(m.hwm_kb).c_str(), m.ms, m.outcome.c_str(),
                m.hwm_kb >= 0 && static_cast<double>(m.hwm_kb) * 1024 <= 64e6 ? "yes" : "NO");
    std::fflush(stdout);
  }
}

// ------------------------------------------------------------- 3. PID 1

long cpu_ticks(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr)
    return -1;
  char buf[1024];
  std::size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr)
    return -1;
  long utime = 0, stime = 0;
  // fields after the comm: state(3) ... utime(14) stime(15)
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime) != 2)
    return -1;
  return utime + stime;
}

struct Pid1Row {
  std::string what;
  std::string complete;  // the table that replaces the "initializing" one
  unsigned max_local_devices = 16;
  long first_look_hwm_kb = -1;
  double first_look_s = 0;
  double cpu_events_s = -1;
  long steady_rss_kb = -1;
  long run_hwm_kb = -1;
  std::string error;
};

// trainit as PID 1 of a new PID and mount namespace, its output on a pipe.
[[noreturn]] void pid1_child(const std::vector<std::string>& args, const std::vector<std::string>& env, int out) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0 ||
      ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0) {
    ::_exit(120);
  }
  int devnull = ::open("/dev/null", O_RDWR);
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)
    ::_exit(121);
  ::syscall(SYS_close_range, 3U, ~0U, 0U);
  std::vector<char*> argv, envp;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(argv[0], argv.data(), envp.data());
  ::_exit(127);
}

void run_pid1(const std::string& trainit, const std::string& tmp, const std::string& initializing, Pid1Row& row) {
  char pattern[256];
  std::snprintf(pattern, sizeof(pattern), "%s/bench-plan-pid1.XXXXXX", tmp.c_str());
  if (::mkdtemp(pattern) == nullptr)
    die("mkdtemp");
  const std::string dir = pattern;
  for (const char* sub : {"/config", "/ma", "/ma/log"})
    ::mkdir((dir + sub).c_str(), 0755);
  const std::string table = dir + "/config/jobstart_hccl.json";
  if (!write_text(table, initializing))
    die("cannot write " + table);
  const auto written = Clock::now();
  std::vector<std::string> args = {trainit,
                                   "--status-file",
                                   dir + "/status.json",
                                   "--mode",
                                   "ascend",
                                   "--max-local-devices",
                                   std::to_string(row.max_local_devices),
                                   "--rank-table-timeout",
                                   "600",
                                   "--",
                                   "/bin/sleep",
                                   "600"};
  std::vector<std::string> env = {"PATH=/usr/bin:/bin",
                                  "MA_VJ_NAME=ma-job-bench",
                                  "MA_CURRENT_INSTANCE_NAME=ma-job-bench-worker-0",
                                  "MA_CURRENT_HOST_IP=10.0.0.1",
                                  "RANK_TABLE_FILE=" + dir + "/config",
                                  "MA_MOUNT_PATH=" + dir + "/ma"};
  int out[2];
  if (::pipe2(out, O_CLOEXEC) < 0)
    die("pipe");
  std::mutex mu;
  std::string console;
  const auto t0 = Clock::now();
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0));
  if (pid == 0)
    pid1_child(args, env, out[1]);
  if (pid < 0) {
    row.error = "clone: " + std::string(std::strerror(errno));
    return;
  }
  ::close(out[1]);
  std::thread drainer([fd = out[0], &mu, &console] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
      std::lock_guard lock(mu);
      console.append(buf, static_cast<std::size_t>(n));
    }
  });
  auto wait_for = [&](std::string_view text, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      {
        std::lock_guard lock(mu);
        if (console.find(text) != std::string::npos)
          return true;
      }
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  };
  // Idle: no CPU time for 300 ms.
  auto settle = [&] {
    long last = cpu_ticks(pid);
    for (int quiet = 0; quiet < 3;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      long now = cpu_ticks(pid);
      quiet = now == last ? quiet + 1 : 0;
      last = now;
    }
  };
  if (!wait_for("its status is \"initializing\"", std::chrono::seconds(120))) {
    row.error = "no first look";
  } else {
    row.first_look_s = std::chrono::duration<double>(Clock::now() - t0).count();
    settle();
    row.first_look_hwm_kb = status_kb(pid, "VmHWM");
    // Events on a table left alone: since issue 9 trainit trusts a file's
    // stamp once it is a few seconds old (a write within the file system's
    // time granularity could hide behind it before that).
    std::this_thread::sleep_until(written + std::chrono::milliseconds(3500));
    const long before = cpu_ticks(pid);
    const std::string poke = dir + "/config/poke";
    for (int i = 0; i < 10; ++i) {  // each one an event in the table's directory
      write_text(poke, "x");
      ::unlink(poke.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    settle();
    row.cpu_events_s = static_cast<double>(cpu_ticks(pid) - before) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    const std::string tmp_table = dir + "/config/.jobstart_hccl.json.tmp";
    if (!write_text(tmp_table, row.complete) || ::rename(tmp_table.c_str(), table.c_str()) < 0)
      die("cannot replace the table");
    if (!wait_for("spawn -> running", std::chrono::seconds(120))) {
      row.error = "the ranks did not start";
    } else {
      settle();
      row.steady_rss_kb = status_kb(pid, "VmRSS");
      row.run_hwm_kb = status_kb(pid, "VmHWM");
    }
  }
  if (pid > 0) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
  drainer.join();
  ::close(out[0]);
  if (!row.error.empty()) {
    std::lock_guard lock(mu);
    row.error += "; trainit said: " + console.substr(console.size() > 300 ? console.size() - 300 : 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

void pid1_table(const std::string& trainit, const std::string& tmp) {
  if (::geteuid() != 0) {
    std::printf("\n(PID 1 table skipped: needs root for a new PID namespace)\n");
    return;
  }
  const std::string initializing = make_pods_table("initializing", 0, 1, kBigTable);
  std::vector<Pid1Row> rows(2);
  rows[0].what = "then 8 devices";
  rows[0].complete = make_pods_table("completed", 1, 8);
  rows[1].what = "then 60,000 one-device pods, --max-local-devices 4096";
  rows[1].complete = make_pods_table("completed", 60000, 1);
  rows[1].max_local_devices = 4096;
  for (Pid1Row& row : rows)
    run_pid1(trainit, tmp, initializing, row);
  std::printf(
      "\nbench_plan: trainit as PID 1 waiting on a 16 MiB \"initializing\" table (%.2f MiB), then the table "
      "replaced by a complete one\n\n",
      static_cast<double>(initializing.size()) / (1024.0 * 1024.0));
  std::printf(
      "| run | first look after | VmHWM after the first look | CPU for 10 unchanging directory events | "
      "VmRSS with ranks running (<= 2 MB) | VmHWM whole run (<= 64 MB) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const Pid1Row& row : rows) {
    if (!row.error.empty()) {
      std::printf("| %s | failed: %s | | | | |\n", row.what.c_str(), row.error.c_str());
      continue;
    }
    std::printf("| %s | %.2f s | %s | %.2f s | %s | %s |\n", row.what.c_str(), row.first_look_s,
                megabytes(row.first_look_hwm_kb).c_str(), row.cpu_events_s, megabytes(row.steady_rss_kb).c_str(),
                megabytes(row.run_hwm_kb).c_str());
  }
}

void time_table(bool quick, const std::string& dir) {
  const int runs = quick ? 3 : 21;
  trainit::RealFileSystem real_fs;

  std::vector<Row> rows;
  for (bool template2 : {false, true}) {
    for (int devices : {16, 1000, 10000}) {
      for (bool last : {false, true}) {
        if (devices == 16 && last)
          continue;
        rows.emplace_back();
        rows.back().template2 = template2;
        rows.back().devices = devices;
        rows.back().last_host = last;
      }
    }
    rows.emplace_back();
    rows.back().template2 = template2;
    rows.back().devices = 10000;
    rows.back().last_host = true;
    rows.back().real_file = true;
  }

  std::vector<std::string> temp_files;
  for (Row& row : rows) {
    row.table = make_table(row.template2, row.devices);
    const int hosts = (row.devices + kDevicesPerHost - 1) / kDevicesPerHost;
    const int host = row.last_host ? hosts - 1 : 0;
    std::string path = kTablePath;
    if (row.real_file) {
      std::string templ = dir + "/bench_plan_XXXXXX.json";
      int fd = mkstemps(templ.data(), 5);
      if (fd < 0)
        die("cannot create a file in " + dir);
      if (write(fd, row.table.data(), row.table.size()) != static_cast<ssize_t>(row.table.size()))
        die("short write");
      close(fd);
      path = templ;
      temp_files.push_back(templ);
    } else {
      row.memory_fs.add_file(kTablePath, row.table);
    }
    std::vector<EnvVar> env = {{"PATH", "/usr/bin:/bin"},
                               {"MA_VJ_NAME", "ma-job-bench"},
                               {"MA_MOUNT_PATH", "/home/ma-user/modelarts"},
                               {"RANK_TABLE_FILE", path},
                               {"MA_CURRENT_INSTANCE_NAME", "ma-job-bench-worker-" + std::to_string(host)}};
    if (!row.template2) {
      // the host's server_id, as make_table writes it
      env.push_back({"MA_CURRENT_HOST_IP", std::to_string(10 + host / 65536) + "." + std::to_string(host / 256 % 256) +
                                               "." + std::to_string(host % 256) + ".1"});
    }
    row.input.options.mode = trainit::Mode::kAscend;
    row.input.argv = {"python", "train.py"};
    row.input.env = Environment(std::move(env));
    row.input.fs = row.real_file ? static_cast<const trainit::FileSystem*>(&real_fs) : &row.memory_fs;
  }

  for (int run = 0; run < runs; ++run) {
    for (Row& row : rows)
      run_once(row, *row.input.fs);
  }
  for (const std::string& path : temp_files)
    unlink(path.c_str());

  std::printf(
      "bench_plan: Ascend planner, %d runs per row (medians), 16 devices per host, target < 100 ms for 10,000 "
      "devices\n\n",
      runs);
  std::printf(
      "| format | devices | this host | table from | table KiB | parse+validate ms | host+convert ms | "
      "make_plan ms | plan JSON ms | peak heap MiB | < 100 ms |\n");
  std::printf("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const Row& row : rows) {
    double plan = median(row.plan_ms);
    std::printf("| %s | %d | %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.1f | %s |\n",
                row.template2 ? "template 2" : "template 1", row.devices, row.last_host ? "last" : "first",
                row.real_file ? "file" : "memory", static_cast<double>(row.table.size()) / 1024.0, median(row.parse_ms),
                median(row.convert_ms), plan, median(row.json_ms),
                static_cast<double>(row.peak_bytes) / (1024.0 * 1024.0), plan < 100.0 ? "yes" : "NO");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--measure") == 0)  // a memory row's child
    return measure_child(argv[2], static_cast<unsigned>(std::atoi(argv[3])), argv[4], argv[5]);
  bool quick = false, memory_only = false;
  std::string trainit = BENCH_PLAN_TRAINIT;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--memory") {
      memory_only = true;
    } else if (a == "--trainit" && i + 1 < argc) {
      trainit = argv[++i];
    } else {
      std::puts("usage: bench_plan [--quick] [--memory] [--trainit PATH]");
      return a == "--help" ? 0 : 64;
    }
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  if (!memory_only)
    time_table(quick, dir);
  memory_table(argv[0][0] == '/' ? argv[0] : "/proc/self/exe", dir);
  pid1_table(trainit, dir);
  return 0;
}
