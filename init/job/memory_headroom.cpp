#include "job/memory_headroom.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>

#include "base/number.h"
#include "os/fs.h"

namespace trainit {
namespace {

// "Name:   123 kB" lines (meminfo) or "name 123" lines (memory.stat): the
// number after `name`, times `unit`.
std::optional<std::uint64_t> field(std::string_view text, std::string_view name, std::uint64_t unit) {
  while (!text.empty()) {
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (!line.starts_with(name) || line.size() == name.size() ||
        (line[name.size()] != ':' && line[name.size()] != ' ')) {
      continue;
    }
    line.remove_prefix(name.size() + 1);
    const auto begin = line.find_first_not_of(' ');
    if (begin == std::string_view::npos) {
      return std::nullopt;
    }
    line.remove_prefix(begin);
    const auto value = parse_decimal(line.substr(0, line.find(' ')));
    if (!value || *value > UINT64_MAX / unit) {
      return std::nullopt;
    }
    return *value * unit;
  }
  return std::nullopt;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string read(const std::string& path) {
  auto text = RealFileSystem().read_file(path, 1 << 16);
  return text ? *text : std::string();
}

}  // namespace

std::optional<MemoryHeadroom> memory_headroom(std::string_view meminfo, const std::optional<CgroupMemory>& cgroup) {
  std::optional<MemoryHeadroom> out;
  const auto available = field(meminfo, "MemAvailable", 1024);
  if (available) {
    out =
        MemoryHeadroom{*available + field(meminfo, "SwapFree", 1024).value_or(0), "the host's MemAvailable + SwapFree"};
  }
  if (cgroup) {
    const std::uint64_t held = cgroup->usage - std::min(cgroup->usage, cgroup->inactive_file);
    const std::uint64_t left = cgroup->limit - std::min(cgroup->limit, held);
    if (!out || left < out->bytes) {
      out = MemoryHeadroom{
          left, fmt::format("the memory cgroup's limit of {:.1f} MiB less the {:.1f} MiB it holds",
                            static_cast<double>(cgroup->limit) / (1 << 20), static_cast<double>(held) / (1 << 20))};
    }
  }
  return out;
}

std::optional<CgroupMemory> cgroup_memory(std::string_view limit, std::string_view usage, std::string_view stat,
                                          bool v1) {
  const auto max = parse_decimal(trimmed(limit));
  const auto used = parse_decimal(trimmed(usage));
  if (!max || !used || (v1 && *max >= (std::uint64_t{1} << 62))) {
    return std::nullopt;  // "max", unlimited, or unreadable
  }
  const auto inactive = field(stat, v1 ? "total_inactive_file" : "inactive_file", 1);
  return CgroupMemory{*max, *used, inactive.value_or(0)};
}

std::optional<MemoryHeadroom> memory_headroom_now() {
  // /proc/self/cgroup: "0::/path" (v2), "N:...memory...:/path" (v1). Inside
  // a cgroup namespace, or where the container's own cgroup is mounted at
  // the top, the files are at the top of the mount.
  std::optional<CgroupMemory> cgroup;
  const std::string self = read("/proc/self/cgroup");
  std::string_view rest = self;
  while (!rest.empty() && !cgroup) {
    const auto eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
    const auto first = line.find(':');
    const auto second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) {
      continue;
    }
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    const bool v2 = controllers.empty();
    const bool v1 = controllers == "memory" || controllers.starts_with("memory,") ||
                    controllers.find(",memory") != std::string_view::npos;
    if (!v1 && !v2) {
      continue;
    }
    const std::string mount = v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup";
    for (const std::string& dir : {mount + path, mount}) {
      cgroup = v1 ? cgroup_memory(read(dir + "/memory.limit_in_bytes"), read(dir + "/memory.usage_in_bytes"),
                                  read(dir + "/memory.stat"), true)
                  : cgroup_memory(read(dir + "/memory.max"), read(dir + "/memory.current"), read(dir + "/memory.stat"),
                                  false);
      if (cgroup) {
        break;
      }
    }
  }
  return memory_headroom(read("/proc/meminfo"), cgroup);
}

}  // namespace trainit
