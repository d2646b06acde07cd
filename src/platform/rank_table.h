// Rank tables: parse, validate, pick this host, convert template 2 to 1.
//
// The platform describes a job's devices in a JSON "rank table"
// (docs/contract.md §2). Two formats are read, told apart by content only:
//
//   template 1  {"status", "version": "1.x", "server_count"?, "server_list":
//               [{"server_id", "device": [{"device_id", "device_ip"?,
//               "rank_id"}]}]}; newer 1.x fields (super_pod_list, host_ip,
//               device_port, ...) are kept in the file and ignored here.
//   template 2  {"status", "group_count"?, "group_list": [{"group_name"?,
//               "device_count"?, "instance_count"?, "instance_list":
//               [{"pod_name", "server_id", "devices": [{"device_id",
//               "device_ip"?}]}]}]}
//
// Any other shape (a "version" 2.x or "rank_list" table, old group_list
// tables whose instances have no pod_name, neither or both lists) is refused
// with a message naming the format.
//
// Numbers are JSON integers or strict decimal strings (see parse_decimal in base/number.h).
// A table whose top-level "status" is not "completed" is not validated
// further: it is still being written (ParsedRankTable::table is empty). That
// status is looked at first, without building or checking the rest of the
// table (see peek_top_level_string), so a large table that is still being
// written costs little, and may even be torn after its status; a status
// given twice is refused as any repeated key is. A completed table is
// validated whole before anything may start: rank_ids exactly 0..N-1,
// device_ids unique per server and below max_local_devices, server_ids and
// pod_names unique, no server without devices, declared counts equal to what
// is listed, at least one device. Every error is one line:
//
//   <file>: <key path> = <offending value>: <what is wrong>
//
// e.g. `/x/jobstart_hccl.json: server_list[1].device[3].rank_id = "3":
// repeated rank_id (also at server_list[0].device[1].rank_id)`.
//
// Memory: the table is read as a stream (parse_json_stream), never held as a
// document; what parsing keeps is proportional to the table (its devices,
// names and addresses, a few dozen bytes each), whatever max_local_devices is.
//
// Strings from a table (server_id, pod_name, device_ip) are only compared and
// copied into the converted table; callers must never use them as paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace trainit {

enum class RankTableFormat { kTemplate1, kTemplate2 };

[[nodiscard]] std::string_view format_name(RankTableFormat format) noexcept;  // "template1", "template2"

struct RankTableLimits {
  unsigned max_local_devices = 16;                // device_id < this; devices per server <= this
  std::size_t max_bytes = std::size_t{16} << 20;  // 16 MiB
  unsigned max_depth = 64;                        // JSON nesting
};

// A string of the table (server_id, pod_name, device_ip): where it is in
// RankTable::strings.
struct TableText {
  std::uint32_t offset = 0;
  std::uint32_t size = 0;
};

struct RankDevice {
  unsigned device_id = 0;  // the table's (physical) id, < max_local_devices
  unsigned rank_id = 0;    // 0..rank_size-1
  bool has_ip = false;     // the table gives a device_ip: RankTable::device_ip()
  TableText ip;
};

// One server of the (template-1 view of the) table. Its devices are
// RankTable::devices[first, first + count), in rank-table order: listed order
// for template 1, conversion order for template 2.
struct RankServer {
  TableText server_id;
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};

// A template-2 instance (pod), in conversion order. Its devices are
// devices_of(server)[first, first + count); count is 0 (and server
// meaningless) for a pod of a group whose device_count is 0.
struct RankPod {
  TableText pod_name;
  TableText server_id;
  std::uint32_t server = 0;
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};

struct RankTable {
  RankTableFormat format = RankTableFormat::kTemplate1;
  std::string version;              // template 1's "version" ("" when absent and for template 2)
  std::vector<RankServer> servers;  // by first appearance
  std::vector<RankDevice> devices;  // every device, server after server
  std::vector<RankPod> pods;        // template 2 only
  unsigned rank_size = 0;           // devices listed in the whole table
  std::string strings;              // every server_id, pod_name and device_ip, back to back

  [[nodiscard]] std::string_view text(TableText t) const { return std::string_view(strings).substr(t.offset, t.size); }
  [[nodiscard]] std::string_view server_id(std::size_t server) const { return text(servers[server].server_id); }
  [[nodiscard]] std::span<const RankDevice> devices_of(std::size_t server) const {
    return std::span<const RankDevice>(devices).subspan(servers[server].first, servers[server].count);
  }
  [[nodiscard]] std::optional<std::string_view> device_ip(const RankDevice& device) const {
    return device.has_ip ? std::optional<std::string_view>(text(device.ip)) : std::nullopt;
  }
  [[nodiscard]] std::string_view pod_name(std::size_t pod) const { return text(pods[pod].pod_name); }
};

struct ParsedRankTable {
  std::string status;              // the table's "status"
  std::optional<RankTable> table;  // set iff status == "completed"
};

// Parses and validates a rank table. `file` only names it in messages. An
// error with errnum EBADMSG (or EFBIG) is parse_json's: the text is not one
// well-formed JSON document within the limits; the others say what is wrong
// with the table (a repeated key among them: see parse_json).
[[nodiscard]] Result<ParsedRankTable> parse_rank_table(std::string_view text, std::string_view file,
                                                       const RankTableLimits& limits = {});

// What identifies this host (docs/contract.md §1). Empty means not given.
struct HostIdentity {
  std::string host_ip;        // MA_CURRENT_HOST_IP (template 1)
  std::string instance_name;  // MA_CURRENT_INSTANCE_NAME (template 2)
};

// This host's devices in the table.
struct HostEntry {
  std::string server_id;
  std::string pod_name;  // template 2 only
  std::size_t server = 0;
  std::size_t first = 0;  // its devices: table.devices_of(server)[first, first + count)
  std::size_t count = 0;
};

// Template 1: the only server, else the one whose server_id equals host_ip.
// Template 2: the only pod, else the one whose pod_name equals instance_name;
// two pods on one server each get only their own devices. Errors (naming
// `file` and what was looked for): several candidates and nothing to choose
// by, no match, or a chosen pod without devices.
[[nodiscard]] Result<HostEntry> select_host(const RankTable& table, const HostIdentity& identity,
                                            std::string_view file);

// The table in template 1 form, as the file the ranks read: compact JSON,
// {"status":"completed","version":"1.0","server_count":"N","server_list":
// [{"server_id","device":[{"device_id","device_ip"?,"rank_id"}]}]}, every
// number a decimal string, ending in a newline.
[[nodiscard]] std::string to_template1_json(const RankTable& table);

}  // namespace trainit
