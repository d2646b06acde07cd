// bench_plan: how long the Ascend planner takes, and how much memory it
// needs, on cluster-sized rank tables, side by side in one run:
//
//   - template 1 (server_list) and template 2 (group_list, pods listed in
//     reverse so the conversion sorts them), 16 devices per host;
//   - 16, 1,000 and 10,000 devices (the issue's target: a 10,000-device
//     table planned in < 100 ms with bounded memory);
//   - this host first and last in the table (host lookup is a scan);
//   - phases: parse + validate, host lookup + conversion, the whole
//     make_plan() from the file system, the plan's JSON form; median of N
//     runs, interleaved round-robin across rows;
//   - peak heap: the most bytes live at once during one make_plan(), counted
//     by replacing the global operator new/delete in this program.
//
// The table is read from memory (MemoryFileSystem) except in the "file" rows,
// which read a real file under $TMPDIR. Run by hand; --quick does 3 runs.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.h"
#include "plan/plan_json.h"
#include "platform/fs.h"
#include "platform/rank_table.h"

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
  who.host_ip = parsed->table->servers[row.template2 ? 0 : static_cast<std::size_t>(host)].server_id;
  if (row.template2)
    who.host_ip.clear();
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

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && !quick) {
    std::puts("usage: bench_plan [--quick]");
    return std::strcmp(argv[1], "--help") == 0 ? 0 : 64;
  }
  const int runs = quick ? 3 : 21;
  const char* tmpdir = std::getenv("TMPDIR");
  std::string dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
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
    row.input.options.mode = trainit::RequestedMode::kAscend;
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
  return 0;
}
