// Template 2's reader: told the value of the table's "group_list" (the rest
// of the table goes to the top level's reader, rank_table.cpp), it reads the
// table in two passes.
//
//   pass 1, while the stream goes: groups in order, each whole when it ends
//     (its own keys, then its instances in listed order, then its
//     device_count), the pods of a group sorted into conversion order (by
//     their names' numeric suffixes);
//   pass 2, in finish(): the devices of every pod in conversion order, grouped
//     by server_id: device_ids unique per server, the devices of a server
//     within the limit, ranks numbered.
//
// Pass 2 cannot run before the whole table is read; for it each device is
// kept as its device_id and device_ip, and of the problems a device has by
// itself (not an object, a bad device_id or device_ip) only the one pass 2
// would meet first (see OwnProblem). Only the first problem found is kept: a
// later one can never be the one reported.
//
// Internal to the rank table readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "platform/rank_table.h"
#include "platform/rank_table_common.h"
#include "platform/rank_table_index.h"

namespace trainit::rank_table_internal {

// What a container of template 2 is, by where it is.
enum class Template2Role : std::uint8_t {
  kOther,          // nothing checked inside
  kGroupList,      // "group_list"
  kGroup,          // one of its groups
  kInstanceList,   // a group's "instance_list"
  kInstance,       // one of its pods
  kPodDeviceList,  // a pod's "devices"
  kPodDevice,      // one of them
};

class Template2Reader final : public ShapeReader<Template2Role> {
 public:
  explicit Template2Reader(const TableChecks& checks) : checks_(checks), pod_names_(NameKeys(&table_.strings)) {}

  // Whether the table has a "group_list".
  [[nodiscard]] bool present() const { return list_.present(); }

  // The checks left once the whole table has been read, in order: the list,
  // `group_count` (the top level's), pass 1's first problem, then pass 2.
  [[nodiscard]] Result<RankTable> finish(const Seen& group_count);

 private:
  using Role = Template2Role;

  // A problem a device has by itself, kept for pass 2: only the first device
  // of a pod that has one matters, and of the pods of one group only the one
  // pass 2 reaches first (the group's first in listed order, or, when the
  // group is sorted, the one with the smallest suffix).
  struct OwnProblem {
    std::uint32_t pod = kNone;  // records_ index
    std::uint32_t device = kNone;
    bool before_repeat = true;  // checked before the device_id repeat check (else after: device_ip)
    Error error;
  };

  // The element being read, of each kind: reset() for the next one, keeping
  // the buffers.
  struct GroupUnit {
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
  struct InstanceUnit {
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
  struct DeviceUnit {
    std::size_t index = 0;
    Seen self, id, ip;
    void reset() {
      for (Seen* v : {&self, &id, &ip})
        v->reset();
    }
  };

  // Pass 1: a pod in conversion order, and its devices.
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

  // Where pass 2 meets the first device_id repeated on a server (its rank,
  // kNone when none is) and that device_id's first place.
  struct Repeat {
    std::uint32_t at = kNone;
    std::uint32_t first = kNone;
  };

  Target root() override;
  Target member(Role object, std::string_view key) override;
  Target element(Role list, std::size_t index) override;
  void list_closed(Role list, std::size_t count) override;
  void end_element(Role element, bool object) override;

  void end_pod_device(bool object);
  void end_instance(bool object);
  void end_group(bool object);

  [[nodiscard]] std::optional<Error> convert();
  [[nodiscard]] std::vector<std::uint32_t> place_pods_on_servers(std::vector<std::uint32_t>* server_devices);
  [[nodiscard]] Repeat first_repeat(const std::vector<std::uint32_t>& pod_server) const;
  [[nodiscard]] std::pair<std::size_t, std::uint32_t> pod_at(const std::vector<std::uint32_t>& pod_server,
                                                             std::uint32_t rank) const;

  TableChecks checks_;
  RankTable table_;

  Seen list_;  // "group_list"
  std::size_t list_count_ = 0;
  GroupUnit group_;
  InstanceUnit instance_;
  DeviceUnit device_;
  NameIndex pod_names_;                                              // to their pod_places_
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pod_places_;  // (group, listed index), in listed order
  std::vector<PodRecord> records_;
  std::vector<DeviceRecord> device_records_;
  std::vector<bool> group_skipped_;
  std::optional<OwnProblem> candidate_;  // the OwnProblem pass 2 meets first
  std::optional<Error> error_;           // pass 1's first problem
};

}  // namespace trainit::rank_table_internal
