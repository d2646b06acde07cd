#include "platform/rank_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <tuple>
#include <utility>

#include "base/number.h"
#include "platform/json.h"
#include "platform/text.h"

// How a table is read: its top-level "status" first (peek_top_level_string),
// and nothing more of a table that is not complete; then one pass over the
// text (parse_json_stream), which keeps only what the checks need, then the
// checks in the order the rules are written in rank_table.h, so that a table
// with several faults is refused for the same one whatever order its keys
// come in:
//
//   1. the JSON itself (syntax, depth, repeated keys), anywhere in the text;
//   2. the top level: an object, "status", "version", the format;
//   3. the list's shape and its declared count;
//   4. template 1: servers in order, each whole (its server_id, its device
//      list, then its devices in order); template 2, pass 1: groups in order,
//      each whole (its own keys, then its instances in listed order, then
//      its device_count); pass 2: the devices of every pod in conversion
//      order (the pods of a group sorted by their names' numeric suffixes);
//   5. template 1: rank_ids over the whole table.
//
// Checks of step 4 run while the stream goes (a server's when it ends), and
// only the first problem found is kept: a later one can never be the one
// reported. Template 2's pass 2 cannot run before the whole table is read; for
// it each device is kept as its device_id and device_ip, and of the problems a
// device has by itself (not an object, a bad device_id or device_ip) only the
// one pass 2 would meet first (see OwnProblem).

namespace trainit {
namespace {

constexpr std::string_view kKnownFormats =
    "trainit reads template 1 (version 1.x, server_list) and template 2 (group_list with pod_name)";

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

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

// A value met where a check will look at it, kept until it does (at the end of
// its object, or of the document): a scalar, or a container's kind and its
// form for messages.
struct Seen {
  enum class Kind : std::uint8_t { kMissing, kScalar, kObject, kArray };
  Kind kind = Kind::kMissing;
  JsonScalar scalar;  // kScalar; a string's text is in `text`
  std::string text;   // kScalar strings: the string; containers: the start of its form (JsonStreamReader::close)

  [[nodiscard]] bool present() const { return kind != Kind::kMissing; }
  [[nodiscard]] bool is_string() const { return kind == Kind::kScalar && scalar.type == JsonScalar::Type::kString; }

  void set(const JsonScalar& value) {
    kind = Kind::kScalar;
    scalar = value;
    scalar.string = {};
    if (value.type == JsonScalar::Type::kString)
      text.assign(value.string);
    else
      text.clear();
  }
  void set_container(bool object, std::string_view form) {
    kind = object ? Kind::kObject : Kind::kArray;
    text.assign(form);
  }
  void reset() {
    kind = Kind::kMissing;
    text.clear();
  }

  [[nodiscard]] std::string message() const {
    if (kind != Kind::kScalar)
      return json_for_message_of_form(text);
    JsonScalar value = scalar;
    if (value.type == JsonScalar::Type::kString)
      value.string = text;
    return json_for_message(value);
  }

  static Seen string_value(std::string_view s) {
    Seen v;
    JsonScalar value;
    value.type = JsonScalar::Type::kString;
    value.string = s;
    v.set(value);
    return v;
  }
  static Seen empty_array() {
    Seen v;
    v.set_container(false, "[]");
    return v;
  }
};

// `value` as a rank table number: a JSON integer >= 0 or a strict decimal
// string. Otherwise false, with what is wrong in `problem`.
bool to_number(const Seen& value, std::uint64_t* out, std::string* problem) {
  if (value.kind == Seen::Kind::kScalar) {
    switch (value.scalar.type) {
      case JsonScalar::Type::kUnsigned:
        *out = value.scalar.natural;
        return true;
      case JsonScalar::Type::kInteger:
        if (value.scalar.integer < 0) {
          *problem = "negative";
          return false;
        }
        *out = static_cast<std::uint64_t>(value.scalar.integer);
        return true;
      case JsonScalar::Type::kFloat:
        *problem = "not an integer";
        return false;
      case JsonScalar::Type::kString: {
        if (auto n = parse_decimal(value.text)) {
          *out = *n;
          return true;
        }
        const std::string& t = value.text;
        bool digits =
            !t.empty() && t[0] != '0' && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
        *problem = digits ? "out of range"
                          : "not a decimal number (digits only: no sign, space, hex, fraction or leading zero)";
        return false;
      }
      default:
        break;
    }
  }
  *problem = "not a number (a decimal string like \"8\", or a JSON integer)";
  return false;
}

// A number that passed to_number(), for a later message: how the table wrote
// it prints back from its value and whether it was a string.
Seen kept_number(std::uint64_t value, bool written_as_string) {
  Seen v;
  JsonScalar scalar;
  const std::string digits = std::to_string(value);
  if (written_as_string) {
    scalar.type = JsonScalar::Type::kString;
    scalar.string = digits;
  } else {
    scalar.type = JsonScalar::Type::kUnsigned;
    scalar.natural = value;
  }
  v.set(scalar);
  return v;
}

// Numbers to numbers (device_ids to where they were first seen), by open
// addressing; clear() costs nothing, so one map serves server after server.
class IdMap {
 public:
  // The value `key` already has; otherwise adds it with `value` and returns kNone.
  std::uint32_t insert(std::uint64_t key, std::uint32_t value) {
    if (2 * (size_ + 1) > slots_.size())
      grow();
    Slot* slot = find(key);
    if (slot->generation == generation_)
      return slot->value;
    *slot = Slot{key, value, generation_};
    ++size_;
    return kNone;
  }
  void clear() {
    ++generation_;
    size_ = 0;
  }

 private:
  struct Slot {
    std::uint64_t key = 0;
    std::uint32_t value = 0;
    std::uint32_t generation = 0;  // in use iff equal to generation_
  };

  Slot* find(std::uint64_t key) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = (key * 0x9e3779b97f4a7c15ULL) >> 20 & mask;; i = (i + 1) & mask) {
      if (slots_[i].generation != generation_ || slots_[i].key == key)
        return &slots_[i];
    }
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<std::size_t>(16, 2 * old.size()), Slot{});
    for (const Slot& s : old) {
      if (s.generation == generation_)
        *find(s.key) = s;
    }
  }

  std::vector<Slot> slots_;
  std::uint32_t generation_ = 1;
  std::size_t size_ = 0;
};

// Names (server_ids, pod_names) kept in the table's strings, to where they
// were first seen.
class NameIndex {
 public:
  explicit NameIndex(const std::string& strings) : strings_(strings) {}

  // The value `name` already has; otherwise adds it with `value` and returns kNone.
  std::uint32_t insert(TableText name, std::uint32_t value) {
    if (2 * (entries_.size() + 1) > slots_.size())
      grow();
    std::uint32_t* slot = find(view(name));
    if (*slot != 0)
      return entries_[*slot - 1].value;
    entries_.push_back(Entry{name, value});
    *slot = static_cast<std::uint32_t>(entries_.size());
    return kNone;
  }

  // Forgets every name, memory included.
  void release() {
    std::vector<Entry>().swap(entries_);
    std::vector<std::uint32_t>().swap(slots_);
  }

 private:
  struct Entry {
    TableText name;
    std::uint32_t value;
  };

  [[nodiscard]] std::string_view view(TableText t) const { return std::string_view(strings_).substr(t.offset, t.size); }

  std::uint32_t* find(std::string_view name) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = std::hash<std::string_view>{}(name)&mask;; i = (i + 1) & mask) {
      if (slots_[i] == 0 || view(entries_[slots_[i] - 1].name) == name)
        return &slots_[i];
    }
  }

  void grow() {
    slots_.assign(std::max<std::size_t>(16, 2 * slots_.size()), 0);
    for (std::size_t e = 0; e < entries_.size(); ++e)
      *find(view(entries_[e].name)) = static_cast<std::uint32_t>(e + 1);
  }

  const std::string& strings_;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> slots_;  // entry + 1; 0: free
};

std::string server_path(std::size_t i) {
  return fmt::format("server_list[{}]", i);
}
std::string t1_device_path(std::size_t i, std::size_t j) {
  return fmt::format("server_list[{}].device[{}]", i, j);
}
std::string group_path(std::size_t g) {
  return fmt::format("group_list[{}]", g);
}
std::string instance_path(std::size_t g, std::size_t k) {
  return fmt::format("group_list[{}].instance_list[{}]", g, k);
}
std::string t2_device_path(std::size_t g, std::size_t k, std::size_t d) {
  return fmt::format("group_list[{}].instance_list[{}].devices[{}]", g, k, d);
}

// The reader: told the table by parse_json_stream(), it keeps what the checks
// need (see the top of this file); finish() runs what is left of them.
class TableReader final : public JsonStreamReader {
 public:
  TableReader(std::string_view file, const RankTableLimits& limits)
      : file_(file), limits_(limits), server_names_(table_.strings), pod_names_(table_.strings) {}

  bool scalar(const JsonScalar& value) override {
    Target t = target();
    if (t.slot != nullptr)
      t.slot->set(value);
    end_unit(t.unit, false);
    return true;
  }

  bool open(bool object) override {
    Target t = target();
    levels_.push_back(Level{object ? t.object_role : t.array_role, object, t.unit, t.slot, 0});
    return true;
  }

  bool key(std::string_view key) override {
    next_ = Target{};
    auto is = [&](std::string_view name, Seen* slot, Role array_role = Role::kOther) {
      if (key != name)
        return false;
      next_.slot = slot;
      next_.array_role = array_role;
      return true;
    };
    switch (levels_.back().role) {
      case Role::kTop:
        (void)(is("status", &status_) || is("version", &version_) || is("rank_list", &rank_list_) ||
               is("server_list", &server_list_, Role::kServerList) ||
               is("group_list", &group_list_, Role::kGroupList) || is("server_count", &server_count_) ||
               is("group_count", &group_count_));
        break;
      case Role::kServer:
        (void)(is("server_id", &server_.id) || is("device", &server_.devices, Role::kDeviceList));
        break;
      case Role::kDevice:
        (void)(is("device_id", &device_.id) || is("rank_id", &device_.rank) || is("device_ip", &device_.ip));
        break;
      case Role::kGroup:
        (void)(is("group_name", &group_.name) || is("instance_list", &group_.instances, Role::kInstanceList) ||
               is("instance_count", &group_.instance_count) || is("device_count", &group_.device_count));
        break;
      case Role::kInstance:
        (void)(is("pod_name", &instance_.pod) || is("server_id", &instance_.server) ||
               is("devices", &instance_.devices, Role::kPodDeviceList));
        break;
      case Role::kPodDevice:
        (void)(is("device_id", &device_.id) || is("device_ip", &device_.ip));
        break;
      default:
        break;
    }
    return true;
  }

  bool close(std::string_view form) override {
    const Level level = levels_.back();
    levels_.pop_back();
    if (level.slot != nullptr)
      level.slot->set_container(level.object, form);
    switch (level.role) {
      case Role::kServerList:
        server_list_count_ = level.count;
        break;
      case Role::kDeviceList:
        server_.device_count = level.count;
        break;
      case Role::kGroupList:
        group_list_count_ = level.count;
        break;
      case Role::kInstanceList:
        group_.instance_list_count = level.count;
        break;
      case Role::kPodDeviceList:
        instance_.device_count = level.count;
        break;
      default:
        break;
    }
    end_unit(level.unit, level.object);
    return true;
  }

  // The checks left once the whole table has been read.
  Result<ParsedRankTable> finish() {
    if (document_.kind != Seen::Kind::kObject)
      return fail("top level", document_, "not an object: a rank table is a JSON object");
    if (!status_.present())
      return fail("top level", document_, "missing key \"status\"");
    if (!status_.is_string())
      return fail("status", status_, "not a string");
    ParsedRankTable parsed;
    parsed.status = status_.text;
    if (parsed.status != "completed")
      return parsed;
    if (version_.present()) {
      if (!version_.is_string())
        return fail("version", version_, "not a string (e.g. \"1.0\")");
      auto major = version_major(version_.text);
      if (!major)
        return fail("version", version_, "not a version number like \"1.0\"");
      if (*major != 1)
        return fail("version", version_, fmt::format("unsupported rank table format version; {}", kKnownFormats));
    }
    if (rank_list_.present()) {
      return fail("rank_list", rank_list_,
                  fmt::format("unsupported rank table format (rank_list tables); {}", kKnownFormats));
    }
    if (server_list_.present() && group_list_.present()) {
      return fail("top level", document_,
                  "ambiguous rank table format: both server_list (template 1) and group_list (template 2)");
    }
    Result<void> done = server_list_.present() ? finish_template1()
                        : group_list_.present()
                            ? finish_template2()
                            : Result<void>(fail("top level", document_,
                                                fmt::format("unknown rank table format: neither server_list nor "
                                                            "group_list; {}",
                                                            kKnownFormats)));
    if (!done)
      return done.error();
    parsed.table = std::move(table_);
    return parsed;
  }

 private:
  // What a container is, by where it is.
  enum class Role : std::uint8_t {
    kOther,          // nothing checked inside
    kTop,            // the document
    kServerList,     // template 1: "server_list"
    kServer,         // one of its servers
    kDeviceList,     // a server's "device"
    kDevice,         // one of its devices (template 1), or of a pod's (kPodDevice)
    kGroupList,      // template 2: "group_list"
    kGroup,          // one of its groups
    kInstanceList,   // a group's "instance_list"
    kInstance,       // one of its pods
    kPodDeviceList,  // a pod's "devices"
    kPodDevice,      // one of them
  };
  // The element a value is, whatever its kind, when its end runs checks.
  enum class Unit : std::uint8_t { kNone, kServer, kDevice, kGroup, kInstance, kPodDevice };

  struct Level {
    Role role;
    bool object;
    Unit unit;
    Seen* slot;         // where the container goes when it closes, if anywhere
    std::size_t count;  // values started in it (arrays: the next one's index)
  };
  // Where the value that starts now goes.
  struct Target {
    Seen* slot = nullptr;
    Role object_role = Role::kOther;
    Role array_role = Role::kOther;
    Unit unit = Unit::kNone;
  };

  // A problem a template-2 device has by itself, kept for pass 2: only the
  // first device of a pod that has one matters, and of the pods of one group
  // only the one pass 2 reaches first (the group's first in listed order, or,
  // when the group is sorted, the one with the smallest suffix).
  struct OwnProblem {
    std::uint32_t pod = kNone;  // records_ index
    std::uint32_t device = kNone;
    bool before_repeat = true;  // checked before the device_id repeat check (else after: device_ip)
    Error error;
  };

  // The element being read, of each kind: reset() for the next one, keeping
  // the buffers.
  struct ServerUnit {  // template 1: the server being read
    std::size_t index = 0;
    Seen self, id, devices;
    std::size_t device_count = 0;
    std::uint32_t first = 0;       // its first device in table_.devices
    std::optional<Error> problem;  // the first problem of its devices
    void reset() {
      for (Seen* v : {&self, &id, &devices})
        v->reset();
      device_count = 0;
      problem.reset();
    }
  };
  struct DeviceUnit {  // the device being read, of either template
    std::size_t index = 0;
    Seen self, id, rank, ip;
    void reset() {
      for (Seen* v : {&self, &id, &rank, &ip})
        v->reset();
    }
  };
  struct GroupUnit {  // template 2: the group being read
    std::size_t index = 0;
    Seen self, name, instances, instance_count, device_count;
    std::size_t instance_list_count = 0;
    std::uint32_t first = 0;               // its first pod in records_
    std::uint64_t listed = 0;              // devices its pods list
    bool all_suffixed = true;              // every pod name has a numeric suffix
    std::optional<Error> problem;          // the first problem of its pods (pass 1)
    OwnProblem first_listed;               // of the pods with an OwnProblem: the first listed
    OwnProblem least_suffix;               // ... and the one with the smallest suffix
    std::uint64_t least = 0;               // that suffix
    void reset() { *this = GroupUnit{}; }  // once a group: no buffers worth keeping
  };
  struct InstanceUnit {  // template 2: the pod being read
    std::size_t index = 0;
    Seen self, pod, server, devices;
    std::size_t device_count = 0;
    std::uint32_t first = 0;  // its first device in device_records_
    OwnProblem own;
    void reset() {
      for (Seen* v : {&self, &pod, &server, &devices})
        v->reset();
      device_count = 0;
      own = OwnProblem{};
    }
  };
  // Template 2, pass 1: a pod in conversion order, and its devices.
  struct PodRecord {
    std::uint32_t group = 0;
    std::uint32_t index = 0;  // listed position in its instance_list
    TableText pod_name, server_id;
    std::uint32_t first = 0;  // its devices: device_records_[first, first + count)
    std::uint32_t count = 0;
    std::uint64_t suffix = 0;
  };
  struct DeviceRecord {
    unsigned device_id = 0;
    bool id_is_string = false;
    bool has_ip = false;
    TableText ip;
  };

  [[nodiscard]] Error fail(std::string_view path, const Seen& value, std::string_view problem) const {
    return Error{fmt::format("{}: {} = {}: {}", one_line(file_), path, value.message(), problem)};
  }
  [[nodiscard]] Error fail_file(std::string_view problem) const {
    return Error{fmt::format("{}: {}", one_line(file_), problem)};
  }

  TableText add(std::string_view s) {
    TableText t{static_cast<std::uint32_t>(table_.strings.size()), static_cast<std::uint32_t>(s.size())};
    table_.strings.append(s);
    return t;
  }

  // A declared count (e.g. "server_count") must equal what is listed.
  // (Paths are made only for a message: `path` is a function that makes one.)
  template <typename Path>
  [[nodiscard]] std::optional<Error> declared_count(const Seen& value, const Path& path, std::size_t listed,
                                                    std::string_view what) const {
    if (!value.present())
      return std::nullopt;
    std::uint64_t n = 0;
    std::string problem;
    if (!to_number(value, &n, &problem))
      return fail(path(), value, problem);
    if (n != listed)
      return fail(path(), value, fmt::format("declares {} {} but {} are listed", n, what, listed));
    return std::nullopt;
  }

  template <typename Path>
  [[nodiscard]] std::optional<Error> name(const Seen& value, const Path& path) const {
    if (!value.is_string())
      return fail(path(), value, "not a string");
    if (value.text.empty())
      return fail(path(), value, "empty");
    return std::nullopt;
  }

  template <typename Path>
  [[nodiscard]] std::optional<Error> devices_fit(const Seen& devices, const Path& path, std::size_t count) const {
    if (count > limits_.max_local_devices) {
      return fail(path(), devices,
                  fmt::format("{} devices on one host, more than the limit of {} (--max-local-devices raises it)",
                              count, limits_.max_local_devices));
    }
    return std::nullopt;
  }

  // A device's device_id: present, a number, below the limit.
  template <typename Path>
  std::optional<Error> device_id(const DeviceUnit& d, const Path& path, std::uint64_t* id) const {
    if (!d.id.present())
      return fail(path(), d.self, "missing key \"device_id\"");
    std::string problem;
    if (!to_number(d.id, id, &problem))
      return fail(path() + ".device_id", d.id, problem);
    if (*id >= limits_.max_local_devices) {
      return fail(
          path() + ".device_id", d.id,
          fmt::format("out of range 0..{} (--max-local-devices raises the limit)", limits_.max_local_devices - 1));
    }
    return std::nullopt;
  }

  // --- where values go --------------------------------------------------------

  Target target() {
    if (levels_.empty())
      return Target{&document_, Role::kTop, Role::kOther, Unit::kNone};
    Level& parent = levels_.back();
    const std::size_t index = parent.count++;
    if (parent.object) {
      Target t = next_;
      next_ = Target{};
      return t;
    }
    switch (parent.role) {
      case Role::kServerList:
        server_.reset();
        server_.index = index;
        server_.first = static_cast<std::uint32_t>(table_.devices.size());
        device_ids_.clear();
        return Target{&server_.self, Role::kServer, Role::kOther, Unit::kServer};
      case Role::kDeviceList:
      case Role::kPodDeviceList:
        device_.reset();
        device_.index = index;
        return Target{&device_.self, parent.role == Role::kDeviceList ? Role::kDevice : Role::kPodDevice, Role::kOther,
                      parent.role == Role::kDeviceList ? Unit::kDevice : Unit::kPodDevice};
      case Role::kGroupList:
        group_.reset();
        group_.index = index;
        group_.first = static_cast<std::uint32_t>(records_.size());
        return Target{&group_.self, Role::kGroup, Role::kOther, Unit::kGroup};
      case Role::kInstanceList:
        instance_.reset();
        instance_.index = index;
        instance_.first = static_cast<std::uint32_t>(device_records_.size());
        return Target{&instance_.self, Role::kInstance, Role::kOther, Unit::kInstance};
      default:
        return Target{};
    }
  }

  void end_unit(Unit unit, bool object) {
    switch (unit) {
      case Unit::kServer:
        end_server(object);
        break;
      case Unit::kDevice:
        end_device(object);
        break;
      case Unit::kGroup:
        end_group(object);
        break;
      case Unit::kInstance:
        end_instance(object);
        break;
      case Unit::kPodDevice:
        end_pod_device(object);
        break;
      case Unit::kNone:
        break;
    }
  }

  // --- template 1 -------------------------------------------------------------

  void end_device(bool object) {
    if (t1_error_ || server_.problem)
      return;  // only the first problem counts
    const DeviceUnit& d = device_;
    auto path = [&] { return t1_device_path(server_.index, d.index); };
    auto problem = [&](Error e) { server_.problem = std::move(e); };
    if (!object)
      return problem(fail(path(), d.self, "not an object"));
    std::uint64_t id = 0;
    if (auto e = device_id(d, path, &id))
      return problem(std::move(*e));
    if (std::uint32_t first = device_ids_.insert(id, static_cast<std::uint32_t>(d.index)); first != kNone) {
      return problem(fail(path() + ".device_id", d.id,
                          fmt::format("repeated device_id on one server (also at server_list[{}].device[{}].device_id)",
                                      server_.index, first)));
    }
    if (!d.rank.present())
      return problem(fail(path(), d.self, "missing key \"rank_id\""));
    std::uint64_t rank = 0;
    std::string what;
    if (!to_number(d.rank, &rank, &what))
      return problem(fail(path() + ".rank_id", d.rank, what));
    if (d.ip.present() && !d.ip.is_string())
      return problem(fail(path() + ".device_ip", d.ip, "not a string"));
    RankDevice device;
    device.device_id = static_cast<unsigned>(id);
    if (d.ip.present()) {
      device.has_ip = true;
      device.ip = add(d.ip.text);
    }
    table_.devices.push_back(device);
    ranks_.push_back(rank);
    rank_is_string_.push_back(d.rank.is_string());
  }

  void end_server(bool object) {
    if (t1_error_)
      return;
    const ServerUnit& s = server_;
    auto path = [&] { return server_path(s.index); };
    auto problem = [&](Error e) { t1_error_ = std::move(e); };
    if (!object)
      return problem(fail(path(), s.self, "not an object"));
    if (!s.id.present())
      return problem(fail(path(), s.self, "missing key \"server_id\""));
    if (auto e = name(s.id, [&] { return path() + ".server_id"; }))
      return problem(std::move(*e));
    const TableText id = add(s.id.text);
    if (std::uint32_t first = server_names_.insert(id, static_cast<std::uint32_t>(s.index)); first != kNone) {
      return problem(fail(path() + ".server_id", s.id,
                          fmt::format("repeated server_id (also at server_list[{}].server_id)", first)));
    }
    if (!s.devices.present())
      return problem(fail(path(), s.self, "missing key \"device\""));
    if (s.devices.kind != Seen::Kind::kArray)
      return problem(fail(path() + ".device", s.devices, "not an array"));
    if (s.device_count == 0)
      return problem(fail(path() + ".device", s.devices, "a server without devices"));
    if (auto e = devices_fit(
            s.devices, [&] { return path() + ".device"; }, s.device_count))
      return problem(std::move(*e));
    if (s.problem)
      return problem(*s.problem);
    table_.servers.push_back(RankServer{id, s.first, static_cast<std::uint32_t>(s.device_count)});
  }

  Result<void> finish_template1() {
    if (server_list_.kind != Seen::Kind::kArray)
      return fail("server_list", server_list_, "not an array");
    if (server_list_count_ == 0)
      return fail("server_list", server_list_, "no servers: the table lists no devices");
    if (auto e = declared_count(
            server_count_, [] { return std::string("server_count"); }, server_list_count_, "servers"))
      return *e;
    if (t1_error_)
      return *t1_error_;

    // rank_ids: exactly 0..N-1 across the whole table. N distinct values
    // below N are a permutation, so range and repeats are all there is to
    // check.
    const std::size_t total = table_.devices.size();
    if (total > std::numeric_limits<unsigned>::max())
      return fail_file("too many devices");
    auto place = [&](std::size_t flat) {  // server_list[i].device[j]
      auto server = std::upper_bound(table_.servers.begin(), table_.servers.end(), flat,
                                     [](std::size_t f, const RankServer& s) { return f < s.first; }) -
                    1;
      return t1_device_path(static_cast<std::size_t>(server - table_.servers.begin()), flat - server->first);
    };
    std::vector<std::uint32_t> rank_at(total, kNone);
    for (std::size_t k = 0; k < total; ++k) {
      const std::uint64_t rank = ranks_[k];
      if (rank >= total) {
        return fail(place(k) + ".rank_id", kept_number(rank, rank_is_string_[k]),
                    fmt::format("out of range 0..{} (the table lists {} devices)", total - 1, total));
      }
      if (rank_at[rank] != kNone) {
        return fail(place(k) + ".rank_id", kept_number(rank, rank_is_string_[k]),
                    fmt::format("repeated rank_id (also at {}.rank_id)", place(rank_at[rank])));
      }
      rank_at[rank] = static_cast<std::uint32_t>(k);
      table_.devices[k].rank_id = static_cast<unsigned>(rank);
    }
    table_.format = RankTableFormat::kTemplate1;
    table_.version = version_.present() ? version_.text : "";
    table_.rank_size = static_cast<unsigned>(total);
    return {};
  }

  // --- template 2 -------------------------------------------------------------

  void end_pod_device(bool object) {
    if (t2_error_ || group_.problem || instance_.own.device != kNone || candidate_)
      return;  // only the first problem counts; after a candidate, pass 2 never gets here
    const DeviceUnit& d = device_;
    auto own = [&](Error e, bool before_repeat) {
      instance_.own.device = static_cast<std::uint32_t>(d.index);
      instance_.own.before_repeat = before_repeat;
      instance_.own.error = std::move(e);
    };
    auto path = [&] { return t2_device_path(group_.index, instance_.index, d.index); };
    if (!object)
      return own(fail(path(), d.self, "not an object"), true);
    std::uint64_t id = 0;
    if (auto e = device_id(d, path, &id))
      return own(std::move(*e), true);
    DeviceRecord record;
    record.device_id = static_cast<unsigned>(id);
    record.id_is_string = d.id.is_string();
    if (d.ip.present() && d.ip.is_string()) {
      record.has_ip = true;
      record.ip = add(d.ip.text);
    }
    device_records_.push_back(record);
    if (d.ip.present() && !d.ip.is_string())
      own(fail(path() + ".device_ip", d.ip, "not a string"), false);
  }

  void end_instance(bool object) {
    if (t2_error_ || group_.problem)
      return;
    const InstanceUnit& inst = instance_;
    auto path = [&] { return instance_path(group_.index, inst.index); };
    auto problem = [&](Error e) { group_.problem = std::move(e); };
    if (!object)
      return problem(fail(path(), inst.self, "not an object"));
    if (!inst.pod.present()) {
      return problem(fail(path(), inst.self,
                          fmt::format("no pod_name: old-style group_list rank tables (instances without pod_name) "
                                      "are not supported; {}",
                                      kKnownFormats)));
    }
    if (auto e = name(inst.pod, [&] { return path() + ".pod_name"; }))
      return problem(std::move(*e));
    PodRecord record;
    record.group = static_cast<std::uint32_t>(group_.index);
    record.index = static_cast<std::uint32_t>(inst.index);
    record.pod_name = add(inst.pod.text);
    if (std::uint32_t first = pod_names_.insert(record.pod_name, static_cast<std::uint32_t>(pod_places_.size()));
        first != kNone) {
      return problem(fail(path() + ".pod_name", inst.pod,
                          fmt::format("repeated pod_name (also at group_list[{}].instance_list[{}].pod_name)",
                                      pod_places_[first].first, pod_places_[first].second)));
    }
    pod_places_.emplace_back(record.group, record.index);
    if (!inst.server.present())
      return problem(fail(path(), inst.self, "missing key \"server_id\""));
    if (auto e = name(inst.server, [&] { return path() + ".server_id"; }))
      return problem(std::move(*e));
    if (!inst.devices.present())
      return problem(fail(path(), inst.self, "missing key \"devices\""));
    if (inst.devices.kind != Seen::Kind::kArray)
      return problem(fail(path() + ".devices", inst.devices, "not an array"));
    if (auto e = devices_fit(
            inst.devices, [&] { return path() + ".devices"; }, inst.device_count))
      return problem(std::move(*e));
    record.server_id = add(inst.server.text);
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

  void end_group(bool object) {
    if (t2_error_)
      return;
    const GroupUnit& g = group_;
    auto path = [&] { return group_path(g.index); };
    auto problem = [&](Error e) { t2_error_ = std::move(e); };
    if (!object)
      return problem(fail(path(), g.self, "not an object"));
    if (g.name.present() && !g.name.is_string())
      return problem(fail(path() + ".group_name", g.name, "not a string"));
    if (!g.instances.present())
      return problem(fail(path(), g.self, "missing key \"instance_list\""));
    if (g.instances.kind != Seen::Kind::kArray)
      return problem(fail(path() + ".instance_list", g.instances, "not an array"));
    if (auto e = declared_count(
            g.instance_count, [&] { return path() + ".instance_count"; }, g.instance_list_count, "instances"))
      return problem(std::move(*e));
    if (g.problem)
      return problem(*g.problem);
    bool skipped = false;
    if (g.device_count.present()) {
      std::uint64_t count = 0;
      std::string what;
      if (!to_number(g.device_count, &count, &what))
        return problem(fail(path() + ".device_count", g.device_count, what));
      if (count != g.listed) {
        return problem(fail(path() + ".device_count", g.device_count,
                            fmt::format("declares {} but the group's instances list {} devices", count, g.listed)));
      }
      skipped = count == 0;  // CONTRACT.md §2: skip groups with device_count 0
    }
    const auto begin = records_.begin() + g.first;
    if (!skipped) {
      auto empty = std::find_if(begin, records_.end(), [](const PodRecord& r) { return r.count == 0; });
      if (empty != records_.end())
        return problem(fail(instance_path(g.index, empty->index) + ".devices", Seen::empty_array(),
                            "an instance without devices"));
    }
    // The pod whose device problem pass 2 meets first, by its listed place:
    // the sort below moves it.
    const OwnProblem& own = g.all_suffixed ? g.least_suffix : g.first_listed;
    const std::uint32_t own_listed = own.pod == kNone ? kNone : records_[own.pod].index;
    // Sorted by the pod names' numeric suffixes when every name has one;
    // listed order otherwise (the reference launcher crashes there).
    if (g.all_suffixed) {
      std::stable_sort(begin, records_.end(),
                       [](const PodRecord& a, const PodRecord& b) { return a.suffix < b.suffix; });
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

  Result<void> finish_template2() {
    if (group_list_.kind != Seen::Kind::kArray)
      return fail("group_list", group_list_, "not an array");
    if (auto e = declared_count(
            group_count_, [] { return std::string("group_count"); }, group_list_count_, "groups"))
      return *e;
    if (t2_error_)
      return *t2_error_;

    pod_names_.release();  // pass 1's
    std::vector<std::pair<std::uint32_t, std::uint32_t>>().swap(pod_places_);

    // Pass 2: devices, numbered across groups/pods/devices in that order
    // (conversion order), grouped by server_id. First each pod's server, and
    // the first device_id repeated on a server; then the devices in order,
    // each checked where pass 2 meets it.
    NameIndex servers(table_.strings);
    std::vector<std::uint32_t> pod_server(records_.size(), kNone);
    std::vector<std::uint32_t> server_devices;  // per server: its devices
    for (std::size_t p = 0; p < records_.size(); ++p) {
      const PodRecord& pod = records_[p];
      if (group_skipped_[pod.group])
        continue;
      auto s = static_cast<std::uint32_t>(table_.servers.size());
      if (std::uint32_t known = servers.insert(pod.server_id, s); known != kNone) {
        s = known;
      } else {
        table_.servers.push_back(RankServer{pod.server_id, 0, 0});
        server_devices.push_back(0);
      }
      pod_server[p] = s;
      server_devices[s] += pod.count;
    }
    servers.release();
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
      if (server_devices[s] + pod.count > limits_.max_local_devices) {
        return fail(instance_path(pod.group, pod.index) + ".server_id", Seen::string_value(table_.text(pod.server_id)),
                    fmt::format("the pods on this server list {} devices, more than the limit of {} per host "
                                "(--max-local-devices raises it)",
                                server_devices[s] + pod.count, limits_.max_local_devices));
      }
      for (std::uint32_t d = 0; d < pod.count; ++d, ++rank) {
        const bool own_here = candidate_ && candidate_->pod == p && candidate_->device == d;
        if (own_here && candidate_->before_repeat)
          return candidate_->error;
        const DeviceRecord& device = device_records_[pod.first + d];
        if (rank == repeat.at) {
          auto [other, other_device] = pod_at(pod_server, repeat.first);
          return fail(t2_device_path(pod.group, pod.index, d) + ".device_id",
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
      return fail("group_list", group_list_, "the table lists no devices");
    for (std::size_t s = 0; s < table_.servers.size(); ++s)
      table_.servers[s].count = server_devices[s];
    table_.format = RankTableFormat::kTemplate2;
    table_.version.clear();
    table_.rank_size = rank;
    return {};
  }

  // Where pass 2 meets the first device_id repeated on a server (its rank,
  // kNone when none is) and that device_id's first place.
  struct Repeat {
    std::uint32_t at = kNone;
    std::uint32_t first = kNone;
  };

  // Pass 2 stops at the first problem it meets, at the latest at candidate_:
  // devices past it need not be (and are not all) recorded.
  [[nodiscard]] Repeat first_repeat(const std::vector<std::uint32_t>& pod_server) const {
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
  [[nodiscard]] std::pair<std::size_t, std::uint32_t> pod_at(const std::vector<std::uint32_t>& pod_server,
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

  std::string_view file_;
  RankTableLimits limits_;
  RankTable table_;

  std::vector<Level> levels_;
  Target next_;  // set by key(): where the value of that key goes

  Seen document_, status_, version_, rank_list_, server_list_, group_list_, server_count_, group_count_;
  std::size_t server_list_count_ = 0;
  std::size_t group_list_count_ = 0;
  DeviceUnit device_;

  // Template 1.
  ServerUnit server_;
  IdMap device_ids_;  // the server's device_ids, to where they were first seen
  NameIndex server_names_;
  std::vector<std::uint64_t> ranks_;  // per device of table_.devices: its rank_id
  std::vector<bool> rank_is_string_;  // ... and whether the table wrote it as a string
  std::optional<Error> t1_error_;

  // Template 2.
  GroupUnit group_;
  InstanceUnit instance_;
  NameIndex pod_names_;                                              // to their pod_places_
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pod_places_;  // (group, listed index), in listed order
  std::vector<PodRecord> records_;
  std::vector<DeviceRecord> device_records_;
  std::vector<bool> group_skipped_;
  std::optional<OwnProblem> candidate_;  // the OwnProblem pass 2 meets first
  std::optional<Error> t2_error_;
};

void append_quoted(std::string& out, std::string_view key, std::string_view value) {
  append_json_string(out, key);
  out += ':';
  append_json_string(out, value);
}

}  // namespace

std::string_view format_name(RankTableFormat format) noexcept {
  return format == RankTableFormat::kTemplate1 ? "template1" : "template2";
}

Result<ParsedRankTable> parse_rank_table(std::string_view text, std::string_view file, const RankTableLimits& limits) {
  const JsonLimits json_limits{limits.max_bytes, limits.max_depth};
  try {
    // The status first: a table that is still being written is not read on.
    if (text.size() <= limits.max_bytes) {
      if (auto status = peek_top_level_string(text, "status", limits.max_depth); status && *status != "completed")
        return ParsedRankTable{std::move(*status), std::nullopt};
    }
    TableReader reader(file, limits);
    auto read = parse_json_stream(text, file, json_limits, reader);
    if (!read)
      return read.error();
    return reader.finish();
  } catch (const std::exception& e) {  // allocation failure: nothing else throws here
    return Error{fmt::format("{}: cannot read the rank table: {}", one_line(file), one_line(e.what()))};
  }
}

Result<HostEntry> select_host(const RankTable& table, const HostIdentity& identity, std::string_view file) {
  auto listing = [](std::size_t size, auto name_of) {
    std::string out;
    for (std::size_t i = 0; i < size; ++i) {
      if (i == 4) {
        out += fmt::format(", ... ({} in all)", size);
        break;
      }
      if (i > 0)
        out += ", ";
      out += quote_for_message(name_of(i), 64);
    }
    return out;
  };

  if (table.format == RankTableFormat::kTemplate1) {
    std::size_t chosen = 0;
    if (table.servers.size() > 1) {
      if (identity.host_ip.empty()) {
        return Error{
            fmt::format("{}: server_list lists {} servers and MA_CURRENT_HOST_IP is not set: nothing says "
                        "which one is this host",
                        one_line(file), table.servers.size())};
      }
      chosen = table.servers.size();
      for (std::size_t s = 0; s < table.servers.size() && chosen == table.servers.size(); ++s) {
        if (table.server_id(s) == identity.host_ip)
          chosen = s;
      }
      if (chosen == table.servers.size()) {
        return Error{
            fmt::format("{}: server_list[].server_id = {}: no such server for this host (MA_CURRENT_HOST_IP); "
                        "the table lists {}",
                        one_line(file), quote_for_message(identity.host_ip),
                        listing(table.servers.size(), [&](std::size_t s) { return table.server_id(s); }))};
      }
    }
    return HostEntry{std::string(table.server_id(chosen)), "", chosen, 0, table.servers[chosen].count};
  }

  std::size_t chosen = 0;
  if (table.pods.size() > 1) {
    if (identity.instance_name.empty()) {
      return Error{
          fmt::format("{}: group_list lists {} pods and MA_CURRENT_INSTANCE_NAME is not set: nothing says "
                      "which one is this host",
                      one_line(file), table.pods.size())};
    }
    chosen = table.pods.size();
    for (std::size_t p = 0; p < table.pods.size() && chosen == table.pods.size(); ++p) {
      if (table.pod_name(p) == identity.instance_name)
        chosen = p;
    }
    if (chosen == table.pods.size()) {
      return Error{
          fmt::format("{}: group_list[].instance_list[].pod_name = {}: no such pod for this host "
                      "(MA_CURRENT_INSTANCE_NAME); the table lists {}",
                      one_line(file), quote_for_message(identity.instance_name),
                      listing(table.pods.size(), [&](std::size_t p) { return table.pod_name(p); }))};
    }
  }
  const RankPod& pod = table.pods[chosen];
  if (pod.count == 0) {
    return Error{
        fmt::format("{}: group_list[].instance_list[].pod_name = {}: this host's pod has no devices (its "
                    "group's device_count is 0)",
                    one_line(file), quote_for_message(table.pod_name(chosen)))};
  }
  return HostEntry{std::string(table.text(pod.server_id)), std::string(table.pod_name(chosen)), pod.server, pod.first,
                   pod.count};
}

std::string to_template1_json(const RankTable& table) {
  std::string out;
  out.reserve(96 + table.rank_size * 72);
  out += "{\"status\":\"completed\",\"version\":\"1.0\",";
  append_quoted(out, "server_count", std::to_string(table.servers.size()));
  out += ",\"server_list\":[";
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    if (i > 0)
      out += ',';
    out += '{';
    append_quoted(out, "server_id", table.server_id(i));
    out += ",\"device\":[";
    bool first = true;
    for (const RankDevice& device : table.devices_of(i)) {
      if (!first)
        out += ',';
      first = false;
      out += '{';
      append_quoted(out, "device_id", std::to_string(device.device_id));
      if (auto ip = table.device_ip(device)) {
        out += ',';
        append_quoted(out, "device_ip", *ip);
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

}  // namespace trainit
