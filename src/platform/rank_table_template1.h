// Template 1's reader: told the value of the table's "server_list" (the rest
// of the table goes to the top level's reader, rank_table.cpp), it checks each
// server when it ends, whole: its server_id, its device list, then its
// devices in listed order; finish() then checks the list itself, the declared
// server_count, and the rank_ids over the whole table. Only the first problem
// found is kept: a later one can never be the one reported.
//
// Internal to the rank table readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "platform/rank_table.h"
#include "platform/rank_table_common.h"
#include "platform/rank_table_index.h"

namespace trainit::rank_table_internal {

// What a container of template 1 is, by where it is.
enum class Template1Role : std::uint8_t {
  kOther,       // nothing checked inside
  kServerList,  // "server_list"
  kServer,      // one of its servers
  kDeviceList,  // a server's "device"
  kDevice,      // one of its devices
};

class Template1Reader final : public ShapeReader<Template1Role> {
 public:
  explicit Template1Reader(const TableChecks& checks) : checks_(checks), server_names_(NameKeys(&table_.strings)) {}

  // Whether the table has a "server_list".
  [[nodiscard]] bool present() const { return list_.present(); }

  // The checks left once the whole table has been read, in order: the list,
  // `server_count` (the top level's), each server's, the rank_ids. `version`
  // is the table's ("" when absent).
  [[nodiscard]] Result<RankTable> finish(const Seen& server_count, std::string_view version);

 private:
  using Role = Template1Role;

  // The element being read, of each kind: reset() for the next one, keeping
  // the buffers.
  struct ServerUnit {
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
  struct DeviceUnit {
    std::size_t index = 0;
    Seen self, id, rank, ip;
    void reset() {
      for (Seen* v : {&self, &id, &rank, &ip})
        v->reset();
    }
  };

  Target root() override;
  Target member(Role object, std::string_view key) override;
  Target element(Role list, std::size_t index) override;
  void list_closed(Role list, std::size_t count) override;
  void end_element(Role element, bool object) override;

  void end_device(bool object);
  void end_server(bool object);
  [[nodiscard]] std::optional<Error> check_rank_ids();

  TableChecks checks_;
  RankTable table_;

  Seen list_;  // "server_list"
  std::size_t list_count_ = 0;
  ServerUnit server_;
  DeviceUnit device_;
  DeviceIdIndex device_ids_;          // the server's device_ids, to where they were first seen
  NameIndex server_names_;            // server_ids, to where they were first seen
  std::vector<std::uint64_t> ranks_;  // per device of table_.devices: its rank_id
  std::vector<bool> rank_is_string_;  // ... and whether the table wrote it as a string
  std::optional<Error> error_;        // the first problem of a server
};

}  // namespace trainit::rank_table_internal
