// Parser fuzz smoke test: random mutations of valid rank tables, for a
// bounded time (2 s; TRAINIT_FUZZ_SECONDS changes it, TRAINIT_FUZZ_SEED
// replays a run). It runs with the unit tests, so under ASan/UBSan in CI.
//
// Properties checked on every input: no crash, no exception; a refusal is one
// line starting with the file name; an accepted table selects a host or says
// why not, converts to template 1, and the conversion reads back as the same
// table; the whole planner and the plan's JSON form run on it too.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "plan/plan_json.h"
#include "platform/fs.h"
#include "platform/rank_table.h"
#include "platform_test_tables.h"

namespace trainit {
namespace {

using test::OJson;

const std::string kFile = "/user/config/jobstart_hccl.json";

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

void check_one(const std::string& text, Tally& tally) {
  RankTableLimits limits;
  auto parsed = parse_rank_table(text, kFile, limits);
  if (!parsed.ok()) {
    ++tally.refused;
    const std::string& message = parsed.error().message;
    ASSERT_TRUE(message.starts_with(kFile + ": ")) << message;
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
    auto host = select_host(table, who, kFile);
    if (host.ok()) {
      ASSERT_LT(host->server, table.servers.size());
      ASSERT_LE(host->first + host->count, table.servers[host->server].devices.size());
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
  fs.add_file(kFile, text);
  PlanInput input;
  input.options.mode = RequestedMode::kAscend;
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
