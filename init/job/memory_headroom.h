// How much shared memory the job's arena can commit before the kernel's OOM
// killer would step in: committing more than that does not fail, it kills
// (a process of the job, PID 1, or one of the host's, as chance has it).
// The host's part: MemAvailable + SwapFree (/proc/meminfo). A memory
// cgroup's (v2 memory.max, v1 memory.limit_in_bytes): its limit less what it
// uses but could not reclaim (usage less the inactive page cache).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trainit {

struct MemoryHeadroom {
  std::uint64_t bytes = 0;
  std::string what;  // whose: "the host's MemAvailable + SwapFree", "the memory cgroup's limit ..."
};

// What the cgroup's files say, where a limit is set.
struct CgroupMemory {
  std::uint64_t limit = 0;
  std::uint64_t usage = 0;
  std::uint64_t inactive_file = 0;
};

// From the texts (nullopt where /proc/meminfo is unreadable or lacks the
// fields, and no cgroup limit is known): the smaller of the two.
[[nodiscard]] std::optional<MemoryHeadroom> memory_headroom(std::string_view meminfo,
                                                            const std::optional<CgroupMemory>& cgroup);

// The cgroup's limit from its files' texts: v2 (memory.max "max" or bytes,
// memory.current, memory.stat's inactive_file) or v1 (memory.limit_in_bytes,
// memory.usage_in_bytes, memory.stat's total_inactive_file); nullopt when
// unlimited (v1: a limit of 2^62 or more) or unreadable.
[[nodiscard]] std::optional<CgroupMemory> cgroup_memory(std::string_view limit, std::string_view usage,
                                                        std::string_view stat, bool v1);

// This process's, now: /proc/meminfo, /proc/self/cgroup and the cgroup's
// files under /sys/fs/cgroup (read only: kernel files).
[[nodiscard]] std::optional<MemoryHeadroom> memory_headroom_now();

}  // namespace trainit
