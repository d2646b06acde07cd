#include "platform/rank_table_template1.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace trainit::rank_table_internal {
namespace {

std::string server_path(std::size_t i) {
  return fmt::format("server_list[{}]", i);
}
std::string device_path(std::size_t i, std::size_t j) {
  return fmt::format("server_list[{}].device[{}]", i, j);
}

}  // namespace

// --- where values go ---------------------------------------------------------

Template1Reader::Target Template1Reader::root() {
  return Target{.slot = &list_, .array_role = Role::kServerList};
}

Template1Reader::Target Template1Reader::member(Role object, std::string_view key) {
  switch (object) {
    case Role::kServer:
      if (key == "server_id")
        return Target{.slot = &server_.id};
      if (key == "device")
        return Target{.slot = &server_.devices, .array_role = Role::kDeviceList};
      break;
    case Role::kDevice:
      if (key == "device_id")
        return Target{.slot = &device_.id};
      if (key == "rank_id")
        return Target{.slot = &device_.rank};
      if (key == "device_ip")
        return Target{.slot = &device_.ip};
      break;
    default:
      break;
  }
  return Target{};
}

Template1Reader::Target Template1Reader::element(Role list, std::size_t index) {
  switch (list) {
    case Role::kServerList:
      server_.reset();
      server_.index = index;
      server_.first = static_cast<std::uint32_t>(table_.devices.size());
      device_ids_.clear();
      return Target{.slot = &server_.self, .object_role = Role::kServer, .element = Role::kServer};
    case Role::kDeviceList:
      device_.reset();
      device_.index = index;
      return Target{.slot = &device_.self, .object_role = Role::kDevice, .element = Role::kDevice};
    default:
      return Target{};
  }
}

void Template1Reader::list_closed(Role list, std::size_t count) {
  if (list == Role::kServerList)
    list_count_ = count;
  else if (list == Role::kDeviceList)
    server_.device_count = count;
}

void Template1Reader::end_element(Role element, bool object) {
  if (element == Role::kServer)
    end_server(object);
  else if (element == Role::kDevice)
    end_device(object);
}

// --- checks ------------------------------------------------------------------

// A device: its device_id, unique on its server, then its rank_id (checked
// over the whole table by finish()) and device_ip.
void Template1Reader::end_device(bool object) {
  if (error_ || server_.problem)
    return;  // only the first problem counts
  const DeviceUnit& d = device_;
  auto path = [&] { return device_path(server_.index, d.index); };
  auto problem = [&](Error e) { server_.problem = std::move(e); };
  if (!object)
    return problem(checks_.fail(path(), d.self, "not an object"));
  std::uint64_t id = 0;
  if (auto e = checks_.device_id(d.self, d.id, path, &id))
    return problem(std::move(*e));
  if (auto first = device_ids_.insert(id, static_cast<std::uint32_t>(d.index))) {
    return problem(
        checks_.fail(path() + ".device_id", d.id,
                     fmt::format("repeated device_id on one server (also at server_list[{}].device[{}].device_id)",
                                 server_.index, *first)));
  }
  if (!d.rank.present())
    return problem(checks_.fail(path(), d.self, "missing key \"rank_id\""));
  std::uint64_t rank = 0;
  std::string what;
  if (!to_number(d.rank, &rank, &what))
    return problem(checks_.fail(path() + ".rank_id", d.rank, what));
  if (auto e = checks_.optional_string(d.ip, path, "device_ip"))
    return problem(std::move(*e));
  RankDevice device;
  device.device_id = static_cast<unsigned>(id);
  if (d.ip.present()) {
    device.has_ip = true;
    device.ip = append_text(table_.strings, d.ip.text);
  }
  table_.devices.push_back(device);
  ranks_.push_back(rank);
  rank_is_string_.push_back(d.rank.is_string());
}

// A server, whole: its server_id, unique in the table, its device list, then
// the first problem of its devices.
void Template1Reader::end_server(bool object) {
  if (error_)
    return;
  const ServerUnit& s = server_;
  auto path = [&] { return server_path(s.index); };
  auto problem = [&](Error e) { error_ = std::move(e); };
  if (!object)
    return problem(checks_.fail(path(), s.self, "not an object"));
  if (!s.id.present())
    return problem(checks_.fail(path(), s.self, "missing key \"server_id\""));
  if (auto e = checks_.name(s.id, [&] { return path() + ".server_id"; }))
    return problem(std::move(*e));
  const TableText id = append_text(table_.strings, s.id.text);
  if (auto first = server_names_.insert(id, static_cast<std::uint32_t>(s.index))) {
    return problem(checks_.fail(path() + ".server_id", s.id,
                                fmt::format("repeated server_id (also at server_list[{}].server_id)", *first)));
  }
  if (auto e = checks_.list(s.self, s.devices, path, "device"))
    return problem(std::move(*e));
  if (s.device_count == 0)
    return problem(checks_.fail(path() + ".device", s.devices, "a server without devices"));
  if (auto e = checks_.devices_fit(
          s.devices, [&] { return path() + ".device"; }, s.device_count))
    return problem(std::move(*e));
  if (s.problem)
    return problem(*s.problem);
  table_.servers.push_back(RankServer{id, s.first, static_cast<std::uint32_t>(s.device_count)});
}

Result<RankTable> Template1Reader::finish(const Seen& server_count, std::string_view version) {
  if (list_.kind != Seen::Kind::kArray)
    return checks_.fail("server_list", list_, "not an array");
  if (list_count_ == 0)
    return checks_.fail("server_list", list_, "no servers: the table lists no devices");
  if (auto e = checks_.declared_count(
          server_count, [] { return std::string("server_count"); }, list_count_, "servers"))
    return *e;
  if (error_)
    return *error_;
  if (auto e = check_rank_ids())
    return *e;
  table_.format = RankTableFormat::kTemplate1;
  table_.version = version;
  table_.rank_size = static_cast<unsigned>(table_.devices.size());
  return std::move(table_);
}

// rank_ids: exactly 0..N-1 across the whole table. N distinct values below N
// are a permutation, so range and repeats are all there is to check. Sets
// each device's rank_id.
std::optional<Error> Template1Reader::check_rank_ids() {
  const std::size_t total = table_.devices.size();
  if (total > std::numeric_limits<unsigned>::max())
    return checks_.fail_file("too many devices");
  auto place = [&](std::size_t flat) {  // server_list[i].device[j]
    auto server = std::upper_bound(table_.servers.begin(), table_.servers.end(), flat,
                                   [](std::size_t f, const RankServer& s) { return f < s.first; }) -
                  1;
    return device_path(static_cast<std::size_t>(server - table_.servers.begin()), flat - server->first);
  };
  std::vector<std::uint32_t> rank_at(total, kNone);
  for (std::size_t k = 0; k < total; ++k) {
    const std::uint64_t rank = ranks_[k];
    if (rank >= total) {
      return checks_.fail(place(k) + ".rank_id", kept_number(rank, rank_is_string_[k]),
                          fmt::format("out of range 0..{} (the table lists {} devices)", total - 1, total));
    }
    if (rank_at[rank] != kNone) {
      return checks_.fail(place(k) + ".rank_id", kept_number(rank, rank_is_string_[k]),
                          fmt::format("repeated rank_id (also at {}.rank_id)", place(rank_at[rank])));
    }
    rank_at[rank] = static_cast<std::uint32_t>(k);
    table_.devices[k].rank_id = static_cast<unsigned>(rank);
  }
  return std::nullopt;
}

}  // namespace trainit::rank_table_internal
