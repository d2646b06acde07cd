#include "platform/geometry.h"

#include <fmt/core.h>

#include <algorithm>

#include "os/text.h"

namespace trainit {
namespace {

constexpr std::size_t kMaxDnsName = 253;
constexpr std::size_t kMaxDnsLabel = 63;

constexpr std::string_view kIndexVariables[] = {"MA_TASK_INDEX", "VC_TASK_INDEX", "VK_TASK_INDEX"};

// The variable this host's index comes from, or nullopt when none is set.
std::optional<std::string_view> index_variable(const Environment& env) {
  for (std::string_view name : kIndexVariables) {
    if (env.get(name))
      return name;
  }
  return std::nullopt;
}

}  // namespace

bool is_dns_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxDnsName)
    return false;
  std::size_t start = 0;
  for (;;) {
    std::size_t dot = name.find('.', start);
    std::size_t len = (dot == std::string_view::npos ? name.size() : dot) - start;
    if (len == 0 || len > kMaxDnsLabel)
      return false;
    if (dot == std::string_view::npos)
      return true;
    start = dot + 1;
  }
}

namespace {

Result<unsigned> host_count(const Environment& env, const std::optional<KnownGeometry>& known) {
  auto hosts = env.num_hosts();
  if (!hosts)
    return hosts.error();
  if (!*hosts)
    return known ? known->hosts : 1U;
  unsigned n = **hosts;
  if (known && known->hosts != n)
    return Error{fmt::format("MA_NUM_HOSTS={} disagrees with {}", n, known->source)};
  return n;
}

Result<unsigned> host_index(const Environment& env, unsigned hosts) {
  auto index = env.task_index();
  if (!index)
    return index.error();
  if (*index) {
    std::string_view name = *index_variable(env);
    if (**index >= hosts) {
      return Error{fmt::format("{}={}: not below the host count {} (hosts are numbered 0..{})", name, **index, hosts,
                               hosts - 1)};
    }
    return **index;
  }
  if (hosts == 1)
    return 0U;
  return Error{
      fmt::format("MA_TASK_INDEX, VC_TASK_INDEX and VK_TASK_INDEX are all unset: a job of {} hosts needs this "
                  "host's index",
                  hosts)};
}

}  // namespace

std::string peer_dns_name(std::string_view vj_name, std::string_view task_name, unsigned index) {
  return fmt::format("{}-{}-{}.{}", vj_name, task_name, index, vj_name);
}

Result<Cluster> job_geometry(const Environment& env, const std::optional<KnownGeometry>& known) {
  Cluster geometry;
  geometry.source = "ModelArts";
  auto hosts = host_count(env, known);
  if (!hosts)
    return hosts.error();
  geometry.hosts = *hosts;
  auto index = host_index(env, geometry.hosts);
  if (!index)
    return index.error();
  geometry.index = *index;

  auto vj = env.vj_name();
  if (!vj)
    return vj.error();
  geometry.job_name = std::move(*vj);
  auto task = env.task_name();
  if (task && !is_safe_name(*task)) {
    return Error{
        fmt::format("MA_TASK_NAME={}: not a safe name (1-200 of A-Z a-z 0-9 . _ -, starting with a letter "
                    "or digit)",
                    quote_for_message(*task))};
  }
  geometry.task_name = std::string(task.value_or(kDefaultTaskName));

  auto gpus = env.num_gpus();
  if (!gpus)
    return gpus.error();
  if (*gpus)
    geometry.nproc = std::max(**gpus, 1U);

  // The longest name is the last host's: when it is a DNS name, every one is.
  std::string last = peer_dns_name(geometry.job_name, geometry.task_name, geometry.hosts - 1);
  if (!is_dns_name(last)) {
    return Error{
        fmt::format("MA_VJ_NAME={}, MA_TASK_NAME={}: the peer name {} is not a DNS name (labels of at most "
                    "{} bytes, {} in all)",
                    quote_for_message(geometry.job_name), quote_for_message(geometry.task_name),
                    quote_for_message(last), kMaxDnsLabel, kMaxDnsName)};
  }
  geometry.peers.reserve(geometry.hosts);
  for (unsigned i = 0; i < geometry.hosts; ++i)
    geometry.peers.push_back(peer_dns_name(geometry.job_name, geometry.task_name, i));
  geometry.all_named = true;
  return geometry;
}

}  // namespace trainit
