// Parser fuzz smoke test: random mutations of valid rank tables, for a
// bounded time (2 s; TRAINIT_FUZZ_SECONDS changes it, TRAINIT_FUZZ_SEED
// replays a run). It runs with the unit tests, so under ASan/UBSan in CI.
//
// Properties checked on every input: no crash, no exception; a refusal is one
// line starting with the file name; an accepted table selects a host or says
// why not, converts to template 1, and the conversion reads back as the same
// table; the whole planner and the plan's JSON form run on it too. And the
// streaming reader agrees with the DOM reader it replaced (kept as an oracle
// in rank_table_dom_reference.cpp): the same refusal, word for word, or the
// same table, except that a table whose top-level status says it is not
// complete is pending, however broken the rest of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "os/fs.h"
#include "os/json.h"
#include "plan/plan.h"
#include "plan/plan_json.h"
#include "platform/rank_table.h"
#include "platform_test_tables.h"
#include "rank_table_dom_reference.h"

namespace trainit {
namespace {

using test::OJson;

const std::string kTableFile = "/user/config/jobstart_hccl.json";

std::vector<std::string> seeds() {
  std::vector<std::string> out;
  out.push_back(test::template1({1}).dump());
  out.push_back(test::template1({2, 2, 2}, true).dump(1));
  OJson v12 = test::template1({4, 4});
  v12["version"] = "1.2";
  v12["super_pod_list"] = OJson::array({{{"super_pod_id", "0"}, {"server_list", {{{"server_id", "10.0.0.1"}}}}}});
  v12["server_list"][0]["host_ip"] = "10.0.0.1";
  out.push_back(v12.dump());
  out.push_back(test::template2({2, 2, 2}).dump());
  OJson shared = test::template2({2, 2}, true);
  shared["group_list"][0]["instance_list"][1]["server_id"] = "10.0.0.1";
  shared["group_list"][0]["instance_list"][1]["devices"][0]["device_id"] = 2;
  shared["group_list"][0]["instance_list"][1]["devices"][1]["device_id"] = 3;
  out.push_back(shared.dump(2));
  // Two groups, their pods listed out of order: the conversion sorts them,
  // and a problem of a device must be found in that order.
  OJson two = test::template2({2, 3, 1});
  auto& pods = two["group_list"][0]["instance_list"];
  std::reverse(pods.begin(), pods.end());
  OJson eval = test::template2({1, 2})["group_list"][0];
  for (std::size_t p = 0; p < 2; ++p) {
    eval["instance_list"][p]["pod_name"] = "ma-job-x-eval-" + std::to_string(1 - p);
    eval["instance_list"][p]["server_id"] = "10.0.1." + std::to_string(p + 1);
  }
  two["group_list"].push_back(eval);
  two["group_count"] = "2";
  out.push_back(two.dump());
  return out;
}

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::string mutate(std::string text) {
    int rounds = 1 + pick(3);
    for (int i = 0; i < rounds; ++i) {
      if (pick(3) == 0) {
        text = mutate_tree(text);
      } else {
        mutate_bytes(text);
      }
    }
    return text;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::size_t pos(const std::string& s) {
    return s.empty() ? 0 : std::uniform_int_distribution<std::size_t>(0, s.size() - 1)(rng_);
  }

  void mutate_bytes(std::string& s) {
    static const std::string kTokens[] = {"{",
                                          "}",
                                          "[",
                                          "]",
                                          "\"",
                                          ":",
                                          ",",
                                          "0",
                                          "-1",
                                          "01",
                                          "1.5",
                                          "1e999",
                                          "null",
                                          "true",
                                          "\\u0000",
                                          "\\",
                                          "\xff",
                                          "\n",
                                          " ",
                                          "\"x\":1",
                                          "[[[[[",
                                          "}}}}",
                                          "\"rank_id\":\"0\""};
    switch (pick(6)) {
      case 0:
        if (!s.empty())
          s[pos(s)] = static_cast<char>(pick(256));
        break;
      case 1:
        s.insert(pos(s), kTokens[pick(std::size(kTokens))]);
        break;
      case 2:
        if (!s.empty()) {
          std::size_t at = pos(s);
          s.erase(at, 1 + pick(16));
        }
        break;
      case 3:
        if (!s.empty()) {
          std::size_t at = pos(s);
          std::string piece = s.substr(at, 1 + pick(64));
          s.insert(pos(s), piece);
        }
        break;
      case 4: {
        int depth = 1 + pick(200);
        s.insert(pos(s), std::string(depth, pick(2) ? '[' : '{'));
        break;
      }
      default:
        s.resize(pos(s));  // a table cut off while being written
    }
  }

  OJson random_value() {
    switch (pick(12)) {
      case 0:
        return nullptr;
      case 1:
        return pick(2) == 1;
      case 2:
        return -pick(5);
      case 3:
        return pick(40);
      case 4:
        return 2.5;
      case 5:
        return std::to_string(pick(40));
      case 6:
        return "0" + std::to_string(pick(9));
      case 7:
        return "../../etc/passwd";
      case 8:
        return OJson::array();
      case 9:
        return OJson::object();
      case 10:
        return "18446744073709551616";
      default:
        return "";
    }
  }

  // Applies one change to a random node of the parsed tree.
  std::string mutate_tree(const std::string& text) {
    OJson doc = OJson::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_structured())
      return text;
    std::vector<OJson*> nodes;
    collect(doc, nodes);
    OJson* node = nodes[static_cast<std::size_t>(pick(static_cast<int>(nodes.size())))];
    switch (pick(5)) {
      case 0:
        *node = random_value();
        break;
      case 1:
        if (node->is_object() && !node->empty()) {
          auto it = node->begin();
          std::advance(it, pick(static_cast<int>(node->size())));
          node->erase(it.key());
        }
        break;
      case 2:
        if (node->is_array() && !node->empty())
          node->push_back((*node)[static_cast<std::size_t>(pick(static_cast<int>(node->size())))]);
        break;
      case 3:
        if (node->is_array() && node->size() > 1)
          std::swap((*node)[0], (*node)[node->size() - 1]);
        break;
      default:
        if (node->is_object())
          (*node)[pick(2) ? "device_count" : "rank_list"] = random_value();
    }
    return doc.dump();
  }

  static void collect(OJson& node, std::vector<OJson*>& out) {
    out.push_back(&node);
    if (node.is_structured()) {
      for (auto& child : node)
        collect(child, out);
    }
  }

  std::mt19937_64 rng_;
};

struct Tally {
  std::uint64_t refused = 0, pending = 0, accepted = 0;
};

// What the streaming reader makes of `text`, in dom_reference::read()'s words.
std::string streamed(const std::string& text, unsigned max_local_devices) {
  RankTableLimits limits;
  limits.max_local_devices = max_local_devices;
  auto parsed = parse_rank_table(text, kTableFile, limits);
  if (!parsed.ok())
    return "refused " + parsed.error().message;
  if (!parsed->table)
    return "pending " + parsed->status;
  return "accepted " + parsed->table->version + " " + to_template1_json(*parsed->table);
}

void check_same_as_dom_reader(const std::string& text) {
  for (unsigned max_local_devices : {16u, 3u}) {
    const std::string now = streamed(text, max_local_devices);
    const std::string before = dom_reference::read(text, kTableFile, max_local_devices);
    if (now == before)
      continue;
    auto status = peek_top_level_string(text, "status");
    ASSERT_TRUE(now.starts_with("pending ") && status && *status != "completed" && before.starts_with("refused "))
        << "max_local_devices " << max_local_devices << "\nstreaming: " << now << "\nDOM:       " << before
        << "\ntable: " << text;
    ASSERT_EQ(now, "pending " + *status);
  }
}

void check_one(const std::string& text, Tally& tally) {
  ASSERT_NO_FATAL_FAILURE(check_same_as_dom_reader(text));
  RankTableLimits limits;
  auto parsed = parse_rank_table(text, kTableFile, limits);
  if (!parsed.ok()) {
    ++tally.refused;
    const std::string& message = parsed.error().message;
    ASSERT_TRUE(message.starts_with(kTableFile + ": ")) << message;
    ASSERT_EQ(message.find('\n'), std::string::npos) << message;
    return;
  }
  if (!parsed->table) {
    ++tally.pending;
    return;
  }
  ++tally.accepted;
  const RankTable& table = *parsed->table;
  for (const HostIdentity& who : {HostIdentity{}, HostIdentity{"10.0.0.2", "ma-job-x-worker-1"}}) {
    auto host = select_host(table, who, kTableFile);
    if (host.ok()) {
      ASSERT_LT(host->server, table.servers.size());
      ASSERT_LE(host->first + host->count, table.devices_of(host->server).size());
    } else {
      ASSERT_EQ(host.error().message.find('\n'), std::string::npos);
    }
  }
  std::string converted = to_template1_json(table);
  auto again = parse_rank_table(converted, "/converted.json", limits);
  ASSERT_TRUE(again.ok()) << again.error().message << "\nfrom: " << text;
  ASSERT_TRUE(again->table.has_value());
  ASSERT_EQ(to_template1_json(*again->table), converted);
  ASSERT_EQ(again->table->rank_size, table.rank_size);
}

void check_planner(const std::string& text) {
  MemoryFileSystem fs;
  fs.add_file(kTableFile, text);
  PlanInput input;
  input.options.mode = Mode::kAscend;
  input.argv = {"python", "train.py"};
  input.env = Environment(std::vector<EnvVar>{{"MA_VJ_NAME", "ma-job-x"},
                                              {"MA_MOUNT_PATH", "/m"},
                                              {"MA_CURRENT_INSTANCE_NAME", "ma-job-x-worker-1"},
                                              {"MA_CURRENT_HOST_IP", "10.0.0.2"}});
  input.fs = &fs;
  auto plan = make_plan(input);
  if (plan.ok()) {
    std::string json = plan_to_json(*plan);
    ASSERT_FALSE(json.empty());
    for (const ProcessSpec& p : plan->processes)
      ASSERT_TRUE(p.cwd.starts_with("/m/workspace/device"));
  } else {
    ASSERT_EQ(plan.error().message.find('\n'), std::string::npos) << plan.error().message;
  }
}

// Tables built to break several rules at once, where the order the rules are
// checked in decides the message: pods out of order and sharing servers,
// repeated ids, problems in several devices, counts that do not add up.
class FaultyTables {
 public:
  explicit FaultyTables(std::uint64_t seed) : rng_(seed) {}

  std::string template1() {
    OJson servers = OJson::array();
    const int n = pick(4);
    int rank = 0;
    for (int s = 0; s < n; ++s) {
      OJson devices = OJson::array();
      for (int d = pick(4); d > 0; --d) {
        OJson device = {
            {"device_id", id()}, {"device_ip", "192.168.0." + std::to_string(d)}, {"rank_id", rank_id(rank++)}};
        fault(device, {"device_id", "rank_id", "device_ip"});
        devices.push_back(device);
      }
      OJson server = {{"server_id", "10.0.0." + std::to_string(pick(3))}, {"device", devices}};
      fault(server, {"server_id", "device"});
      servers.push_back(server);
    }
    OJson table = {{"status", "completed"}, {"version", "1.0"}, {"server_list", servers}};
    if (pick(3) == 0)
      table["server_count"] = std::to_string(n + pick(2));
    return table.dump();
  }

  std::string template2() {
    OJson groups = OJson::array();
    const int g_count = 1 + pick(3);
    for (int g = 0; g < g_count; ++g) {
      OJson pods = OJson::array();
      int listed = 0;
      for (int p = pick(5); p > 0; --p) {
        OJson devices = OJson::array();
        for (int d = pick(4); d > 0; --d, ++listed) {
          OJson device = {{"device_id", id()}, {"device_ip", "192.168.1." + std::to_string(d)}};
          fault(device, {"device_id", "device_ip"});
          devices.push_back(device);
        }
        std::string name = "job-g" + std::to_string(g) + (pick(6) == 0 ? "-x" : "-") + std::to_string(pick(8));
        OJson pod = {{"pod_name", name}, {"server_id", "10.0.0." + std::to_string(pick(3))}, {"devices", devices}};
        fault(pod, {"pod_name", "server_id", "devices"});
        pods.push_back(pod);
      }
      OJson group = {{"group_name", "g" + std::to_string(g)}, {"instance_list", pods}};
      if (pick(2) == 0)
        group["device_count"] = std::to_string(pick(8) == 0 ? 0 : listed + (pick(6) == 0 ? 1 : 0));
      if (pick(4) == 0)
        group["instance_count"] = std::to_string(pods.size() + pick(2));
      fault(group, {"instance_list", "group_name"});
      groups.push_back(group);
    }
    OJson table = {{"status", "completed"}, {"group_list", groups}};
    if (pick(4) == 0)
      table["group_count"] = std::to_string(g_count + pick(2));
    return table.dump();
  }

  [[nodiscard]] unsigned limit() { return 2 + static_cast<unsigned>(pick(4)); }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  OJson id() { return pick(2) ? OJson(std::to_string(pick(5))) : OJson(pick(5)); }
  OJson rank_id(int rank) { return pick(8) == 0 ? OJson(std::to_string(pick(6))) : OJson(std::to_string(rank)); }

  // Now and then breaks one member of `node`, or the node itself.
  void fault(OJson& node, std::vector<std::string> keys) {
    if (pick(10) != 0)
      return;
    const std::string& key = keys[static_cast<std::size_t>(pick(static_cast<int>(keys.size())))];
    switch (pick(5)) {
      case 0:
        node.erase(key);
        break;
      case 1:
        node[key] = OJson::array();
        break;
      case 2:
        node[key] = "x";
        break;
      case 3:
        node[key] = -1;
        break;
      default:
        node = pick(2) ? OJson(7) : OJson::array({1});
    }
  }

  std::mt19937_64 rng_;
};

TEST(RankTableFuzz, TablesBreakingSeveralRulesAreRefusedForTheRuleTheDomReaderNamed) {
  std::uint64_t compared = 0;
  for (std::uint64_t seed = 1; seed <= 6000; ++seed) {
    FaultyTables tables(seed);
    const unsigned limit = tables.limit();
    for (const std::string& text : {tables.template1(), tables.template2()}) {
      ASSERT_EQ(streamed(text, limit), dom_reference::read(text, kTableFile, limit))
          << "seed " << seed << ", max_local_devices " << limit << ": " << text;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 12000u);
}

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

TEST(RankTableFuzz, RandomMutationsOfValidTablesNeverCrashAndRoundTrip) {
  const auto budget = std::chrono::milliseconds(env_number("TRAINIT_FUZZ_SECONDS", 2) * 1000);
  const std::uint64_t seed = env_number("TRAINIT_FUZZ_SEED", 0x7261696e6974ULL);
  const std::vector<std::string> corpus = seeds();
  Tally tally;
  for (const std::string& s : corpus)
    ASSERT_NO_FATAL_FAILURE(check_one(s, tally));
  ASSERT_EQ(tally.accepted, corpus.size());

  const auto start = std::chrono::steady_clock::now();
  std::uint64_t iterations = 0;
  for (; std::chrono::steady_clock::now() - start < budget; ++iterations) {
    Mutator mutator(seed + iterations);
    std::string text = mutator.mutate(corpus[iterations % corpus.size()]);
    SCOPED_TRACE("seed " + std::to_string(seed + iterations) + " (TRAINIT_FUZZ_SEED replays from there)");
    ASSERT_NO_FATAL_FAILURE(check_one(text, tally));
    if (iterations % 8 == 0) {
      ASSERT_NO_FATAL_FAILURE(check_planner(text));
    }
  }
  RecordProperty("iterations", static_cast<int>(iterations));
  EXPECT_GT(iterations, 0u);
  std::printf("rank table fuzz: %llu mutated tables in %lld ms: %llu refused, %llu pending, %llu accepted\n",
              static_cast<unsigned long long>(iterations), static_cast<long long>(budget.count()),
              static_cast<unsigned long long>(tally.refused), static_cast<unsigned long long>(tally.pending),
              static_cast<unsigned long long>(tally.accepted - corpus.size()));
}

}  // namespace
}  // namespace trainit
