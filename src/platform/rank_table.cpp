#include "platform/rank_table.h"

#include <fmt/core.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "base/number.h"
#include "os/json.h"
#include "os/text.h"
#include "platform/rank_table_common.h"
#include "platform/rank_table_template1.h"
#include "platform/rank_table_template2.h"

// How a table is read: its top-level "status" first (peek_top_level_string),
// and nothing more of a table that is not complete, but for a second status
// (top_level_key_repeated: one look at the text's structure; the full read
// then refuses the table's first repeated key, as for a complete table);
// then one pass over the text (parse_json_stream), which keeps only what the
// checks need, then the checks in the order the rules are written in
// rank_table.h, so that a table with several faults is refused for the same
// one whatever order its keys come in:
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
// The pass is split by part of the table (TableReader): the top level is read
// here, the value of "server_list" by template 1's reader
// (rank_table_template1.cpp), of "group_list" by template 2's
// (rank_table_template2.cpp). Both template readers check each element of
// their list when it ends (step 4) and keep the first problem found; what
// both templates check, and the form of every message, is written once in
// rank_table_common.h.

namespace trainit {
namespace {

using rank_table_internal::kKnownFormats;
using rank_table_internal::Seen;
using rank_table_internal::ShapeReader;
using rank_table_internal::TableChecks;
using rank_table_internal::Template1Reader;
using rank_table_internal::Template2Reader;

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

enum class TopRole : std::uint8_t {
  kOther,  // nothing checked inside
  kTop,    // the document, when it is an object
};

// The top level of the table: the document and the keys of its own that the
// checks look at. (Its lists go to the template readers: TableReader.)
class TopLevelReader final : public ShapeReader<TopRole> {
 public:
  Seen document, status, version, rank_list, server_count, group_count;

 private:
  Target root() override { return Target{.slot = &document, .object_role = TopRole::kTop}; }

  Target member(TopRole /*object: kTop*/, std::string_view key) override {
    if (key == "status")
      return Target{.slot = &status};
    if (key == "version")
      return Target{.slot = &version};
    if (key == "rank_list")
      return Target{.slot = &rank_list};
    if (key == "server_count")
      return Target{.slot = &server_count};
    if (key == "group_count")
      return Target{.slot = &group_count};
    return Target{};
  }
};

// The reader: told the table by parse_json_stream(), it tells each part of it
// to the reader of that part (the value of the top-level "server_list" to
// template 1's, of "group_list" to template 2's, the rest to the top level's);
// finish() runs what is left of the checks.
class TableReader final : public JsonStreamReader {
 public:
  TableReader(std::string_view file, const RankTableLimits& limits)
      : checks_(file, limits), template1_(checks_), template2_(checks_) {}

  bool scalar(const JsonScalar& value) override {
    const bool go_on = reader().scalar(value);
    if (depth_ == 1)
      list_ = nullptr;  // a list that is a scalar ends here
    return go_on;
  }

  bool open(bool object) override {
    ++depth_;
    return reader().open(object);
  }

  bool key(std::string_view key) override {
    if (depth_ == 1) {  // a key of the document
      list_ = key == "server_list"  ? static_cast<JsonStreamReader*>(&template1_)
              : key == "group_list" ? &template2_
                                    : nullptr;
      if (list_ != nullptr)
        return true;
    }
    return reader().key(key);
  }

  bool close(std::string_view form) override {
    JsonStreamReader& to = reader();
    if (--depth_ == 1)
      list_ = nullptr;  // a list ends here (or nothing was one)
    return to.close(form);
  }

  // The checks left once the whole table has been read.
  Result<ParsedRankTable> finish() {
    const TopLevelReader& top = top_;
    if (top.document.kind != Seen::Kind::kObject)
      return fail("top level", top.document, "not an object: a rank table is a JSON object");
    if (!top.status.present())
      return fail("top level", top.document, "missing key \"status\"");
    if (!top.status.is_string())
      return fail("status", top.status, "not a string");
    ParsedRankTable parsed;
    parsed.status = top.status.text;
    if (parsed.status != "completed")
      return parsed;
    if (top.version.present()) {
      if (!top.version.is_string())
        return fail("version", top.version, "not a string (e.g. \"1.0\")");
      auto major = version_major(top.version.text);
      if (!major)
        return fail("version", top.version, "not a version number like \"1.0\"");
      if (*major != 1)
        return fail("version", top.version, fmt::format("unsupported rank table format version; {}", kKnownFormats));
    }
    if (top.rank_list.present()) {
      return fail("rank_list", top.rank_list,
                  fmt::format("unsupported rank table format (rank_list tables); {}", kKnownFormats));
    }
    if (template1_.present() && template2_.present()) {
      return fail("top level", top.document,
                  "ambiguous rank table format: both server_list (template 1) and group_list (template 2)");
    }
    if (!template1_.present() && !template2_.present()) {
      return fail("top level", top.document,
                  fmt::format("unknown rank table format: neither server_list nor group_list; {}", kKnownFormats));
    }
    const std::string_view version = top.version.present() ? std::string_view(top.version.text) : "";
    Result<RankTable> table =
        template1_.present() ? template1_.finish(top.server_count, version) : template2_.finish(top.group_count);
    if (!table)
      return table.error();
    parsed.table = std::move(*table);
    return parsed;
  }

 private:
  [[nodiscard]] Error fail(std::string_view path, const Seen& value, std::string_view problem) const {
    return checks_.fail(path, value, problem);
  }

  // Who is told what comes now.
  JsonStreamReader& reader() { return list_ != nullptr ? *list_ : top_; }

  TableChecks checks_;
  TopLevelReader top_;
  Template1Reader template1_;
  Template2Reader template2_;
  std::size_t depth_ = 0;             // containers open
  JsonStreamReader* list_ = nullptr;  // the template reader told the list being read, if any
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
    // The status first: a table that is still being written is not read on,
    // but for a second status (refused below, as the first repeated key).
    if (text.size() <= limits.max_bytes) {
      if (auto status = peek_top_level_string(text, "status", limits.max_depth);
          status && *status != "completed" && !top_level_key_repeated(text, "status", limits.max_depth))
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
