// What reading a rank table costs in memory (issue 9): the most bytes live at
// once while parse_rank_table() or make_plan() runs, counted by replacing the
// global operator new/delete of this test binary, which holds nothing else
// (they count, then call malloc/free; the nothrow forms too, so that no block
// is freed by an allocator that did not make it, ASan's included).
//
//   - a huge --max-local-devices costs nothing per server;
//   - a table still being written is not read past its status;
//   - a completed table costs little more than its own size, not the ten
//     times of a document.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "os/fs.h"
#include "plan/plan.h"
#include "platform/rank_table.h"

namespace {

std::atomic<std::size_t> g_live{0};
std::atomic<std::size_t> g_peak{0};

// Each block starts with its size, 16 bytes before what new returns (which
// stays aligned for any type).
constexpr std::size_t kHeader = 16;

void* counted_new(std::size_t size) {
  void* block = std::malloc(size + kHeader);
  if (block == nullptr)
    throw std::bad_alloc();
  *static_cast<std::size_t*>(block) = size;
  std::size_t live = g_live.fetch_add(size, std::memory_order_relaxed) + size;
  std::size_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return static_cast<char*>(block) + kHeader;
}

void counted_delete(void* p) noexcept {
  if (p == nullptr)
    return;
  void* block = static_cast<char*>(p) - kHeader;
  g_live.fetch_sub(*static_cast<std::size_t*>(block), std::memory_order_relaxed);
  std::free(block);
}

}  // namespace

void* operator new(std::size_t size) {
  return counted_new(size);
}
void* operator new[](std::size_t size) {
  return counted_new(size);
}
void operator delete(void* p) noexcept {
  counted_delete(p);
}
void operator delete[](void* p) noexcept {
  counted_delete(p);
}
void* operator new(std::size_t size, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return counted_new(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return counted_new(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept {
  counted_delete(p);
}
void operator delete[](void* p, const std::nothrow_t& /*tag*/) noexcept {
  counted_delete(p);
}
void operator delete(void* p, std::size_t /*size*/) noexcept {
  counted_delete(p);
}
void operator delete[](void* p, std::size_t /*size*/) noexcept {
  counted_delete(p);
}

namespace trainit {
namespace {

const std::string kFile = "/user/config/jobstart_hccl.json";

// The most bytes `f` had live at once, beyond what was live before it.
template <typename F>
std::size_t peak_of(F f) {
  const std::size_t base = g_live.load();
  g_peak.store(base);
  f();
  return g_peak.load() - base;
}

// Template 2: `pods` pods ma-job-x-worker-<p>, each on a server of its own
// with `devices` devices; "status" first or last.
std::string pods_table(std::string_view status, int pods, int devices, bool status_last = false) {
  std::string out = status_last ? "{" : R"({"status":")" + std::string(status) + R"(",)";
  out += R"("group_count":"1","group_list":[{"group_name":"worker","instance_list":[)";
  for (int p = 0; p < pods; ++p) {
    out += p ? "," : "";
    out += R"({"pod_name":"ma-job-x-worker-)" + std::to_string(p) + R"(","server_id":"10.)" +
           std::to_string(p / 65536) + "." + std::to_string(p / 256 % 256) + "." + std::to_string(p % 256) +
           R"(","devices":[)";
    for (int d = 0; d < devices; ++d) {
      out += d ? "," : "";
      out += R"({"device_id":")" + std::to_string(d) + R"(","device_ip":"192.168.)" + std::to_string(d) + "." +
             std::to_string(p % 250) + R"("})";
    }
    out += "]}";
  }
  out += "]}]";
  return out + (status_last ? R"(,"status":")" + std::string(status) + R"("})" : "}");
}

// Template 1: `servers` servers of 16 devices.
std::string servers_table(int servers) {
  std::string out = R"({"status":"completed","version":"1.0","server_list":[)";
  for (int s = 0, rank = 0; s < servers; ++s) {
    out += s ? "," : "";
    out += R"({"server_id":"10.0.)" + std::to_string(s / 256) + "." + std::to_string(s % 256) + R"(","device":[)";
    for (int d = 0; d < 16; ++d, ++rank) {
      out += d ? "," : "";
      out += R"({"device_id":")" + std::to_string(d) + R"(","device_ip":"192.168.)" + std::to_string(d) + "." +
             std::to_string(s % 250) + R"(","rank_id":")" + std::to_string(rank) + R"("})";
    }
    out += "]}";
  }
  return out + "]}";
}

std::size_t parse_peak(const std::string& text, unsigned max_local_devices, bool* completed) {
  RankTableLimits limits;
  limits.max_local_devices = max_local_devices;
  return peak_of([&] {
    auto parsed = parse_rank_table(text, kFile, limits);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    *completed = parsed->table.has_value();
  });
}

TEST(RankTableMemory, AHugeMaxLocalDevicesCostsNothingPerServer) {
  // 3,000 servers: a vector of 4,096 ints per server would be 48 MiB more.
  const std::string text = pods_table("completed", 3000, 1);
  bool completed = false;
  const std::size_t at_16 = parse_peak(text, 16, &completed);
  ASSERT_TRUE(completed);
  const std::size_t at_4096 = parse_peak(text, kMaxLocalDevices, &completed);
  ASSERT_TRUE(completed);
  EXPECT_LE(at_4096, at_16 + (64 << 10)) << "--max-local-devices 16: " << at_16 << " bytes; 4096: " << at_4096;
  EXPECT_LT(at_4096, 5 * text.size() / 2) << text.size() << " bytes of table";
}

TEST(RankTableMemory, ATableStillBeingWrittenIsNotReadPastItsStatus) {
  for (bool status_last : {false, true}) {
    // About 2 MB; its document would take ten times that.
    const std::string text = pods_table("initializing", 16000, 1, status_last);
    SCOPED_TRACE(status_last ? "status last" : "status first");
    bool completed = true;
    const std::size_t peak = parse_peak(text, 16, &completed);
    EXPECT_FALSE(completed);
    EXPECT_LT(peak, std::size_t{64} << 10) << text.size() << " bytes of table";
  }
}

// A document of the table would take about ten times its text; what is kept
// here is the table (its strings, 20 bytes a device), with the passes' lists.
TEST(RankTableMemory, ACompletedTableCostsLittleMoreThanItsText) {
  bool completed = false;
  for (const std::string& text :
       {servers_table(1500), pods_table("completed", 1500, 16), pods_table("completed", 15000, 1)}) {
    const std::size_t peak = parse_peak(text, 16, &completed);
    ASSERT_TRUE(completed);
    EXPECT_LT(peak, 5 * text.size() / 2) << text.size() << " bytes of table";
  }
}

TEST(RankTableMemory, APlanHoldsTheTableTextOnceAndNotBeyondTheParse) {
  // make_plan() reads the text (once), parses it, then converts the table:
  // by then the text is gone, and the conversion is what the plan keeps.
  MemoryFileSystem fs;
  const std::string text = pods_table("completed", 1500, 16);
  fs.add_file(kFile, text);
  PlanInput input;
  input.options.mode = Mode::kAscend;
  input.options.max_local_devices = kMaxLocalDevices;
  input.argv = {"python", "train.py"};
  input.env = Environment(std::vector<EnvVar>{{"MA_VJ_NAME", "ma-job-x"},
                                              {"MA_MOUNT_PATH", "/m"},
                                              {"RANK_TABLE_FILE", kFile},
                                              {"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-7"}});
  input.fs = &fs;
  std::size_t converted = 0;
  const std::size_t peak = peak_of([&] {
    auto plan = make_plan(input);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    ASSERT_EQ(plan->processes.size(), 16u);
    ASSERT_EQ(plan->files.size(), 1u);
    converted = plan->files[0].content.size();
  });
  EXPECT_LT(peak, 2 * text.size() + converted) << text.size() << " bytes of table, " << converted << " converted";
}

}  // namespace
}  // namespace trainit
