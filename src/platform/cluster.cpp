#include "platform/cluster.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>

#include "base/number.h"
#include "os/text.h"
#include "platform/geometry.h"

namespace trainit {
namespace {

constexpr std::size_t kMaxHostFile = 1 << 20;
constexpr std::string_view kVolcanoTasks[] = {"master", "worker"};

// What one platform's variables say, before precedence picks one.
struct View {
  std::string source;
  unsigned hosts = 1;
  unsigned index = 0;
  std::optional<unsigned> nproc;
  std::string master;  // host 0's name or address
  // The variable each value came from, for disagreements.
  std::string hosts_from, index_from, nproc_from, master_from;
};

bool any_set(const Environment& env, std::initializer_list<std::string_view> names) {
  return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return env.get(n).has_value(); });
}

// A host name or address: DNS name characters (and ':' for IPv6), 1..253 bytes.
bool is_host(std::string_view text) {
  auto ok = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == ':'; };
  return is_dns_name(text) && std::all_of(text.begin(), text.end(), ok);
}

Error bad(std::string_view name, std::string_view value, std::string_view problem) {
  return Error{fmt::format("{}={}: {}", name, quote_for_message(value), problem)};
}

// The first of `names` that is set: its name and value.
std::optional<std::pair<std::string_view, std::string_view>> first_set(const Environment& env,
                                                                       std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (auto v = env.get(n))
      return std::pair{n, *v};
  }
  return std::nullopt;
}

Result<unsigned> count_variable(std::string_view name, std::string_view value, unsigned min, unsigned max) {
  if (value.find(':') != std::string_view::npos) {
    return bad(name, value,
               "an elastic range: trainit runs a static job of one size (set one number; for an elastic job "
               "use --mode torchrun-exec)");
  }
  auto n = parse_decimal(value);
  if (!n)
    return bad(name, value, "not a decimal number (digits only: no sign, space or fraction)");
  if (*n < min || *n > max)
    return bad(name, value, fmt::format("out of range {}..{}", min, max));
  return static_cast<unsigned>(*n);
}

Result<std::uint16_t> port_variable(std::string_view name, std::string_view value) {
  auto n = count_variable(name, value, 1, 65535);
  if (!n)
    return n.error();
  return static_cast<std::uint16_t>(*n);
}

View modelarts_view(const Cluster& geometry) {
  View v;
  v.source = geometry.source;
  v.hosts = geometry.hosts;
  v.index = geometry.index;
  v.nproc = geometry.nproc;
  if (v.nproc)
    v.nproc_from = "MA_NUM_GPUS";
  v.master = geometry.peers.front();
  v.hosts_from = "MA_NUM_HOSTS";
  v.index_from = "MA_TASK_INDEX";
  v.master_from = "host 0's platform name";
  return v;
}

struct Kubeflow {
  View view;
  std::optional<std::uint16_t> port;
};

Result<Kubeflow> kubeflow_view(const Environment& env, const FileSystem& fs) {
  Kubeflow k;
  View& v = k.view;
  v.source = "Kubeflow";
  if (auto nodes = first_set(env, {"PET_NNODES", "WORLD_SIZE"})) {
    auto n = count_variable(nodes->first, nodes->second, 1, kMaxHosts);
    if (!n)
      return n.error();
    v.hosts = *n;
    v.hosts_from = nodes->first;
  }
  if (auto rank = first_set(env, {"PET_NODE_RANK", "RANK"})) {
    auto n = count_variable(rank->first, rank->second, 0, kMaxHosts - 1);
    if (!n)
      return n.error();
    if (*n >= v.hosts) {
      return bad(
          rank->first, rank->second,
          fmt::format("not below the host count {} ({})", v.hosts, v.hosts_from.empty() ? "default" : v.hosts_from));
    }
    v.index = *n;
    v.index_from = rank->first;
  } else if (v.hosts > 1) {
    return Error{fmt::format("{}={} says several hosts, but neither PET_NODE_RANK nor RANK says which one this is",
                             v.hosts_from, v.hosts)};
  }
  if (auto nproc = env.get("PET_NPROC_PER_NODE")) {
    if (*nproc == "auto") {
      v.nproc = std::max(visible_accelerators(fs), 1U);
    } else {
      auto n = count_variable("PET_NPROC_PER_NODE", *nproc, 1, 1024);
      if (!n)
        return n.error();
      v.nproc = *n;
    }
    v.nproc_from = "PET_NPROC_PER_NODE";
  }
  if (auto master = first_set(env, {"PET_MASTER_ADDR", "MASTER_ADDR"})) {
    if (!is_host(master->second))
      return bad(master->first, master->second, "not a host name or address");
    v.master = std::string(master->second);
    v.master_from = master->first;
  } else if (v.hosts > 1) {
    return Error{fmt::format("{}={} says several hosts, but neither PET_MASTER_ADDR nor MASTER_ADDR names host 0",
                             v.hosts_from, v.hosts)};
  }
  if (auto port = first_set(env, {"PET_MASTER_PORT", "MASTER_PORT"})) {
    auto p = port_variable(port->first, port->second);
    if (!p)
      return p.error();
    k.port = *p;
  }
  return k;
}

// One Volcano task's hosts: its file, else its variable; empty when neither.
Result<std::vector<std::string>> volcano_hosts(const Environment& env, const FileSystem& fs, std::string_view task) {
  std::vector<std::string> hosts;
  const std::string file = fmt::format("/etc/volcano/{}.host", task);
  std::string upper(task);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  const std::string variable = fmt::format("VC_{}_HOSTS", upper);
  std::string text;
  std::string from;
  char separator = ',';
  if (auto content = fs.read_file(file, kMaxHostFile); content) {
    text = std::move(*content);
    from = file;
    separator = '\n';
  } else if (content.error().errnum != ENOENT) {
    return content.error();
  } else if (auto value = env.get(variable)) {
    text = std::string(*value);
    from = variable;
  }
  std::size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    std::size_t end = text.find(separator, start);
    std::string_view item =
        std::string_view(text).substr(start, end == std::string::npos ? std::string::npos : end - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())) != 0)
      item.remove_suffix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())) != 0)
      item.remove_prefix(1);
    if (!item.empty()) {
      if (!is_host(item))
        return Error{fmt::format("{}: {} is not a host name", from, quote_for_message(item))};
      hosts.emplace_back(item);
    }
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return hosts;
}

struct Volcano {
  View view;
  std::vector<std::string> peers;
};

Result<Volcano> volcano_view(const Environment& env, const FileSystem& fs) {
  Volcano out;
  View& v = out.view;
  v.source = "Volcano";
  std::vector<std::pair<std::string_view, std::vector<std::string>>> tasks;
  for (std::string_view task : kVolcanoTasks) {
    auto hosts = volcano_hosts(env, fs, task);
    if (!hosts)
      return hosts.error();
    if (!hosts->empty())
      tasks.emplace_back(task, std::move(*hosts));
  }
  auto index_var = first_set(env, {"VC_TASK_INDEX", "VK_TASK_INDEX"});
  auto index = count_variable(index_var->first, index_var->second, 0, kMaxHosts - 1);
  if (!index)
    return index.error();
  if (tasks.empty()) {
    return Error{
        fmt::format("{} is set, but neither /etc/volcano/{{master,worker}}.host nor VC_MASTER_HOSTS or "
                    "VC_WORKER_HOSTS lists the job's hosts",
                    index_var->first)};
  }
  // This host's task: the one that lists its name, else the only one.
  std::size_t mine = tasks.size();
  if (auto hostname = env.get("HOSTNAME")) {
    for (std::size_t t = 0; t < tasks.size() && mine == tasks.size(); ++t) {
      for (const std::string& h : tasks[t].second) {
        if (h == *hostname || h.starts_with(std::string(*hostname) + "."))
          mine = t;
      }
    }
  }
  if (mine == tasks.size()) {
    if (tasks.size() > 1) {
      return Error{
          fmt::format("Volcano lists tasks master and worker, and HOSTNAME={} is in neither: cannot tell "
                      "which this host is",
                      quote_for_message(env.get("HOSTNAME").value_or("")))};
    }
    mine = 0;
  }
  unsigned offset = 0;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    if (t < mine)
      offset += static_cast<unsigned>(tasks[t].second.size());
    for (std::string& h : tasks[t].second)
      out.peers.push_back(std::move(h));
  }
  if (out.peers.size() > kMaxHosts)
    return Error{fmt::format("Volcano lists {} hosts, more than {}", out.peers.size(), kMaxHosts)};
  const auto in_task = static_cast<unsigned>(tasks[mine].second.size());
  if (*index >= in_task) {
    return bad(index_var->first, index_var->second,
               fmt::format("not below the {} hosts of Volcano task {}", in_task, tasks[mine].first));
  }
  v.hosts = static_cast<unsigned>(out.peers.size());
  v.index = offset + *index;
  v.master = out.peers.front();
  v.hosts_from = "the Volcano host lists";
  v.index_from = std::string(index_var->first);
  v.master_from = "the first Volcano host";
  return out;
}

void compare(const View& winner, const View& other, std::vector<std::string>& out) {
  if (!other.hosts_from.empty() && other.hosts != winner.hosts)
    out.push_back(fmt::format("{} says {} hosts ({}: {})", other.hosts_from, other.hosts, winner.source, winner.hosts));
  if (!other.index_from.empty() && other.index != winner.index)
    out.push_back(fmt::format("{} says host {} ({}: {})", other.index_from, other.index, winner.source, winner.index));
  if (other.nproc && winner.nproc && *other.nproc != *winner.nproc) {
    out.push_back(fmt::format("{} says {} processes per host ({}: {})", other.nproc_from, *other.nproc, winner.source,
                              *winner.nproc));
  }
  if (!other.master.empty() && !winner.master.empty() && other.master != winner.master)
    out.push_back(
        fmt::format("{} says host 0 is {} ({}: {})", other.master_from, other.master, winner.source, winner.master));
}

}  // namespace

unsigned visible_accelerators(const FileSystem& fs) {
  for (std::string_view prefix : {"/dev/nvidia", "/dev/davinci"}) {
    unsigned n = 0;
    while (n < 1024 && fs.kind(fmt::format("{}{}", prefix, n)) != PathKind::kMissing)
      ++n;
    if (n > 0)
      return n;
  }
  return 0;
}

Result<Cluster> cluster_from_env(const Environment& env, const FileSystem& fs) {
  const bool modelarts = any_set(env, {"MA_VJ_NAME", "MA_NUM_HOSTS", "MA_TASK_INDEX"});
  const bool kubeflow = any_set(env, {"PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR"});
  const bool volcano = any_set(env, {"VC_TASK_INDEX", "VK_TASK_INDEX"});

  Cluster c;
  for (const EnvVar& var : env.vars()) {
    if (var.name.starts_with("PET_"))
      c.consumed.push_back(var.name);
  }
  std::vector<View> losers;
  std::optional<View> winner;
  if (modelarts) {
    auto geometry = job_geometry(env);
    if (!geometry)
      return geometry.error();
    winner = modelarts_view(*geometry);
    geometry->consumed = std::move(c.consumed);
    c = std::move(*geometry);
  }
  if (kubeflow) {
    auto k = kubeflow_view(env, fs);
    if (!k && !winner)
      return k.error();
    if (!k) {
      c.disagreements.push_back(fmt::format("Kubeflow's variables ignored: {}", k.error().message));
    } else if (winner) {
      losers.push_back(std::move(k->view));
    } else if (k) {
      winner = std::move(k->view);
      c.master_port = k->port;
      if (!winner->master.empty())
        c.peers = {winner->master};
      c.all_named = c.peers.size() == winner->hosts;
    }
  }
  if (volcano) {
    auto v = volcano_view(env, fs);
    if (!v && !winner)
      return v.error();
    if (!v && modelarts) {
      // ModelArts sets VC_TASK_INDEX too, as its index's fallback: only a
      // value other than the index it took is worth a word.
      for (std::string_view name : {"VC_TASK_INDEX", "VK_TASK_INDEX"}) {
        auto value = env.get(name);
        if (!value || parse_decimal(*value) == winner->index)
          continue;
        auto index = parse_decimal(*value);
        c.disagreements.push_back(fmt::format("{} says host {} (ModelArts: host {})", name,
                                              index ? std::to_string(*index) : quote_for_message(*value),
                                              winner->index));
      }
    } else if (!v) {
      c.disagreements.push_back(fmt::format("Volcano's variables ignored: {}", v.error().message));
    } else if (winner) {
      losers.push_back(std::move(v->view));
    } else if (v) {
      winner = std::move(v->view);
      c.peers = std::move(v->peers);
      c.all_named = true;
    }
  }
  if (!winner) {  // none: a single host, with MA_NUM_GPUS's devices when set
    auto gpus = env.num_gpus();
    if (!gpus)
      return gpus.error();
    if (*gpus)
      c.nproc = std::max(**gpus, 1U);
    return c;
  }
  c.source = winner->source;
  c.hosts = winner->hosts;
  c.index = winner->index;
  c.nproc = winner->nproc;
  for (const View& other : losers)
    compare(*winner, other, c.disagreements);
  return c;
}

}  // namespace trainit
