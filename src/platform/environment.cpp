#include "platform/environment.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>

#include "base/number.h"
#include "os/path.h"
#include "os/text.h"
#include "platform/geometry.h"

namespace trainit {
namespace {

constexpr std::string_view kRankTableFileName = "jobstart_hccl.json";
constexpr std::string_view kDefaultRankTable = "/user/config/jobstart_hccl.json";

Error bad_value(std::string_view name, std::string_view value, std::string_view problem) {
  return Error{fmt::format("{}={}: {}", name, quote_for_message(value), problem)};
}

Result<std::string> absolute_path(std::string_view name, std::string_view value) {
  if (!is_absolute_path(value))
    return bad_value(name, value, "not an absolute path");
  return normalize_path(value);
}

}  // namespace

Environment::Environment(std::vector<EnvVar> vars) {
  vars_.reserve(vars.size());
  for (EnvVar& var : vars) {
    if (var.name.empty() || index_.count(var.name) != 0)
      continue;
    index_.emplace(var.name, vars_.size());
    vars_.push_back(std::move(var));
  }
}

Environment Environment::from_envp(const char* const* envp) {
  std::vector<EnvVar> vars;
  for (; envp != nullptr && *envp != nullptr; ++envp) {
    std::string_view entry = *envp;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos)
      continue;
    vars.push_back({std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1))});
  }
  return Environment(std::move(vars));
}

Environment Environment::from_strings(std::span<const std::string> entries) {
  std::vector<const char*> ptrs;
  ptrs.reserve(entries.size() + 1);
  for (const std::string& e : entries)
    ptrs.push_back(e.c_str());
  ptrs.push_back(nullptr);
  return from_envp(ptrs.data());
}

std::optional<std::string_view> Environment::get(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end() || vars_[it->second].value.empty())
    return std::nullopt;
  return std::string_view(vars_[it->second].value);
}

Result<std::optional<unsigned>> Environment::number(std::string_view name, std::uint64_t min, std::uint64_t max) const {
  auto text = get(name);
  if (!text)
    return std::optional<unsigned>();
  auto value = parse_decimal(*text);
  if (!value)
    return bad_value(name, *text, "not a decimal number (digits only: no sign, space or fraction)");
  if (*value < min || *value > max)
    return bad_value(name, *text, fmt::format("out of range {}..{}", min, max));
  return std::optional<unsigned>(static_cast<unsigned>(*value));
}

Result<std::optional<unsigned>> Environment::num_hosts() const {
  return number("MA_NUM_HOSTS", 1, kMaxHosts);
}

Result<std::optional<unsigned>> Environment::num_gpus() const {
  return number("MA_NUM_GPUS", 0, 1024);
}

Result<std::optional<unsigned>> Environment::task_index() const {
  for (std::string_view name : {"MA_TASK_INDEX", "VC_TASK_INDEX", "VK_TASK_INDEX"}) {
    if (get(name))
      return number(name, 0, 999'999);
  }
  return std::optional<unsigned>();
}

Result<std::string> Environment::vj_name() const {
  auto name = get("MA_VJ_NAME");
  if (!name)
    return Error{"MA_VJ_NAME is not set: the platform names the job with it"};
  if (!is_safe_name(*name)) {
    return bad_value("MA_VJ_NAME", *name,
                     "not a safe name (1-200 of A-Z a-z 0-9 . _ -, starting with a letter or digit)");
  }
  return std::string(*name);
}

Result<std::string> Environment::job_id() const {
  auto name = vj_name();
  if (!name)
    return name.error();
  std::string id = std::move(*name);
  if (auto at = id.find("ma-job"); at != std::string::npos)
    id.replace(at, 6, "modelarts-job");
  if (!is_safe_name(id))
    return bad_value("MA_VJ_NAME", *get("MA_VJ_NAME"), "gives a JOB_ID longer than 200 bytes");
  return id;
}

std::optional<std::string_view> Environment::task_name() const {
  return get("MA_TASK_NAME");
}

std::optional<std::string_view> Environment::current_instance_name() const {
  return get("MA_CURRENT_INSTANCE_NAME");
}

std::optional<std::string_view> Environment::current_host_ip() const {
  return get("MA_CURRENT_HOST_IP");
}

Result<std::optional<std::string>> Environment::mount_path() const {
  auto value = get("MA_MOUNT_PATH");
  if (!value)
    return std::optional<std::string>();
  auto path = absolute_path("MA_MOUNT_PATH", *value);
  if (!path)
    return path.error();
  return std::optional<std::string>(std::move(*path));
}

bool Environment::has_rank_table_variable() const {
  return get("RANK_TABLE_FILE_V_1_0").has_value() || get("RANK_TABLE_FILE").has_value();
}

Result<RankTableLocation> Environment::rank_table_location(const FileSystem& fs) const {
  if (auto v1 = get("RANK_TABLE_FILE_V_1_0")) {
    auto path = absolute_path("RANK_TABLE_FILE_V_1_0", *v1);
    if (!path)
      return path.error();
    return RankTableLocation{std::move(*path), "RANK_TABLE_FILE_V_1_0"};
  }
  auto value = get("RANK_TABLE_FILE");
  if (!value)
    return RankTableLocation{std::string(kDefaultRankTable), ""};
  auto path = absolute_path("RANK_TABLE_FILE", *value);
  if (!path)
    return path.error();
  PathKind kind = fs.kind(*path);
  bool names_file = kind == PathKind::kOther || (kind == PathKind::kMissing && path->ends_with(".json"));
  if (!names_file)
    *path = join_path(*path, kRankTableFileName);
  return RankTableLocation{std::move(*path), "RANK_TABLE_FILE"};
}

Result<RunMethod> Environment::run_method() const {
  auto value = get("MA_RUN_METHOD");
  if (!value)
    return RunMethod::kRankTable;
  if (*value == "torchrun")
    return RunMethod::kTorchrun;
  if (*value == "msrun")
    return RunMethod::kMsrun;
  return bad_value("MA_RUN_METHOD", *value, "unknown launch method (the platform knows torchrun and msrun)");
}

std::optional<std::string_view> Environment::extra_torchrun_params() const {
  return get("MA_EXTRA_TORCHRUN_PARAMS");
}

Result<std::uint16_t> Environment::torchrun_master_port() const {
  auto port = number("MA_TORCHRUN_MASTER_PORT", 1, 65535);
  if (!port)
    return port.error();
  return static_cast<std::uint16_t>(port->value_or(18888));
}

Result<unsigned> Environment::msrun_cluster_timeout() const {
  auto seconds = number("MSRUN_CLUSTER_TIME_OUT", 1, std::uint64_t{7} * 24 * 3600);  // up to a week
  if (!seconds)
    return seconds.error();
  return seconds->value_or(600);
}

bool Environment::ms_ranktable_enable() const {
  return get("MS_RANKTABLE_ENABLE") == "True";
}

namespace {

// A host of a host:port list: a DNS name (letters, digits, '-', '_', dots
// between labels) or an IPv4 address, or an IPv6 address in brackets.
bool is_list_host(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    std::string_view v6 = host.substr(1, host.size() - 2);
    return v6.find(':') != std::string_view::npos && std::all_of(v6.begin(), v6.end(), [](char c) {
             return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == ':' || c == '.';
           });
  }
  return is_dns_name(host) && std::all_of(host.begin(), host.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
         });
}

}  // namespace

Result<std::vector<std::string>> Environment::host_ports(std::string_view name) const {
  std::vector<std::string> out;
  auto value = get(name);
  if (!value)
    return out;
  std::string_view rest = *value;
  // The platform's documents write the list in brackets: [a:5001,b:5002].
  if (rest.size() > 2 && rest.front() == '[' && rest.back() == ']' && rest.find(']') == rest.size() - 1)
    rest = rest.substr(1, rest.size() - 2);
  for (;;) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    auto colon = item.rfind(':');
    if (colon == std::string_view::npos || !is_list_host(item.substr(0, colon))) {
      return bad_value(name, *value, fmt::format("{} is not host:port", quote_for_message(item)));
    }
    auto port = parse_decimal(item.substr(colon + 1));
    if (!port || *port < 1 || *port > 65535) {
      return bad_value(name, *value, fmt::format("{} has no port in 1..65535", quote_for_message(item)));
    }
    out.emplace_back(item);
    if (comma == std::string_view::npos)
      break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

Result<std::vector<std::string>> Environment::tf_ps_hosts() const {
  return host_ports("TF_PS_HOSTS");
}

Result<std::vector<std::string>> Environment::tf_worker_hosts() const {
  return host_ports("TF_WORKER_HOSTS");
}

Result<std::string> Environment::peer_name(unsigned index) const {
  auto vj = vj_name();
  if (!vj)
    return vj.error();
  auto task = task_name();
  if (task && !is_safe_name(*task))
    return bad_value("MA_TASK_NAME", *task, "not a safe name");
  return peer_dns_name(*vj, task.value_or(kDefaultTaskName), index);
}

Result<std::optional<std::string>> Environment::home() const {
  auto value = get("HOME");
  if (!value)
    return std::optional<std::string>();
  auto path = absolute_path("HOME", *value);
  if (!path)
    return path.error();
  return std::optional<std::string>(std::move(*path));
}

Result<std::uint16_t> Environment::sshd_port() const {
  auto port = number("MY_SSHD_PORT", 1, 65535);
  if (!port)
    return port.error();
  return static_cast<std::uint16_t>(port->value_or(kDefaultSshdPort));
}

Result<std::optional<unsigned>> Environment::mpi_slots() const {
  return number("MY_MPI_SLOTS", 1, 1024);
}

Result<std::string> Environment::mpi_interfaces() const {
  auto value = get("MY_MPI_BTL_TCP_IF");
  if (!value)
    return std::string(kDefaultMpiInterfaces);
  constexpr std::size_t kMaxBytes = 256;
  auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("._-:,^=").find(c) != std::string_view::npos;
  };
  if (value->size() > kMaxBytes || !std::all_of(value->begin(), value->end(), allowed)) {
    return bad_value("MY_MPI_BTL_TCP_IF", *value, "not a list of interface names (1-256 of A-Z a-z 0-9 . _ - : , ^ =)");
  }
  return std::string(*value);
}

}  // namespace trainit
