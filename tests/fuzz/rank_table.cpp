// Fuzz target: the rank-table reader and validator (src/platform/rank_table*).
//
// The input is a rank table's text. Properties, besides no sanitizer finding:
//   - the reader agrees with the DOM reader it replaced (kept as an oracle in
//     tests/unit/rank_table_dom_reference.cpp): the same refusal word for
//     word, or the same table; except that a table whose top-level status is
//     not "completed", and given once, is pending however broken the rest
//     of it is (the status is read first);
//   - a refusal is one line starting with the file's name, within tight
//     size and depth limits too;
//   - an accepted table selects a host or says why not in one line; each
//     server (template 1) or pod with devices (template 2) is the host its
//     own name selects; the table's template-1 form reads back as the same
//     table.
#include "platform/rank_table.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "os/json.h"
#include "rank_table_dom_reference.h"

namespace trainit {
namespace {

const std::string kFile = "/user/config/jobstart_hccl.json";

// What parse_rank_table made of the text, in dom_reference::read()'s words.
std::string described(const Result<ParsedRankTable>& parsed) {
  if (!parsed.ok())
    return "refused " + parsed.error().message;
  if (!parsed->table)
    return "pending " + parsed->status;
  return "accepted " + parsed->table->version + " " + to_template1_json(*parsed->table);
}

void check_against_dom_reader(std::string_view text, unsigned max_local_devices, const std::string& now) {
  const std::string before = dom_reference::read(text, kFile, max_local_devices);
  if (now == before)
    return;
  // The one difference allowed: read first, a lone status that is not
  // "completed" makes the table pending, where the DOM reader refused
  // something after it.
  const auto status = peek_top_level_string(text, "status");
  const bool pending_by_status = status && *status != "completed" && !top_level_key_repeated(text, "status") &&
                                 now == "pending " + *status && before.starts_with("refused ");
  FUZZ_CHECK(pending_by_status, "streaming: " + now + "\nDOM:       " + before);
}

void check_accepted(const RankTable& table, const RankTableLimits& limits) {
  for (const HostIdentity& who : {HostIdentity{}, HostIdentity{"10.0.0.2", "ma-job-x-worker-1"}}) {
    auto host = select_host(table, who, kFile);
    if (host.ok()) {
      FUZZ_CHECK(host->server < table.servers.size(), "host out of range");
      FUZZ_CHECK(host->first + host->count <= table.devices_of(host->server).size(), "devices out of range");
      FUZZ_CHECK(host->count > 0, "a host without devices was selected");
    } else {
      FUZZ_CHECK(fuzz::one_line(host.error().message), host.error().message);
    }
  }
  // Each server (template 1) and each pod with devices (template 2) is the
  // host chosen by its own name.
  if (table.format == RankTableFormat::kTemplate1) {
    for (size_t s = 0; s < table.servers.size(); ++s) {
      auto host = select_host(table, HostIdentity{std::string(table.server_id(s)), ""}, kFile);
      FUZZ_CHECK(host.ok() && host->server == s && host->count == table.servers[s].count,
                 "server " + std::string(table.server_id(s)) + " is not its own host");
    }
  } else {
    for (size_t p = 0; p < table.pods.size(); ++p) {
      auto host = select_host(table, HostIdentity{"", std::string(table.pod_name(p))}, kFile);
      FUZZ_CHECK(host.ok() == (table.pods[p].count > 0), "pod " + std::string(table.pod_name(p)));
      if (host.ok())
        FUZZ_CHECK(host->server == table.pods[p].server && host->first == table.pods[p].first &&
                       host->count == table.pods[p].count && host->pod_name == table.pod_name(p),
                   "pod " + std::string(table.pod_name(p)) + " is not its own host");
    }
  }
  const std::string converted = to_template1_json(table);
  auto again = parse_rank_table(converted, "/converted.json", limits);
  FUZZ_CHECK(again.ok() && again->table.has_value(), "the conversion does not read back: " + converted);
  FUZZ_CHECK(to_template1_json(*again->table) == converted, converted);
  FUZZ_CHECK(again->table->rank_size == table.rank_size, converted);
}

}  // namespace
}  // namespace trainit

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainit;
  const std::string_view text = fuzz::as_text(data, size);
  for (unsigned max_local_devices : {16u, 3u}) {
    RankTableLimits limits;
    limits.max_local_devices = max_local_devices;
    auto parsed = parse_rank_table(text, kFile, limits);
    if (!parsed.ok()) {
      const std::string& message = parsed.error().message;
      FUZZ_CHECK(message.starts_with(kFile + ": "), message);
      FUZZ_CHECK(fuzz::one_line(message), message);
    } else if (parsed->table) {
      check_accepted(*parsed->table, limits);
    }
    check_against_dom_reader(text, max_local_devices, described(parsed));
  }
  // Tight limits (size and depth): refused in one line, or read as before.
  const RankTableLimits tight{16, size / 2 + 1, 4};
  auto limited = parse_rank_table(text, kFile, tight);
  if (!limited.ok()) {
    FUZZ_CHECK(limited.error().message.starts_with(kFile + ": ") && fuzz::one_line(limited.error().message),
               limited.error().message);
  }
  return 0;
}
