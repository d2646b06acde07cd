// The DOM-based rank table reader trainit had before issue 9 (commit f6a2f01),
// kept as the oracle of the rank table fuzz test: the streaming reader that
// replaced it must refuse every table for the same reason, word for word, and
// read every other one the same. Test-only: a copy, never built into trainit.
#include "rank_table_dom_reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/number.h"
#include "os/json.h"
#include "os/text.h"
#include "platform/rank_table.h"

namespace trainit::dom_reference {

struct RankDevice {
  unsigned device_id = 0;  // the table's (physical) id, < max_local_devices
  unsigned rank_id = 0;    // 0..rank_size-1
  std::optional<std::string> device_ip;
};

// One server of the (template-1 view of the) table, devices in rank-table
// order: listed order for template 1, conversion order for template 2.
struct RankServer {
  std::string server_id;
  std::vector<RankDevice> devices;
};

// A template-2 instance (pod), in conversion order. Its devices are
// servers[server].devices[first, first + count); count is 0 (and server
// meaningless) for a pod of a group whose device_count is 0.
struct RankPod {
  std::string pod_name;
  std::string server_id;
  std::size_t server = 0;
  std::size_t first = 0;
  std::size_t count = 0;
};

struct RankTable {
  RankTableFormat format = RankTableFormat::kTemplate1;
  std::string version;              // template 1's "version" ("" when absent and for template 2)
  std::vector<RankServer> servers;  // by first appearance
  std::vector<RankPod> pods;        // template 2 only
  unsigned rank_size = 0;           // devices listed in the whole table
};

struct ParsedRankTable {
  std::string status;              // the table's "status"
  std::optional<RankTable> table;  // set iff status == "completed"
};

namespace {

using Object = Json::object_t;
using Array = Json::array_t;

constexpr std::string_view kKnownFormats =
    "trainit reads template 1 (version 1.x, server_list) and template 2 (group_list with pod_name)";

// A key path, rendered only when an error needs it: "server_list[1].device[3]".
// Each step points at its parent, so steps must outlive their children.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;
  std::size_t index = 0;
  bool is_index = false;

  [[nodiscard]] Path field(std::string_view k) const { return Path{this, k, 0, false}; }
  [[nodiscard]] Path at(std::size_t i) const { return Path{this, {}, i, true}; }

  [[nodiscard]] std::string str() const {
    std::vector<const Path*> chain;
    for (const Path* p = this; p != nullptr; p = p->parent)
      chain.push_back(p);
    std::string out;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Path& p = **it;
      if (p.is_index) {
        out += fmt::format("[{}]", p.index);
      } else if (!p.key.empty()) {
        if (!out.empty())
          out += '.';
        out += p.key;
      }
    }
    return out.empty() ? "top level" : out;
  }
};

// Typed, no-throw access to the parsed document; every failure is an Error
// in the one-line form of rank_table.h.
class Reader {
 public:
  Reader(std::string_view file, const RankTableLimits& limits) : file_(file), limits_(limits) {}

  [[nodiscard]] const RankTableLimits& limits() const { return limits_; }

  [[nodiscard]] Error fail(const Path& path, const Json& value, std::string_view problem) const {
    return Error{fmt::format("{}: {} = {}: {}", one_line(file_), path.str(), json_for_message(value), problem)};
  }

  [[nodiscard]] Error fail_file(std::string_view problem) const {
    return Error{fmt::format("{}: {}", one_line(file_), problem)};
  }

  [[nodiscard]] Result<const Object*> object(const Json& value, const Path& path) const {
    if (!value.is_object())
      return fail(path, value, "not an object");
    return &value.get_ref<const Object&>();
  }

  [[nodiscard]] Result<const Array*> array(const Json& value, const Path& path) const {
    if (!value.is_array())
      return fail(path, value, "not an array");
    return &value.get_ref<const Array&>();
  }

  [[nodiscard]] static const Json* member(const Object& object, std::string_view key) {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
  }

  // The member `key` of the object `value` at `path`; its absence is an error.
  [[nodiscard]] Result<const Json*> required(const Json& value, const Path& path, std::string_view key) const {
    const Json* found = member(value.get_ref<const Object&>(), key);
    if (found == nullptr)
      return fail(path, value, fmt::format("missing key \"{}\"", key));
    return found;
  }

  [[nodiscard]] Result<std::uint64_t> number(const Json& value, const Path& path) const {
    if (value.is_number_unsigned())
      return *value.get_ptr<const Json::number_unsigned_t*>();
    if (value.is_number_integer()) {
      auto n = *value.get_ptr<const Json::number_integer_t*>();
      if (n < 0)
        return fail(path, value, "negative");
      return static_cast<std::uint64_t>(n);
    }
    if (value.is_number_float())
      return fail(path, value, "not an integer");
    if (!value.is_string())
      return fail(path, value, "not a number (a decimal string like \"8\", or a JSON integer)");
    const std::string& text = value.get_ref<const std::string&>();
    if (auto n = parse_decimal(text))
      return *n;
    bool digits = !text.empty() && text[0] != '0' &&
                  std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits)
      return fail(path, value, "out of range");
    return fail(path, value, "not a decimal number (digits only: no sign, space, hex, fraction or leading zero)");
  }

  [[nodiscard]] Result<std::uint64_t> number_at_most(const Json& value, const Path& path, std::uint64_t max) const {
    auto n = number(value, path);
    if (n && *n > max)
      return fail(path, value, fmt::format("out of range 0..{}", max));
    return n;
  }

  [[nodiscard]] Result<std::string_view> name(const Json& value, const Path& path) const {
    if (!value.is_string())
      return fail(path, value, "not a string");
    const std::string& text = value.get_ref<const std::string&>();
    if (text.empty())
      return fail(path, value, "empty");
    return std::string_view(text);
  }

  [[nodiscard]] Result<std::optional<std::string>> optional_string(const Object& object, const Path& path,
                                                                   std::string_view key) const {
    const Json* value = member(object, key);
    if (value == nullptr)
      return std::optional<std::string>();
    Path p = path.field(key);
    if (!value->is_string())
      return fail(p, *value, "not a string");
    return std::optional<std::string>(value->get_ref<const std::string&>());
  }

  // A declared count (e.g. "server_count") must equal what is listed.
  [[nodiscard]] Result<void> declared_count(const Object& object, const Path& path, std::string_view key,
                                            std::size_t listed, std::string_view what) const {
    const Json* value = member(object, key);
    if (value == nullptr)
      return {};
    Path p = path.field(key);
    auto n = number(*value, p);
    if (!n)
      return n.error();
    if (*n != listed)
      return fail(p, *value, fmt::format("declares {} {} but {} are listed", *n, what, listed));
    return {};
  }

  [[nodiscard]] Result<unsigned> device_id(const Json& device, const Path& path) const {
    auto value = required(device, path, "device_id");
    if (!value)
      return value.error();
    Path p = path.field("device_id");
    auto n = number(**value, p);
    if (!n)
      return n.error();
    if (*n >= limits_.max_local_devices) {
      return fail(
          p, **value,
          fmt::format("out of range 0..{} (--max-local-devices raises the limit)", limits_.max_local_devices - 1));
    }
    return static_cast<unsigned>(*n);
  }

  [[nodiscard]] Result<void> devices_fit(const Json& devices, const Path& path, std::size_t count) const {
    if (count > limits_.max_local_devices) {
      return fail(path, devices,
                  fmt::format("{} devices on one host, more than the limit of {} (--max-local-devices raises it)",
                              count, limits_.max_local_devices));
    }
    return {};
  }

 private:
  std::string_view file_;
  RankTableLimits limits_;
};

// "1.0", "1.2", "1.10.3": a dotted version whose parts are digits; returns the
// major part.
std::optional<std::uint64_t> version_major(std::string_view text) {
  auto dot = text.find('.');
  auto major = parse_decimal(text.substr(0, dot));
  if (!major)
    return std::nullopt;
  while (dot != std::string_view::npos) {
    text.remove_prefix(dot + 1);
    dot = text.find('.');
    std::string_view part = text.substr(0, dot);
    if (part.empty() || !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
  }
  return major;
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

// ---------------------------------------------------------------- template 1

Result<RankTable> read_template1(const Reader& r, const Object& top, std::string version) {
  Path root;
  Path list_path = root.field("server_list");
  const Json& list_value = *Reader::member(top, "server_list");
  auto list = r.array(list_value, list_path);
  if (!list)
    return list.error();
  if ((*list)->empty())
    return r.fail(list_path, list_value, "no servers: the table lists no devices");
  if (auto ok = r.declared_count(top, root, "server_count", (*list)->size(), "servers"); !ok)
    return ok.error();

  RankTable table;
  table.format = RankTableFormat::kTemplate1;
  table.version = std::move(version);
  table.servers.reserve((*list)->size());
  std::vector<std::uint64_t> ranks;
  std::unordered_map<std::string_view, std::size_t> server_index;
  server_index.reserve((*list)->size());
  std::vector<int> device_seen(r.limits().max_local_devices, -1);

  for (std::size_t i = 0; i < (*list)->size(); ++i) {
    const Json& server = (**list)[i];
    Path sp = list_path.at(i);
    if (auto o = r.object(server, sp); !o)
      return o.error();
    auto id_value = r.required(server, sp, "server_id");
    if (!id_value)
      return id_value.error();
    Path id_path = sp.field("server_id");
    auto id = r.name(**id_value, id_path);
    if (!id)
      return id.error();
    if (auto [it, fresh] = server_index.emplace(*id, i); !fresh) {
      return r.fail(id_path, **id_value,
                    fmt::format("repeated server_id (also at server_list[{}].server_id)", it->second));
    }
    auto devices_value = r.required(server, sp, "device");
    if (!devices_value)
      return devices_value.error();
    Path dl = sp.field("device");
    auto devices = r.array(**devices_value, dl);
    if (!devices)
      return devices.error();
    if ((*devices)->empty())
      return r.fail(dl, **devices_value, "a server without devices");
    if (auto ok = r.devices_fit(**devices_value, dl, (*devices)->size()); !ok)
      return ok.error();

    RankServer out{std::string(*id), {}};
    out.devices.reserve((*devices)->size());
    std::fill(device_seen.begin(), device_seen.end(), -1);
    for (std::size_t j = 0; j < (*devices)->size(); ++j) {
      const Json& device = (**devices)[j];
      Path dp = dl.at(j);
      auto o = r.object(device, dp);
      if (!o)
        return o.error();
      auto device_id = r.device_id(device, dp);
      if (!device_id)
        return device_id.error();
      if (int first = device_seen[*device_id]; first >= 0) {
        return r.fail(
            dp.field("device_id"), *Reader::member(**o, "device_id"),
            fmt::format("repeated device_id on one server (also at server_list[{}].device[{}].device_id)", i, first));
      }
      device_seen[*device_id] = static_cast<int>(j);
      auto rank_value = r.required(device, dp, "rank_id");
      if (!rank_value)
        return rank_value.error();
      auto rank = r.number(**rank_value, dp.field("rank_id"));
      if (!rank)
        return rank.error();
      auto ip = r.optional_string(**o, dp, "device_ip");
      if (!ip)
        return ip.error();
      ranks.push_back(*rank);
      out.devices.push_back(RankDevice{*device_id, 0, std::move(*ip)});
    }
    table.servers.push_back(std::move(out));
  }

  // rank_ids: exactly 0..N-1 across the whole table. N distinct values below
  // N are a permutation, so range and repeats are all there is to check.
  auto rank_path_error = [&](std::size_t flat, std::string_view problem) {
    std::size_t i = 0;
    while (flat >= table.servers[i].devices.size())
      flat -= table.servers[i++].devices.size();
    Path sp = list_path.at(i);
    Path dl = sp.field("device");
    Path dp = dl.at(flat);
    const Json& device = (**list)[i].get_ref<const Object&>().find("device")->second.get_ref<const Array&>()[flat];
    return r.fail(dp.field("rank_id"), *Reader::member(device.get_ref<const Object&>(), "rank_id"), problem);
  };
  auto location_of = [&](std::size_t flat) {
    std::size_t i = 0;
    while (flat >= table.servers[i].devices.size())
      flat -= table.servers[i++].devices.size();
    return fmt::format("server_list[{}].device[{}].rank_id", i, flat);
  };
  const std::size_t total = ranks.size();
  if (total > std::numeric_limits<unsigned>::max())
    return r.fail_file("too many devices");
  std::vector<std::int64_t> rank_at(total, -1);
  for (std::size_t k = 0; k < total; ++k) {
    if (ranks[k] >= total) {
      return rank_path_error(k, fmt::format("out of range 0..{} (the table lists {} devices)", total - 1, total));
    }
    if (rank_at[ranks[k]] >= 0) {
      return rank_path_error(
          k, fmt::format("repeated rank_id (also at {})", location_of(static_cast<std::size_t>(rank_at[ranks[k]]))));
    }
    rank_at[ranks[k]] = static_cast<std::int64_t>(k);
  }
  std::size_t k = 0;
  for (RankServer& server : table.servers) {
    for (RankDevice& device : server.devices)
      device.rank_id = static_cast<unsigned>(ranks[k++]);
  }
  table.rank_size = static_cast<unsigned>(total);
  return table;
}

// ---------------------------------------------------------------- template 2

struct Instance {
  std::size_t group = 0;
  std::size_t index = 0;  // listed position in its instance_list
  std::string_view pod_name;
  std::string_view server_id;
  const Array* devices = nullptr;
  std::optional<std::uint64_t> suffix;
};

Result<RankTable> read_template2(const Reader& r, const Object& top) {
  Path root;
  Path list_path = root.field("group_list");
  const Json& list_value = *Reader::member(top, "group_list");
  auto list = r.array(list_value, list_path);
  if (!list)
    return list.error();
  if (auto ok = r.declared_count(top, root, "group_count", (*list)->size(), "groups"); !ok)
    return ok.error();

  // Pass 1: shape, names and declared counts; instances in conversion order.
  std::vector<Instance> order;
  std::vector<bool> group_skipped((*list)->size(), false);
  std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>> pod_index;
  for (std::size_t g = 0; g < (*list)->size(); ++g) {
    const Json& group = (**list)[g];
    Path gp = list_path.at(g);
    auto go = r.object(group, gp);
    if (!go)
      return go.error();
    if (auto name = r.optional_string(**go, gp, "group_name"); !name)
      return name.error();
    auto instances_value = r.required(group, gp, "instance_list");
    if (!instances_value)
      return instances_value.error();
    Path il = gp.field("instance_list");
    auto instances = r.array(**instances_value, il);
    if (!instances)
      return instances.error();
    if (auto ok = r.declared_count(**go, gp, "instance_count", (*instances)->size(), "instances"); !ok) {
      return ok.error();
    }

    const std::size_t group_begin = order.size();
    std::size_t listed = 0;
    for (std::size_t k = 0; k < (*instances)->size(); ++k) {
      const Json& instance = (**instances)[k];
      Path ip = il.at(k);
      auto io = r.object(instance, ip);
      if (!io)
        return io.error();
      const Json* pod_value = Reader::member(**io, "pod_name");
      if (pod_value == nullptr) {
        return r.fail(ip, instance,
                      fmt::format("no pod_name: old-style group_list rank tables (instances without pod_name) are not "
                                  "supported; {}",
                                  kKnownFormats));
      }
      Path pp = ip.field("pod_name");
      auto pod = r.name(*pod_value, pp);
      if (!pod)
        return pod.error();
      if (auto [it, fresh] = pod_index.emplace(*pod, std::pair{g, k}); !fresh) {
        return r.fail(pp, *pod_value,
                      fmt::format("repeated pod_name (also at group_list[{}].instance_list[{}].pod_name)",
                                  it->second.first, it->second.second));
      }
      auto server_value = r.required(instance, ip, "server_id");
      if (!server_value)
        return server_value.error();
      auto server = r.name(**server_value, ip.field("server_id"));
      if (!server)
        return server.error();
      auto devices_value = r.required(instance, ip, "devices");
      if (!devices_value)
        return devices_value.error();
      auto devices = r.array(**devices_value, ip.field("devices"));
      if (!devices)
        return devices.error();
      if (auto ok = r.devices_fit(**devices_value, ip.field("devices"), (*devices)->size()); !ok)
        return ok.error();
      listed += (*devices)->size();
      order.push_back(Instance{g, k, *pod, *server, *devices, pod_suffix(*pod)});
    }

    if (const Json* count_value = Reader::member(**go, "device_count")) {
      Path cp = gp.field("device_count");
      auto count = r.number(*count_value, cp);
      if (!count)
        return count.error();
      if (*count != listed) {
        return r.fail(cp, *count_value,
                      fmt::format("declares {} but the group's instances list {} devices", *count, listed));
      }
      group_skipped[g] = *count == 0;  // docs/contract.md §2: skip groups with device_count 0
    }
    if (!group_skipped[g]) {
      for (std::size_t n = group_begin; n < order.size(); ++n) {
        if (order[n].devices->empty()) {
          Path ip = il.at(order[n].index);
          return r.fail(ip.field("devices"), Json::array(), "an instance without devices");
        }
      }
    }
    // Sorted by the pod names' numeric suffixes when every name has one;
    // listed order otherwise (the reference launcher crashes there).
    auto begin = order.begin() + static_cast<std::ptrdiff_t>(group_begin);
    if (std::all_of(begin, order.end(), [](const Instance& i) { return i.suffix.has_value(); })) {
      std::stable_sort(begin, order.end(), [](const Instance& a, const Instance& b) { return *a.suffix < *b.suffix; });
    }
  }

  // Pass 2: devices, numbered across groups/instances/devices in that order,
  // grouped by server_id.
  RankTable table;
  table.format = RankTableFormat::kTemplate2;
  table.pods.reserve(order.size());
  std::unordered_map<std::string_view, std::size_t> server_index;
  struct Origin {
    std::size_t group, instance, device;
  };
  std::vector<std::vector<Origin>> origins;   // per server, parallel to its devices
  std::vector<std::vector<int>> device_seen;  // per server: device_id -> position, -1 when free
  unsigned next_rank = 0;
  for (const Instance& inst : order) {
    RankPod pod{std::string(inst.pod_name), std::string(inst.server_id), 0, 0, 0};
    if (group_skipped[inst.group]) {
      table.pods.push_back(std::move(pod));
      continue;
    }
    auto [it, fresh] = server_index.emplace(inst.server_id, table.servers.size());
    if (fresh) {
      table.servers.push_back(RankServer{std::string(inst.server_id), {}});
      origins.emplace_back();
      device_seen.emplace_back(r.limits().max_local_devices, -1);
    }
    const std::size_t s = it->second;
    RankServer& server = table.servers[s];
    pod.server = s;
    pod.first = server.devices.size();
    pod.count = inst.devices->size();
    if (server.devices.size() + inst.devices->size() > r.limits().max_local_devices) {
      Path gp = list_path.at(inst.group);
      Path il = gp.field("instance_list");
      Path ip = il.at(inst.index);
      return r.fail(ip.field("server_id"), Json(std::string(inst.server_id)),
                    fmt::format("the pods on this server list {} devices, more than the limit of {} per host "
                                "(--max-local-devices raises it)",
                                server.devices.size() + inst.devices->size(), r.limits().max_local_devices));
    }
    for (std::size_t d = 0; d < inst.devices->size(); ++d) {
      const Json& device = (*inst.devices)[d];
      Path gp = list_path.at(inst.group);
      Path il = gp.field("instance_list");
      Path ip = il.at(inst.index);
      Path dl = ip.field("devices");
      Path dp = dl.at(d);
      auto o = r.object(device, dp);
      if (!o)
        return o.error();
      auto device_id = r.device_id(device, dp);
      if (!device_id)
        return device_id.error();
      if (int first = device_seen[s][*device_id]; first >= 0) {
        const Origin& at = origins[s][static_cast<std::size_t>(first)];
        return r.fail(dp.field("device_id"), *Reader::member(**o, "device_id"),
                      fmt::format("repeated device_id on server {} (also at "
                                  "group_list[{}].instance_list[{}].devices[{}].device_id)",
                                  quote_for_message(server.server_id), at.group, at.instance, at.device));
      }
      auto ip_value = r.optional_string(**o, dp, "device_ip");
      if (!ip_value)
        return ip_value.error();
      device_seen[s][*device_id] = static_cast<int>(server.devices.size());
      origins[s].push_back(Origin{inst.group, inst.index, d});
      server.devices.push_back(RankDevice{*device_id, next_rank++, std::move(*ip_value)});
    }
    table.pods.push_back(std::move(pod));
  }
  if (next_rank == 0)
    return r.fail(list_path, list_value, "the table lists no devices");
  table.rank_size = next_rank;
  return table;
}

Result<RankTable> read_completed(const Reader& r, const Json& doc) {
  Path root;
  const Object& top = doc.get_ref<const Object&>();
  std::string version;
  if (const Json* value = Reader::member(top, "version")) {
    Path vp = root.field("version");
    if (!value->is_string())
      return r.fail(vp, *value, "not a string (e.g. \"1.0\")");
    version = value->get_ref<const std::string&>();
    auto major = version_major(version);
    if (!major)
      return r.fail(vp, *value, "not a version number like \"1.0\"");
    if (*major != 1) {
      return r.fail(vp, *value, fmt::format("unsupported rank table format version; {}", kKnownFormats));
    }
  }
  if (const Json* value = Reader::member(top, "rank_list")) {
    return r.fail(root.field("rank_list"), *value,
                  fmt::format("unsupported rank table format (rank_list tables); {}", kKnownFormats));
  }
  bool servers = Reader::member(top, "server_list") != nullptr;
  bool groups = Reader::member(top, "group_list") != nullptr;
  if (servers && groups) {
    return r.fail(root, doc, "ambiguous rank table format: both server_list (template 1) and group_list (template 2)");
  }
  if (servers)
    return read_template1(r, top, std::move(version));
  if (groups)
    return read_template2(r, top);
  return r.fail(root, doc,
                fmt::format("unknown rank table format: neither server_list nor group_list; {}", kKnownFormats));
}

void append_quoted(std::string& out, std::string_view key, std::string_view value) {
  append_json_string(out, key);
  out += ':';
  append_json_string(out, value);
}

}  // namespace

Result<ParsedRankTable> parse_rank_table(std::string_view text, std::string_view file, const RankTableLimits& limits) {
  Reader r(file, limits);
  try {
    auto doc = parse_json(text, file, JsonLimits{limits.max_bytes, limits.max_depth});
    if (!doc)
      return doc.error();
    Path root;
    if (!doc->is_object())
      return r.fail(root, *doc, "not an object: a rank table is a JSON object");
    auto status_value = r.required(*doc, root, "status");
    if (!status_value)
      return status_value.error();
    if (!(*status_value)->is_string())
      return r.fail(root.field("status"), **status_value, "not a string");
    ParsedRankTable parsed;
    parsed.status = (*status_value)->get_ref<const std::string&>();
    if (parsed.status != "completed")
      return parsed;
    auto table = read_completed(r, *doc);
    if (!table)
      return table.error();
    parsed.table = std::move(*table);
    return parsed;
  } catch (const std::exception& e) {  // allocation failure: nothing else throws here
    return r.fail_file(fmt::format("cannot read the rank table: {}", one_line(e.what())));
  }
}

std::string to_template1_json(const RankTable& table) {
  std::string out;
  out.reserve(96 + table.rank_size * 72);
  out += "{\"status\":\"completed\",\"version\":\"1.0\",";
  append_quoted(out, "server_count", std::to_string(table.servers.size()));
  out += ",\"server_list\":[";
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    const RankServer& server = table.servers[i];
    if (i > 0)
      out += ',';
    out += '{';
    append_quoted(out, "server_id", server.server_id);
    out += ",\"device\":[";
    for (std::size_t j = 0; j < server.devices.size(); ++j) {
      const RankDevice& device = server.devices[j];
      if (j > 0)
        out += ',';
      out += '{';
      append_quoted(out, "device_id", std::to_string(device.device_id));
      if (device.device_ip) {
        out += ',';
        append_quoted(out, "device_ip", *device.device_ip);
      }
      out += ',';
      append_quoted(out, "rank_id", std::to_string(device.rank_id));
      out += '}';
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

std::string read(std::string_view text, std::string_view file, unsigned max_local_devices) {
  RankTableLimits limits;
  limits.max_local_devices = max_local_devices;
  auto parsed = dom_reference::parse_rank_table(text, file, limits);
  if (!parsed.ok())
    return "refused " + parsed.error().message;
  if (!parsed->table)
    return "pending " + parsed->status;
  return "accepted " + parsed->table->version + " " + to_template1_json(*parsed->table);
}

}  // namespace trainit::dom_reference
