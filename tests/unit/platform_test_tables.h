// Rank tables for the platform and plan tests, built as JSON values so a test
// can break exactly one thing and print the result.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trainit::test {

using OJson = nlohmann::ordered_json;

// Template 1: `devices_per_server[s]` devices on server "10.0.0.<s+1>",
// device_ids 0.., ranks numbered in listed order; numbers as strings unless
// `integers`.
inline OJson template1(const std::vector<int>& devices_per_server, bool integers = false) {
  auto num = [&](int n) { return integers ? OJson(n) : OJson(std::to_string(n)); };
  OJson servers = OJson::array();
  int rank = 0;
  for (std::size_t s = 0; s < devices_per_server.size(); ++s) {
    OJson devices = OJson::array();
    for (int d = 0; d < devices_per_server[s]; ++d) {
      devices.push_back({{"device_id", num(d)},
                         {"device_ip", "192.168." + std::to_string(s) + "." + std::to_string(d + 1)},
                         {"rank_id", num(rank++)}});
    }
    servers.push_back({{"server_id", "10.0.0." + std::to_string(s + 1)}, {"device", devices}});
  }
  return {{"status", "completed"},
          {"version", "1.0"},
          {"server_count", num(static_cast<int>(devices_per_server.size()))},
          {"server_list", servers}};
}

// Template 2, one group "worker": pod p is "ma-job-x-worker-<p>" on server
// "10.0.0.<p+1>" with `devices_per_pod[p]` devices.
inline OJson template2(const std::vector<int>& devices_per_pod, bool integers = false) {
  auto num = [&](int n) { return integers ? OJson(n) : OJson(std::to_string(n)); };
  OJson instances = OJson::array();
  int total = 0;
  for (std::size_t p = 0; p < devices_per_pod.size(); ++p) {
    OJson devices = OJson::array();
    for (int d = 0; d < devices_per_pod[p]; ++d) {
      devices.push_back(
          {{"device_id", num(d)}, {"device_ip", "192.168." + std::to_string(p) + "." + std::to_string(d + 1)}});
    }
    total += devices_per_pod[p];
    instances.push_back({{"pod_name", "ma-job-x-worker-" + std::to_string(p)},
                         {"server_id", "10.0.0." + std::to_string(p + 1)},
                         {"devices", devices}});
  }
  OJson group = {{"group_name", "worker"},
                 {"device_count", num(total)},
                 {"instance_count", num(static_cast<int>(devices_per_pod.size()))},
                 {"instance_list", instances}};
  return {{"status", "completed"}, {"group_count", num(1)}, {"group_list", OJson::array({group})}};
}

inline std::string text(const OJson& table) {
  return table.dump();
}

}  // namespace trainit::test
