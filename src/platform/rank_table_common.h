// What the rank table readers share: the top level's (rank_table.cpp) and
// each template's (rank_table_template1.cpp, rank_table_template2.cpp).
//
//   - Seen: a value kept until a check looks at it;
//   - rank table numbers (to_number) and how a kept one prints (kept_number);
//   - TableChecks: the checks both templates make, and every message's form;
//   - ShapeReader: a stream reader that knows each value by where it is, keeps
//     the values the checks look at, and tells when a list's element ends.
//
// Internal to the rank table readers.
#pragma once

#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "os/json.h"
#include "platform/rank_table.h"

namespace trainit::rank_table_internal {

inline constexpr std::string_view kKnownFormats =
    "trainit reads template 1 (version 1.x, server_list) and template 2 (group_list with pod_name)";

// No place (no device, pod, rank, ...) where a place is kept as a number.
inline constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

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

  // The value as a message shows it (json_for_message).
  [[nodiscard]] std::string message() const;

  static Seen string_value(std::string_view s);
  static Seen empty_array();
};

// `value` as a rank table number: a JSON integer >= 0 or a strict decimal
// string. Otherwise false, with what is wrong in `problem`.
bool to_number(const Seen& value, std::uint64_t* out, std::string* problem);

// A number that passed to_number(), for a later message: how the table wrote
// it prints back from its value and whether it was a string.
Seen kept_number(std::uint64_t value, bool written_as_string);

// Appends `s` to a table's strings; returns where it is.
inline TableText append_text(std::string& strings, std::string_view s) {
  TableText t{static_cast<std::uint32_t>(strings.size()), static_cast<std::uint32_t>(s.size())};
  strings.append(s);
  return t;
}

// The checks both templates make (names, lists, optional strings, device
// ids, counts), and the form of every message:
//
//   <file>: <key path> = <offending value>: <what is wrong>
//
// Paths are made only for a message: where a check takes `path`, it is a
// function that makes one.
class TableChecks {
 public:
  TableChecks(std::string_view file, const RankTableLimits& limits) : file_(file), limits_(limits) {}

  [[nodiscard]] const RankTableLimits& limits() const { return limits_; }

  [[nodiscard]] Error fail(std::string_view path, const Seen& value, std::string_view problem) const;
  [[nodiscard]] Error fail_file(std::string_view problem) const;

  // A declared count (e.g. "server_count") must equal what is listed.
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

  // A name (server_id, pod_name): a non-empty string.
  template <typename Path>
  [[nodiscard]] std::optional<Error> name(const Seen& value, const Path& path) const {
    if (!value.is_string())
      return fail(path(), value, "not a string");
    if (value.text.empty())
      return fail(path(), value, "empty");
    return std::nullopt;
  }

  // The list under `key` of the object `self` at `path` (a server's
  // "device", a pod's "devices", a group's "instance_list"): present and an
  // array.
  template <typename Path>
  [[nodiscard]] std::optional<Error> list(const Seen& self, const Seen& value, const Path& path,
                                          std::string_view key) const {
    if (!value.present())
      return fail(path(), self, fmt::format("missing key \"{}\"", key));
    if (value.kind != Seen::Kind::kArray)
      return fail(fmt::format("{}.{}", path(), key), value, "not an array");
    return std::nullopt;
  }

  // A key that may be left out but is a string where given (device_ip,
  // group_name), of the object at `path`.
  template <typename Path>
  [[nodiscard]] std::optional<Error> optional_string(const Seen& value, const Path& path, std::string_view key) const {
    if (value.present() && !value.is_string())
      return fail(fmt::format("{}.{}", path(), key), value, "not a string");
    return std::nullopt;
  }

  // The devices of one host (a server's, a pod's) within the limit.
  template <typename Path>
  [[nodiscard]] std::optional<Error> devices_fit(const Seen& devices, const Path& path, std::size_t count) const {
    if (count > limits_.max_local_devices) {
      return fail(path(), devices,
                  fmt::format("{} devices on one host, more than the limit of {} (--max-local-devices raises it)",
                              count, limits_.max_local_devices));
    }
    return std::nullopt;
  }

  // A device's device_id (`value`, of the object `device` at `path`):
  // present, a number, below the limit.
  template <typename Path>
  [[nodiscard]] std::optional<Error> device_id(const Seen& device, const Seen& value, const Path& path,
                                               std::uint64_t* id) const {
    if (!value.present())
      return fail(path(), device, "missing key \"device_id\"");
    std::string problem;
    if (!to_number(value, id, &problem))
      return fail(path() + ".device_id", value, problem);
    if (*id >= limits_.max_local_devices) {
      return fail(
          path() + ".device_id", value,
          fmt::format("out of range 0..{} (--max-local-devices raises the limit)", limits_.max_local_devices - 1));
    }
    return std::nullopt;
  }

 private:
  std::string_view file_;
  RankTableLimits limits_;
};

// A JSON stream reader that knows each container by where it is: its Role
// (Role{}, the first enumerator, for one nothing is checked inside: what is in
// it is skipped at the cost of a comparison). The derived reader says what the
// document, the value of a key and an element of a list are (a Target); this
// keeps each value that has a slot until a check looks at it, counts each
// list, and tells when an element of a list ends, whatever its kind, so that
// its checks run while the stream goes.
template <typename Role>
class ShapeReader : public JsonStreamReader {
 public:
  bool scalar(const JsonScalar& value) final {
    const Target t = next_target();
    if (t.slot != nullptr)
      t.slot->set(value);
    if (t.element != Role{})
      end_element(t.element, false);
    return true;
  }

  bool open(bool object) final {
    const Target t = next_target();
    levels_.push_back(Level{object ? t.object_role : t.array_role, t.element, object, t.slot, 0});
    return true;
  }

  bool key(std::string_view key) final {
    const Role object = levels_.back().role;
    next_ = object == Role{} ? Target{} : member(object, key);
    return true;
  }

  bool close(std::string_view form) final {
    const Level level = levels_.back();
    levels_.pop_back();
    if (level.slot != nullptr)
      level.slot->set_container(level.object, form);
    if (!level.object && level.role != Role{})
      list_closed(level.role, level.count);
    if (level.element != Role{})
      end_element(level.element, level.object);
    return true;
  }

 protected:
  // Where the value that starts now goes, and what it is.
  struct Target {
    Seen* slot = nullptr;  // kept here, if anywhere
    Role object_role{};    // its role if it is an object
    Role array_role{};     // ... if it is an array
    Role element{};        // the list element it is, whatever its kind; Role{}: none
  };

  ShapeReader() = default;

  // The document.
  virtual Target root() = 0;
  // The value of `key` in an object of role `object`.
  virtual Target member(Role object, std::string_view key) = 0;
  // The element `index` of a list of role `list`.
  virtual Target element(Role /*list*/, std::size_t /*index*/) { return Target{}; }
  // A list of role `list` ends, with `count` elements.
  virtual void list_closed(Role /*list*/, std::size_t /*count*/) {}
  // An element ends: `object` says whether it was one.
  virtual void end_element(Role /*element*/, bool /*object*/) {}

 private:
  struct Level {
    Role role;
    Role element;  // the element it is, if any
    bool object;
    Seen* slot;         // where the container goes when it closes, if anywhere
    std::size_t count;  // values started in it (arrays: the next one's index)
  };

  Target next_target() {
    if (levels_.empty())
      return root();
    Level& parent = levels_.back();
    const std::size_t index = parent.count++;
    if (parent.object) {
      const Target t = next_;
      next_ = Target{};
      return t;
    }
    return parent.role == Role{} ? Target{} : element(parent.role, index);
  }

  std::vector<Level> levels_;
  Target next_;  // set by key(): where the value of that key goes
};

}  // namespace trainit::rank_table_internal
