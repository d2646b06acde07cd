#include "platform/rank_table_template2.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "os/text.h"

namespace trainit::rank_table_internal {
namespace {

std::string group_path(std::size_t g) {
  return fmt::format("group_list[{}]", g);
}
std::string instance_path(std::size_t g, std::size_t k) {
  return fmt::format("group_list[{}].instance_list[{}]", g, k);
}
std::string device_path(std::size_t g, std::size_t k, std::size_t d) {
  return fmt::format("group_list[{}].instance_list[{}].devices[{}]", g, k, d);
}

// The integer after the last '-' of a pod name (the whole name without one).
std::optional<std::uint64_t> pod_suffix(std::string_view pod_name) {
  auto dash = pod_name.rfind('-');
  std::string_view digits = dash == std::string_view::npos ? pod_name : pod_name.substr(dash + 1);
  if (digits.empty() || digits.size() > 18)
    return std::nullopt;
  std::uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

}  // namespace

// --- where values go ---------------------------------------------------------

Template2Reader::Target Template2Reader::root() {
  return Target{.slot = &list_, .array_role = Role::kGroupList};
}

Template2Reader::Target Template2Reader::member(Role object, std::string_view key) {
  switch (object) {
    case Role::kGroup:
      if (key == "group_name")
        return Target{.slot = &group_.name};
      if (key == "instance_list")
        return Target{.slot = &group_.instances, .array_role = Role::kInstanceList};
      if (key == "instance_count")
        return Target{.slot = &group_.instance_count};
      if (key == "device_count")
        return Target{.slot = &group_.device_count};
      break;
    case Role::kInstance:
      if (key == "pod_name")
        return Target{.slot = &instance_.pod};
      if (key == "server_id")
        return Target{.slot = &instance_.server};
      if (key == "devices")
        return Target{.slot = &instance_.devices, .array_role = Role::kPodDeviceList};
      break;
    case Role::kPodDevice:
      if (key == "device_id")
        return Target{.slot = &device_.id};
      if (key == "device_ip")
        return Target{.slot = &device_.ip};
      break;
    default:
      break;
  }
  return Target{};
}

Template2Reader::Target Template2Reader::element(Role list, std::size_t index) {
  switch (list) {
    case Role::kGroupList:
      group_.reset();
      group_.index = index;
      group_.first = static_cast<std::uint32_t>(records_.size());
      return Target{.slot = &group_.self, .object_role = Role::kGroup, .element = Role::kGroup};
    case Role::kInstanceList:
      instance_.reset();
      instance_.index = index;
      instance_.first = static_cast<std::uint32_t>(device_records_.size());
      return Target{.slot = &instance_.self, .object_role = Role::kInstance, .element = Role::kInstance};
    case Role::kPodDeviceList:
      device_.reset();
      device_.index = index;
      return Target{.slot = &device_.self, .object_role = Role::kPodDevice, .element = Role::kPodDevice};
    default:
      return Target{};
  }
}

void Template2Reader::list_closed(Role list, std::size_t count) {
  switch (list) {
    case Role::kGroupList:
      list_count_ = count;
      break;
    case Role::kInstanceList:
      group_.instance_list_count = count;
      break;
    case Role::kPodDeviceList:
      instance_.device_count = count;
      break;
    default:
      break;
  }
}

void Template2Reader::end_element(Role element, bool object) {
  switch (element) {
    case Role::kGroup:
      end_group(object);
      break;
    case Role::kInstance:
      end_instance(object);
      break;
    case Role::kPodDevice:
      end_pod_device(object);
      break;
    default:
      break;
  }
}

// --- pass 1 ------------------------------------------------------------------

// A device: kept for pass 2, or its own problem (see OwnProblem).
void Template2Reader::end_pod_device(bool object) {
  if (error_ || group_.problem || instance_.own.device != kNone || candidate_)
    return;  // only the first problem counts; after a candidate, pass 2 never gets here
  const DeviceUnit& d = device_;
  auto own = [&](Error e, bool before_repeat) {
    instance_.own.device = static_cast<std::uint32_t>(d.index);
    instance_.own.before_repeat = before_repeat;
    instance_.own.error = std::move(e);
  };
  auto path = [&] { return device_path(group_.index, instance_.index, d.index); };
  if (!object)
    return own(checks_.fail(path(), d.self, "not an object"), true);
  std::uint64_t id = 0;
  if (auto e = checks_.device_id(d.self, d.id, path, &id))
    return own(std::move(*e), true);
  DeviceRecord record;
  record.device_id = static_cast<unsigned>(id);
  record.id_is_string = d.id.is_string();
  if (d.ip.present() && d.ip.is_string()) {
    record.has_ip = true;
    record.ip = append_text(table_.strings, d.ip.text);
  }
  device_records_.push_back(record);
  if (auto e = checks_.optional_string(d.ip, path, "device_ip"))
    own(std::move(*e), false);
}

// A pod, whole: its pod_name, unique in the table, its server_id and device
// list; then it is recorded, with the problem of its devices if any.
void Template2Reader::end_instance(bool object) {
  if (error_ || group_.problem)
    return;
  const InstanceUnit& inst = instance_;
  auto path = [&] { return instance_path(group_.index, inst.index); };
  auto problem = [&](Error e) { group_.problem = std::move(e); };
  if (!object)
    return problem(checks_.fail(path(), inst.self, "not an object"));
  if (!inst.pod.present()) {
    return problem(checks_.fail(path(), inst.self,
                                fmt::format("no pod_name: old-style group_list rank tables (instances without "
                                            "pod_name) are not supported; {}",
                                            kKnownFormats)));
  }
  if (auto e = checks_.name(inst.pod, [&] { return path() + ".pod_name"; }))
    return problem(std::move(*e));
  PodRecord record;
  record.group = static_cast<std::uint32_t>(group_.index);
  record.index = static_cast<std::uint32_t>(inst.index);
  record.pod_name = append_text(table_.strings, inst.pod.text);
  if (auto first = pod_names_.insert(record.pod_name, static_cast<std::uint32_t>(pod_places_.size()))) {
    return problem(checks_.fail(path() + ".pod_name", inst.pod,
                                fmt::format("repeated pod_name (also at group_list[{}].instance_list[{}].pod_name)",
                                            pod_places_[*first].first, pod_places_[*first].second)));
  }
  pod_places_.emplace_back(record.group, record.index);
  if (!inst.server.present())
    return problem(checks_.fail(path(), inst.self, "missing key \"server_id\""));
  if (auto e = checks_.name(inst.server, [&] { return path() + ".server_id"; }))
    return problem(std::move(*e));
  if (auto e = checks_.list(inst.self, inst.devices, path, "devices"))
    return problem(std::move(*e));
  if (auto e = checks_.devices_fit(
          inst.devices, [&] { return path() + ".devices"; }, inst.device_count))
    return problem(std::move(*e));
  record.server_id = append_text(table_.strings, inst.server.text);
  record.first = inst.first;
  record.count = static_cast<std::uint32_t>(inst.device_count);
  group_.listed += inst.device_count;
  auto suffix = pod_suffix(inst.pod.text);
  record.suffix = suffix.value_or(0);
  if (!suffix)
    group_.all_suffixed = false;
  const auto index = static_cast<std::uint32_t>(records_.size());
  records_.push_back(record);
  if (inst.own.device != kNone) {
    OwnProblem own = inst.own;
    own.pod = index;
    if (group_.first_listed.pod == kNone)
      group_.first_listed = own;
    if (suffix && (group_.least_suffix.pod == kNone || *suffix < group_.least)) {
      group_.least_suffix = std::move(own);
      group_.least = *suffix;
    }
  }
}

// A group, whole: its own keys, the first problem of its pods, its
// device_count; then its pods are sorted into conversion order.
void Template2Reader::end_group(bool object) {
  if (error_)
    return;
  const GroupUnit& g = group_;
  auto path = [&] { return group_path(g.index); };
  auto problem = [&](Error e) { error_ = std::move(e); };
  if (!object)
    return problem(checks_.fail(path(), g.self, "not an object"));
  if (auto e = checks_.optional_string(g.name, path, "group_name"))
    return problem(std::move(*e));
  if (auto e = checks_.list(g.self, g.instances, path, "instance_list"))
    return problem(std::move(*e));
  if (auto e = checks_.declared_count(
          g.instance_count, [&] { return path() + ".instance_count"; }, g.instance_list_count, "instances"))
    return problem(std::move(*e));
  if (g.problem)
    return problem(*g.problem);
  bool skipped = false;
  if (g.device_count.present()) {
    std::uint64_t count = 0;
    std::string what;
    if (!to_number(g.device_count, &count, &what))
      return problem(checks_.fail(path() + ".device_count", g.device_count, what));
    if (count != g.listed) {
      return problem(
          checks_.fail(path() + ".device_count", g.device_count,
                       fmt::format("declares {} but the group's instances list {} devices", count, g.listed)));
    }
    skipped = count == 0;  // docs/contract.md §2: skip groups with device_count 0
  }
  const auto begin = records_.begin() + g.first;
  if (!skipped) {
    auto empty = std::find_if(begin, records_.end(), [](const PodRecord& r) { return r.count == 0; });
    if (empty != records_.end()) {
      return problem(checks_.fail(instance_path(g.index, empty->index) + ".devices", Seen::empty_array(),
                                  "an instance without devices"));
    }
  }
  // The pod whose device problem pass 2 meets first, by its listed place:
  // the sort below moves it.
  const OwnProblem& own = g.all_suffixed ? g.least_suffix : g.first_listed;
  const std::uint32_t own_listed = own.pod == kNone ? kNone : records_[own.pod].index;
  // Sorted by the pod names' numeric suffixes when every name has one;
  // listed order otherwise (the reference launcher crashes there).
  if (g.all_suffixed) {
    std::stable_sort(begin, records_.end(), [](const PodRecord& a, const PodRecord& b) { return a.suffix < b.suffix; });
  }
  group_skipped_.push_back(skipped);
  if (!skipped && !candidate_ && own_listed != kNone) {
    candidate_ = own;
    for (std::size_t r = g.first; r < records_.size(); ++r) {
      if (records_[r].index == own_listed)
        candidate_->pod = static_cast<std::uint32_t>(r);
    }
  }
}

// --- pass 2 ------------------------------------------------------------------

Result<RankTable> Template2Reader::finish(const Seen& group_count) {
  if (list_.kind != Seen::Kind::kArray)
    return checks_.fail("group_list", list_, "not an array");
  if (auto e = checks_.declared_count(
          group_count, [] { return std::string("group_count"); }, list_count_, "groups"))
    return *e;
  if (error_)
    return *error_;
  if (auto e = convert())
    return *e;
  return std::move(table_);
}

// Pass 2: devices, numbered across groups/pods/devices in that order
// (conversion order), grouped by server_id. First each pod's server, and the
// first device_id repeated on a server; then the devices in order, each
// checked where pass 2 meets it.
std::optional<Error> Template2Reader::convert() {
  pod_names_.release();  // pass 1's
  std::vector<std::pair<std::uint32_t, std::uint32_t>>().swap(pod_places_);

  std::vector<std::uint32_t> server_devices;  // per server: its devices
  const std::vector<std::uint32_t> pod_server = place_pods_on_servers(&server_devices);
  const Repeat repeat = first_repeat(pod_server);

  std::uint32_t first = 0;  // each server's devices together, in conversion order
  for (std::size_t s = 0; s < table_.servers.size(); ++s) {
    table_.servers[s].first = first;
    first += server_devices[s];
    server_devices[s] = 0;  // now: its devices so far
  }
  table_.devices.resize(first);
  table_.pods.reserve(records_.size());
  std::uint32_t rank = 0;
  for (std::size_t p = 0; p < records_.size(); ++p) {
    const PodRecord& pod = records_[p];
    RankPod out{pod.pod_name, pod.server_id, 0, 0, 0};
    if (pod_server[p] == kNone) {  // a group without devices
      table_.pods.push_back(out);
      continue;
    }
    const std::uint32_t s = pod_server[p];
    out.server = s;
    out.first = server_devices[s];
    out.count = pod.count;
    if (server_devices[s] + pod.count > checks_.limits().max_local_devices) {
      return checks_.fail(instance_path(pod.group, pod.index) + ".server_id",
                          Seen::string_value(table_.text(pod.server_id)),
                          fmt::format("the pods on this server list {} devices, more than the limit of {} per host "
                                      "(--max-local-devices raises it)",
                                      server_devices[s] + pod.count, checks_.limits().max_local_devices));
    }
    for (std::uint32_t d = 0; d < pod.count; ++d, ++rank) {
      const bool own_here = candidate_ && candidate_->pod == p && candidate_->device == d;
      if (own_here && candidate_->before_repeat)
        return candidate_->error;
      const DeviceRecord& device = device_records_[pod.first + d];
      if (rank == repeat.at) {
        auto [other, other_device] = pod_at(pod_server, repeat.first);
        return checks_.fail(device_path(pod.group, pod.index, d) + ".device_id",
                            kept_number(device.device_id, device.id_is_string),
                            fmt::format("repeated device_id on server {} (also at "
                                        "group_list[{}].instance_list[{}].devices[{}].device_id)",
                                        quote_for_message(table_.text(pod.server_id)), records_[other].group,
                                        records_[other].index, other_device));
      }
      if (own_here)
        return candidate_->error;
      table_.devices[table_.servers[s].first + server_devices[s]++] =
          RankDevice{device.device_id, rank, device.has_ip, device.ip};
    }
    table_.pods.push_back(out);
  }
  if (rank == 0)
    return checks_.fail("group_list", list_, "the table lists no devices");
  for (std::size_t s = 0; s < table_.servers.size(); ++s)
    table_.servers[s].count = server_devices[s];
  table_.format = RankTableFormat::kTemplate2;
  table_.version.clear();
  table_.rank_size = rank;
  return std::nullopt;
}

// The servers, by first appearance in conversion order, into table_.servers;
// returns each pod's server (kNone for the pods of a skipped group), and the
// number of devices of each server in `server_devices`.
std::vector<std::uint32_t> Template2Reader::place_pods_on_servers(std::vector<std::uint32_t>* server_devices) {
  NameIndex servers(NameKeys(&table_.strings));
  std::vector<std::uint32_t> pod_server(records_.size(), kNone);
  for (std::size_t p = 0; p < records_.size(); ++p) {
    const PodRecord& pod = records_[p];
    if (group_skipped_[pod.group])
      continue;
    auto s = static_cast<std::uint32_t>(table_.servers.size());
    if (auto known = servers.insert(pod.server_id, s)) {
      s = *known;
    } else {
      table_.servers.push_back(RankServer{pod.server_id, 0, 0});
      server_devices->push_back(0);
    }
    pod_server[p] = s;
    (*server_devices)[s] += pod.count;
  }
  return pod_server;
}

// Pass 2 stops at the first problem it meets, at the latest at candidate_:
// devices past it need not be (and are not all) recorded.
Template2Reader::Repeat Template2Reader::first_repeat(const std::vector<std::uint32_t>& pod_server) const {
  struct Use {
    std::uint32_t server, device_id, rank;
  };
  std::vector<Use> uses;
  std::uint32_t rank = 0;
  for (std::size_t p = 0; p < records_.size(); ++p) {
    if (pod_server[p] == kNone)
      continue;
    const PodRecord& pod = records_[p];
    std::uint32_t count = pod.count;
    const bool last = candidate_ && candidate_->pod == p;
    if (last)
      count = candidate_->device + (candidate_->before_repeat ? 0 : 1);
    for (std::uint32_t d = 0; d < count; ++d)
      uses.push_back(Use{pod_server[p], device_records_[pod.first + d].device_id, rank + d});
    if (last)
      break;
    rank += pod.count;
  }
  std::sort(uses.begin(), uses.end(), [](const Use& a, const Use& b) {
    return std::tie(a.server, a.device_id, a.rank) < std::tie(b.server, b.device_id, b.rank);
  });
  // Per (server, device_id), in rank order: its first use, then repeats.
  Repeat repeat;
  for (std::size_t i = 0; i < uses.size();) {
    std::size_t j = i + 1;
    while (j < uses.size() && uses[j].server == uses[i].server && uses[j].device_id == uses[i].device_id)
      ++j;
    if (j - i > 1 && uses[i + 1].rank < repeat.at)
      repeat = Repeat{uses[i + 1].rank, uses[i].rank};
    i = j;
  }
  return repeat;
}

// The pod (records_ index) and device holding pass 2's device of rank `rank`.
std::pair<std::size_t, std::uint32_t> Template2Reader::pod_at(const std::vector<std::uint32_t>& pod_server,
                                                              std::uint32_t rank) const {
  for (std::size_t p = 0; p < records_.size(); ++p) {
    if (pod_server[p] == kNone)
      continue;
    if (rank < records_[p].count)
      return {p, rank};
    rank -= records_[p].count;
  }
  return {0, 0};  // not reached: `rank` is one of them
}

}  // namespace trainit::rank_table_internal
