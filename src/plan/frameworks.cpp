#include "plan/frameworks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/env.h"
#include "base/number.h"
#include "os/path.h"
#include "os/text.h"
#include "plan/ascend.h"
#include "platform/cluster.h"

namespace trainit {
namespace {

constexpr std::string_view kLoopback = "127.0.0.1";
constexpr std::string_view kPython = "python3";
constexpr unsigned kMaxProcesses = 1024;

Error bad_param(std::string_view name, std::string_view value, std::string_view problem) {
  return Error{fmt::format("MA_EXTRA_TORCHRUN_PARAMS: --{}={}: {}", name, quote_for_message(value), problem)};
}

Result<unsigned> param_number(std::string_view name, std::string_view value, unsigned min, unsigned max) {
  if (auto colon = value.find(':'); name == "nnodes" && colon != std::string_view::npos) {
    // MIN:MAX with MIN = MAX: a fixed size in torchrun's range spelling.
    if (value.substr(0, colon) != value.substr(colon + 1) || colon == 0)
      return bad_param(name, value, "an elastic range: trainit runs a static job (use --mode torchrun-exec)");
    value = value.substr(0, colon);
  }
  auto n = parse_decimal(value);
  if (!n)
    return bad_param(name, value, "not a decimal number");
  if (*n < min || *n > max)
    return bad_param(name, value, fmt::format("out of range {}..{}", min, max));
  return static_cast<unsigned>(*n);
}

// --rdzv_conf's "key=value,key=value": the timeouts become the host
// barrier's deadline (the longer of timeout, etcd's, and join_timeout,
// c10d's); the agent's other keys are noted.
Result<void> read_rdzv_conf(std::string_view value, TorchrunParams& out) {
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    std::string_view item =
        value.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!item.empty()) {
      auto eq = item.find('=');
      if (eq == std::string_view::npos)
        return bad_param("rdzv_conf", value, fmt::format("{} is not key=value", quote_for_message(item)));
      std::string_view key = item.substr(0, eq);
      if (key == "timeout" || key == "join_timeout") {
        auto n = param_number("rdzv_conf", item.substr(eq + 1), 1, 7 * 24 * 3600);
        if (!n)
          return n.error();
        out.rendezvous_timeout = std::max(*n, out.rendezvous_timeout.value_or(0));
      } else {
        out.notes.push_back(fmt::format("--rdzv_conf {}: tunes torchrun's agent; no effect here", item));
      }
    }
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return {};
}

bool is_flag(std::string_view name) {
  return name == "standalone" || name == "no_python" || name == "module" || name == "m";
}

// A boot file ending in .py runs under python3 -u, as torchrun runs it
// (its --no_python runs the command as given; -m runs a module).
std::vector<std::string> python_command(const std::vector<std::string>& argv, bool no_python, bool module,
                                        bool unbuffered) {
  if (no_python || (!module && !argv.front().ends_with(".py")))
    return argv;
  std::vector<std::string> out{std::string(kPython)};
  if (unbuffered)
    out.emplace_back("-u");
  if (module)
    out.emplace_back("-m");
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// What every framework mode knows before it plans its processes.
struct Frame {
  Cluster cluster;
  unsigned nproc = 1;
  std::string master;  // host 0 as the processes reach it
  std::string log_dir;
  std::string log_prefix;  // JOB_ID, or "trainit" without MA_VJ_NAME
  std::vector<EnvVar> base_env;
};

Result<Frame> read_frame(const PlanInput& input) {
  Frame f;
  auto cluster = cluster_from_env(input.env, *input.fs);
  if (!cluster)
    return cluster.error();
  f.cluster = std::move(*cluster);
  auto mount = input.env.mount_path();
  if (!mount)
    return mount.error();
  f.log_dir = job_log_dir(*mount, *input.fs);
  if (input.env.get("MA_VJ_NAME")) {
    auto id = input.env.job_id();
    if (!id)
      return id.error();
    f.log_prefix = std::move(*id);
  } else {
    f.log_prefix = "trainit";
  }
  f.nproc = f.cluster.nproc.value_or(1);
  if (input.options.nproc_per_node)
    f.nproc = *input.options.nproc_per_node;
  const bool several = f.cluster.hosts > 1;
  // Host 0 by address once resolve_peers found it (PlanInput::peer_addresses),
  // else by name; a single host is this one.
  if (!several)
    f.master = std::string(kLoopback);
  else if (!input.peer_addresses.empty())
    f.master = input.peer_addresses.front();
  else
    f.master = f.cluster.peers.front();
  for (const EnvVar& var : input.env.vars()) {
    if (std::find(f.cluster.consumed.begin(), f.cluster.consumed.end(), var.name) != f.cluster.consumed.end())
      continue;
    if (is_withheld_from_children(var.name))
      continue;
    f.base_env.push_back(var);
  }
  return f;
}

Plan base_plan(Mode mode, const PlanInput& input, const Frame& f, bool control_channel) {
  Plan plan;
  plan.mode = mode;
  plan.signals = SignalPolicy::kStop;
  if (control_channel && f.cluster.hosts > 1) {
    plan.states = {State::kResolvePeers, State::kHostBarrier, State::kSpawn, State::kRunning,
                   State::kStopping,     State::kReaping,     State::kExit};
    plan.hosts = HostsPlan{f.cluster.hosts, f.cluster.index, f.cluster.peers, input.options.control_port};
  } else {
    plan.states = {State::kSpawn, State::kRunning, State::kStopping, State::kReaping, State::kExit};
  }
  LaunchPlan launch;
  launch.source = f.cluster.source;
  launch.disagreements = f.cluster.disagreements;
  launch.hosts = f.cluster.hosts;
  launch.index = f.cluster.index;
  launch.nproc = f.nproc;
  launch.master_addr = f.master;
  plan.launch = std::move(launch);
  plan.dirs.push_back(f.log_dir);
  return plan;
}

Result<void> check_port(const Plan& plan, std::uint16_t port, std::string_view what) {
  if (plan.hosts && port == plan.hosts->control_port) {
    return Error{fmt::format("{} {}: the same port as the hosts' control channel (--control-port {})", what, port,
                             plan.hosts->control_port)};
  }
  return {};
}

ProcessSpec logged_process(const Frame& f, std::string name, const std::string& log_file, std::string prefix) {
  ProcessSpec p;
  p.name = std::move(name);
  p.env = f.base_env;
  p.group = GroupPolicy::kSession;
  p.output = OutputPolicy::kLogAndConsole;
  p.log_file = join_path(f.log_dir, log_file);
  p.console_prefix = std::move(prefix);
  return p;
}

// One process for this host (the -exec modes, pytorch, tensorflow).
ProcessSpec host_process(const Frame& f, std::vector<std::string> argv) {
  ProcessSpec p = logged_process(f, fmt::format("host-{}", f.cluster.index),
                                 fmt::format("{}-host-{}.txt", f.log_prefix, f.cluster.index),
                                 fmt::format("[host {}] ", f.cluster.index));
  p.argv = std::move(argv);
  return p;
}

std::string run_id(const Frame& f) {
  return f.cluster.job_name.empty() ? std::string("none") : f.cluster.job_name;
}

// trainit's own directory for the job, as mpi's: --private-dir, else
// /tmp/trainit-<MA_VJ_NAME>, or /tmp/trainit-job without a job name.
std::string private_dir(const PlanInput& input, const Frame& f) {
  if (!input.options.private_dir.empty())
    return input.options.private_dir;
  return fmt::format("/tmp/trainit-{}", f.cluster.job_name.empty() ? std::string("job") : f.cluster.job_name);
}

// What torchrun's agent gives each worker: a file of its own for its
// @record-ed exception (init/job/error_file.h reads it when it fails).
// `who` names the file: a rank's number, or "host-<I>" for torchrun itself
// (whose @record passes its first failing worker's on).
void give_error_file(Plan& plan, ProcessSpec& p, std::string_view who) {
  set_env(p.env, "TORCHELASTIC_ERROR_FILE", join_path(plan.private_dir, fmt::format("error-{}.json", who)));
}

// --- torchrun ---------------------------------------------------------------

Result<Plan> plan_torchrun(const PlanInput& input) {
  auto frame = read_frame(input);
  if (!frame)
    return frame.error();
  Frame& f = *frame;
  TorchrunParams params;
  if (auto extra = input.env.extra_torchrun_params()) {
    auto parsed = parse_torchrun_params(*extra);
    if (!parsed)
      return parsed.error();
    params = std::move(*parsed);
  }
  if (params.nnodes && *params.nnodes != f.cluster.hosts) {
    return Error{fmt::format("MA_EXTRA_TORCHRUN_PARAMS: --nnodes={} disagrees with the {} hosts {} says",
                             *params.nnodes, f.cluster.hosts, f.cluster.source)};
  }
  if (params.node_rank && *params.node_rank != f.cluster.index) {
    return Error{fmt::format("MA_EXTRA_TORCHRUN_PARAMS: --node_rank={} disagrees with host index {} ({})",
                             *params.node_rank, f.cluster.index, f.cluster.source)};
  }
  if (params.standalone && f.cluster.hosts > 1)
    return Error{
        fmt::format("MA_EXTRA_TORCHRUN_PARAMS: --standalone, but {} says {} hosts", f.cluster.source, f.cluster.hosts)};
  if (params.nproc_per_node && !input.options.nproc_per_node) {
    if (*params.nproc_per_node == "auto") {
      f.nproc = std::max(visible_accelerators(*input.fs), 1U);
    } else {
      auto n = param_number("nproc_per_node", *params.nproc_per_node, 1, kMaxProcesses);
      if (!n)
        return n.error();
      f.nproc = *n;
    }
  }
  if (params.master_addr && f.cluster.hosts > 1 && input.peer_addresses.empty())
    f.master = *params.master_addr;

  auto platform_port = input.env.torchrun_master_port();
  if (!platform_port)
    return platform_port.error();
  std::uint16_t port =
      input.env.get("MA_TORCHRUN_MASTER_PORT") ? *platform_port : f.cluster.master_port.value_or(*platform_port);
  if (params.master_port)
    port = *params.master_port;
  if (input.options.master_port)
    port = *input.options.master_port;
  // torchrun's --max_restarts N is --restart on-failure --max-restarts N,
  // unless trainit's own options say otherwise (make_plan then sets
  // Plan::restarts from them).
  std::optional<unsigned> restarts = input.options.job_restarts();
  if (!restarts && params.max_restarts.value_or(0) > 0) {
    restarts = params.max_restarts;
  }

  Plan plan = base_plan(Mode::kTorchrun, input, f, true);
  plan.private_dir = private_dir(input, f);
  plan.restarts = restarts;
  plan.launch->master_port = port;
  plan.launch->rendezvous_timeout = params.rendezvous_timeout;
  plan.launch->notes = std::move(params.notes);
  if (auto r = check_port(plan, port, "the torchrun master port"); !r)
    return r.error();

  const unsigned world = f.cluster.hosts * f.nproc;
  const std::string id = params.run_id.value_or(run_id(f));
  const std::string role = params.role.value_or("default");
  const std::vector<std::string> argv = python_command(input.argv, params.no_python, params.module, true);
  const bool omp_set = input.env.get("OMP_NUM_THREADS").has_value();
  const bool nccl_set = input.env.get("NCCL_ASYNC_ERROR_HANDLING").has_value();
  plan.processes.reserve(f.nproc);
  for (unsigned local = 0; local < f.nproc; ++local) {
    const unsigned rank = f.cluster.index * f.nproc + local;
    ProcessSpec p = logged_process(f, fmt::format("rank-{}-local-{}", rank, local),
                                   fmt::format("{}-proc-rank-{}-device-{}.txt", f.log_prefix, rank, local),
                                   fmt::format("[rank {}] ", rank));
    p.rank = rank;
    p.argv = argv;
    set_env(p.env, "RANK", std::to_string(rank));
    set_env(p.env, "LOCAL_RANK", std::to_string(local));
    set_env(p.env, "WORLD_SIZE", std::to_string(world));
    set_env(p.env, "LOCAL_WORLD_SIZE", std::to_string(f.nproc));
    set_env(p.env, "GROUP_RANK", std::to_string(f.cluster.index));
    set_env(p.env, "GROUP_WORLD_SIZE", std::to_string(f.cluster.hosts));
    set_env(p.env, "ROLE_RANK", std::to_string(rank));
    set_env(p.env, "ROLE_WORLD_SIZE", std::to_string(world));
    set_env(p.env, "ROLE_NAME", role);
    set_env(p.env, "MASTER_ADDR", f.master);
    set_env(p.env, "MASTER_PORT", std::to_string(port));
    set_env(p.env, "TORCHELASTIC_RESTART_COUNT", "0");  // the run counts up on each restart
    set_env(p.env, "TORCHELASTIC_MAX_RESTARTS", std::to_string(restarts.value_or(0)));
    set_env(p.env, "TORCHELASTIC_RUN_ID", id);
    if (!omp_set)
      set_env(p.env, "OMP_NUM_THREADS", "1");
    if (!nccl_set)
      set_env(p.env, "NCCL_ASYNC_ERROR_HANDLING", "1");
    give_error_file(plan, p, std::to_string(rank));
    plan.processes.push_back(std::move(p));
  }
  return plan;
}

Result<Plan> plan_torchrun_exec(const PlanInput& input) {
  auto frame = read_frame(input);
  if (!frame)
    return frame.error();
  const Frame& f = *frame;
  Plan plan = base_plan(Mode::kTorchrunExec, input, f, true);
  auto platform_port = input.env.torchrun_master_port();
  if (!platform_port)
    return platform_port.error();
  const std::uint16_t port = input.options.master_port.value_or(*platform_port);
  plan.launch->master_port = port;
  if (auto r = check_port(plan, port, "the torchrun master port"); !r)
    return r.error();
  std::vector<std::string> argv{"torchrun"};
  if (f.cluster.hosts == 1) {
    argv.emplace_back("--standalone");
    argv.push_back("--nnodes=1");
    argv.push_back(fmt::format("--nproc_per_node={}", f.nproc));
  } else {
    argv.push_back(fmt::format("--nnodes={}", f.cluster.hosts));
    argv.push_back(fmt::format("--nproc_per_node={}", f.nproc));
    argv.push_back(fmt::format("--node_rank={}", f.cluster.index));
    argv.push_back(fmt::format("--master_addr={}", f.master));
    argv.push_back(fmt::format("--master_port={}", port));
    argv.push_back(fmt::format("--rdzv_id={}", run_id(f)));
    argv.emplace_back("--rdzv_backend=static");
  }
  if (auto extra = input.env.extra_torchrun_params()) {
    auto words = split_words(*extra);
    if (!words)
      return Error{fmt::format("MA_EXTRA_TORCHRUN_PARAMS={}", words.error().message)};
    argv.insert(argv.end(), words->begin(), words->end());
  }
  argv.insert(argv.end(), input.argv.begin(), input.argv.end());
  plan.private_dir = private_dir(input, f);
  ProcessSpec torchrun = host_process(f, std::move(argv));
  give_error_file(plan, torchrun, fmt::format("host-{}", f.cluster.index));
  plan.processes.push_back(std::move(torchrun));
  return plan;
}

// --- msrun -------------------------------------------------------------------

struct Msrun {
  std::uint16_t port = kDefaultMsrunPort;
  unsigned timeout = 600;
  std::optional<std::string> rank_table;  // MS_RANKTABLE_ENABLE=True: the table's path
};

Result<Msrun> read_msrun(const PlanInput& input, const Plan& plan) {
  Msrun m;
  m.port = input.options.master_port.value_or(kDefaultMsrunPort);
  if (auto r = check_port(plan, m.port, "the msrun scheduler port"); !r)
    return r.error();
  auto timeout = input.env.msrun_cluster_timeout();
  if (!timeout)
    return timeout.error();
  m.timeout = *timeout;
  if (input.env.ms_ranktable_enable()) {
    auto location = input.env.rank_table_location(*input.fs);
    if (!location)
      return location.error();
    m.rank_table = location->path;
  }
  return m;
}

void set_msrun_env(std::vector<EnvVar>& env, const Frame& f, const Msrun& m, std::string_view role) {
  set_env(env, "MS_ROLE", std::string(role));
  set_env(env, "MS_WORKER_NUM", std::to_string(f.cluster.hosts * f.nproc));
  set_env(env, "MS_SCHED_HOST", f.master);
  set_env(env, "MS_SCHED_PORT", std::to_string(m.port));
  set_env(env, "MS_TOPO_TIMEOUT", std::to_string(m.timeout));
  if (m.rank_table)
    set_env(env, "RANK_TABLE_FILE", *m.rank_table);
}

// The msrun modes' start: the plan (made again with host 0's address once
// resolve_peers found it: MindSpore reaches its scheduler by address) and
// msrun's settings.
Result<std::pair<Plan, Msrun>> msrun_plan(Mode mode, const PlanInput& input, const Frame& f) {
  Plan plan = base_plan(mode, input, f, true);
  plan.replan_with_addresses = plan.hosts.has_value();
  auto m = read_msrun(input, plan);
  if (!m)
    return m.error();
  plan.launch->master_port = m->port;
  plan.launch->rendezvous_timeout = m->timeout;
  if (m->rank_table) {  // msrun networks from the table: usable once it is "completed", as the ranks' is
    auto table = read_rank_table(input);
    if (!table)
      return table.error();
    plan.states.insert(plan.states.begin(), State::kWaitRankTable);
    plan.rank_table = std::move(table->plan);
    plan.rank_table->rank_table_file = plan.rank_table->source;  // msrun's --rank_table_file, the ranks' too
  }
  return std::pair{std::move(plan), *m};
}

Result<Plan> plan_msrun(const PlanInput& input) {
  auto frame = read_frame(input);
  if (!frame)
    return frame.error();
  const Frame& f = *frame;
  auto planned = msrun_plan(Mode::kMsrun, input, f);
  if (!planned)
    return planned.error();
  auto& [plan, m] = *planned;
  if (plan.rank_table && !plan.rank_table->ready)
    return std::move(plan);  // the waiting plan: nothing runs before the table is complete
  const std::vector<std::string> argv = python_command(input.argv, false, false, false);
  if (f.cluster.index == 0) {
    ProcessSpec sched = logged_process(f, "scheduler", "scheduler.log", "[scheduler] ");
    sched.argv = argv;
    set_msrun_env(sched.env, f, m, "MS_SCHED");
    plan.processes.push_back(std::move(sched));
  }
  const std::string world = std::to_string(f.cluster.hosts * f.nproc);
  for (unsigned local = 0; local < f.nproc; ++local) {
    const unsigned rank = f.cluster.index * f.nproc + local;
    ProcessSpec p = logged_process(f, fmt::format("worker-{}", rank), fmt::format("worker_{}.log", rank),
                                   fmt::format("[rank {}] ", rank));
    p.rank = rank;
    p.argv = argv;
    set_msrun_env(p.env, f, m, "MS_WORKER");
    set_env(p.env, "MS_NODE_ID", std::to_string(rank));
    set_env(p.env, "RANK_ID", std::to_string(rank));
    set_env(p.env, "DEVICE_ID", std::to_string(local));
    set_env(p.env, "LOCAL_RANK", std::to_string(local));
    set_env(p.env, "RANK_SIZE", world);
    plan.processes.push_back(std::move(p));
  }
  return std::move(plan);
}

Result<Plan> plan_msrun_exec(const PlanInput& input) {
  auto frame = read_frame(input);
  if (!frame)
    return frame.error();
  const Frame& f = *frame;
  auto planned = msrun_plan(Mode::kMsrunExec, input, f);
  if (!planned)
    return planned.error();
  auto& [plan, m] = *planned;
  if (plan.rank_table && !plan.rank_table->ready)
    return std::move(plan);
  std::vector<std::string> argv{"msrun",
                                fmt::format("--worker_num={}", f.cluster.hosts * f.nproc),
                                fmt::format("--local_worker_num={}", f.nproc),
                                fmt::format("--master_addr={}", f.master),
                                fmt::format("--node_rank={}", f.cluster.index),
                                fmt::format("--master_port={}", m.port),
                                fmt::format("--log_dir={}", f.log_dir),
                                "--join=True",
                                fmt::format("--cluster_time_out={}", m.timeout)};
  if (m.rank_table)
    argv.push_back(fmt::format("--rank_table_file={}", *m.rank_table));
  argv.insert(argv.end(), input.argv.begin(), input.argv.end());
  plan.processes.push_back(host_process(f, std::move(argv)));
  return std::move(plan);
}

// --- pytorch, tensorflow ---------------------------------------------------

Result<Plan> plan_pytorch(const PlanInput& input) {
  auto frame = read_frame(input);
  if (!frame)
    return frame.error();
  Frame& f = *frame;
  // The seed's preset names host 0 by its platform name even on one host.
  if (f.cluster.hosts == 1 && !f.cluster.peers.empty())
    f.master = f.cluster.peers.front();
  Plan plan = base_plan(Mode::kPytorch, input, f, true);
  const std::uint16_t port = input.options.master_port.value_or(f.cluster.master_port.value_or(kDefaultPytorchPort));
  plan.launch->master_port = port;
  plan.launch->nproc = 1;
  if (auto r = check_port(plan, port, "the init_method port"); !r)
    return r.error();
  std::vector<std::string> argv = python_command(input.argv, false, false, false);
  // One card on one host has no one to meet: the platform's command for it
  // is the script and its parameters alone.
  if (f.cluster.hosts == 1 && f.cluster.nproc == 1U) {
    plan.processes.push_back(host_process(f, std::move(argv)));
    return plan;
  }
  argv.emplace_back("--init_method");
  argv.push_back(fmt::format("tcp://{}:{}", f.master, port));
  if (f.cluster.hosts > 1) {
    argv.insert(argv.end(),
                {"--rank", std::to_string(f.cluster.index), "--world_size", std::to_string(f.cluster.hosts)});
  }
  plan.processes.push_back(host_process(f, std::move(argv)));
  return plan;
}

std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i)
    out += fmt::format("{}\"{}\"", i == 0 ? "" : ",", items[i]);
  return out + "]";
}

Result<Plan> plan_tensorflow(const PlanInput& input) {
  auto frame = read_frame(input);
  if (!frame)
    return frame.error();
  const Frame& f = *frame;
  Plan plan = base_plan(Mode::kTensorflow, input, f, false);
  plan.launch->nproc = 1;
  auto ps = input.env.tf_ps_hosts();
  if (!ps)
    return ps.error();
  auto workers = input.env.tf_worker_hosts();
  if (!workers)
    return workers.error();
  std::vector<std::string> argv = python_command(input.argv, false, false, false);
  if (f.cluster.hosts > 1 || !ps->empty() || !workers->empty()) {
    if (workers->empty())
      return Error{"TF_WORKER_HOSTS is not set: a TensorFlow job of several hosts needs its workers' host:port list"};
    const std::string& job = f.cluster.task_name;
    const std::vector<std::string>* mine = job == "ps" ? &*ps : job == "worker" ? &*workers : nullptr;
    if (mine == nullptr) {
      return Error{fmt::format("MA_TASK_NAME={}: a TensorFlow job's roles are ps and worker", quote_for_message(job))};
    }
    if (f.cluster.index >= mine->size()) {
      return Error{fmt::format("host index {} is not below the {} {} hosts TF_{}_HOSTS lists", f.cluster.index,
                               mine->size(), job, job == "ps" ? "PS" : "WORKER")};
    }
    argv.insert(argv.end(),
                {"--task_index", std::to_string(f.cluster.index), "--ps_hosts", fmt::format("{}", fmt::join(*ps, ",")),
                 "--worker_hosts", fmt::format("{}", fmt::join(*workers, ",")), "--job_name", job});
    std::string cluster = fmt::format("\"worker\":{}", json_list(*workers));
    if (!ps->empty())
      cluster = fmt::format("\"ps\":{},{}", json_list(*ps), cluster);
    ProcessSpec p = host_process(f, std::move(argv));
    set_env(
        p.env, "TF_CONFIG",
        fmt::format("{{\"cluster\":{{{}}},\"task\":{{\"type\":\"{}\",\"index\":{}}}}}", cluster, job, f.cluster.index));
    plan.processes.push_back(std::move(p));
    return plan;
  }
  plan.processes.push_back(host_process(f, std::move(argv)));
  return plan;
}

}  // namespace

Result<std::vector<std::string>> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word)
        words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0)
    return Error{fmt::format("{}: an unclosed {} quote", quote_for_message(text), quote)};
  if (in_word)
    words.push_back(std::move(word));
  return words;
}

Result<TorchrunParams> parse_torchrun_params(std::string_view text) {
  auto words = split_words(text);
  if (!words)
    return Error{fmt::format("MA_EXTRA_TORCHRUN_PARAMS={}", words.error().message)};
  TorchrunParams out;
  for (std::size_t i = 0; i < words->size(); ++i) {
    std::string_view word = (*words)[i];
    if (!word.starts_with("-") || word == "-" || word == "--") {
      return Error{
          fmt::format("MA_EXTRA_TORCHRUN_PARAMS: {} is not a torchrun parameter (the command comes after trainit's --)",
                      quote_for_message(word))};
    }
    word.remove_prefix(word.starts_with("--") ? 2 : 1);
    std::string name(word.substr(0, word.find('=')));
    std::replace(name.begin(), name.end(), '-', '_');
    std::optional<std::string> value;
    if (auto eq = word.find('='); eq != std::string_view::npos)
      value = std::string(word.substr(eq + 1));
    if (is_flag(name)) {
      if (value)
        return bad_param(name, *value, "takes no value");
      out.standalone |= name == "standalone";
      out.no_python |= name == "no_python";
      out.module |= name == "module" || name == "m";
      continue;
    }
    static constexpr std::string_view kKnown[] = {
        "nproc_per_node", "nnodes",  "node_rank",    "master_addr",   "master_port", "max_restarts",
        "rdzv_conf",      "rdzv_id", "rdzv_backend", "rdzv_endpoint", "role",        "monitor_interval",
        "start_method",   "log_dir", "redirects",    "tee",           "local_addr"};
    if (std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown)) {
      return Error{fmt::format(
          "MA_EXTRA_TORCHRUN_PARAMS: {} is not a torchrun parameter trainit runs natively (--mode torchrun-exec "
          "passes every parameter to the real torchrun)",
          quote_for_message((*words)[i]))};
    }
    if (!value) {
      if (i + 1 == words->size())
        return Error{fmt::format("MA_EXTRA_TORCHRUN_PARAMS: --{} needs a value", name)};
      value = (*words)[++i];
    }
    if (name == "nproc_per_node") {
      out.nproc_per_node = *value;
    } else if (name == "nnodes" || name == "node_rank" || name == "max_restarts") {
      auto n = param_number(name, *value, name == "nnodes" ? 1 : 0, name == "max_restarts" ? 1000 : kMaxHosts);
      if (!n)
        return n.error();
      (name == "nnodes" ? out.nnodes : name == "node_rank" ? out.node_rank : out.max_restarts) = *n;
    } else if (name == "master_port") {
      auto n = param_number(name, *value, 1, 65535);
      if (!n)
        return n.error();
      out.master_port = static_cast<std::uint16_t>(*n);
    } else if (name == "master_addr") {
      out.master_addr = *value;
    } else if (name == "rdzv_conf") {
      if (auto r = read_rdzv_conf(*value, out); !r)
        return r.error();
    } else if (name == "rdzv_id") {
      out.run_id = *value;
    } else if (name == "role") {
      out.role = *value;
    } else if (name == "rdzv_backend") {
      if (*value != "static") {
        return bad_param(name, *value,
                         "trainit's torchrun mode is a static rendezvous (use --mode torchrun-exec for torchrun's "
                         "own backends)");
      }
    } else if (name == "rdzv_endpoint") {
      auto colon = value->rfind(':');
      if (colon == std::string::npos || colon == 0)
        return bad_param(name, *value, "not host:port");
      auto n = param_number(name, value->substr(colon + 1), 1, 65535);
      if (!n)
        return n.error();
      out.master_addr = value->substr(0, colon);
      out.master_port = static_cast<std::uint16_t>(*n);
    } else {
      out.notes.push_back(
          fmt::format("--{}={}: tunes torchrun's agent or its log files; trainit watches every "
                      "process without polling and logs each to the console and its own file",
                      name, *value));
    }
  }
  return out;
}

Result<Plan> plan_framework(Mode mode, const PlanInput& input) {
  switch (mode) {
    case Mode::kTorchrun:
      return plan_torchrun(input);
    case Mode::kTorchrunExec:
      return plan_torchrun_exec(input);
    case Mode::kMsrun:
      return plan_msrun(input);
    case Mode::kMsrunExec:
      return plan_msrun_exec(input);
    case Mode::kPytorch:
      return plan_pytorch(input);
    case Mode::kTensorflow:
      return plan_tensorflow(input);
    default:
      return Error{fmt::format("{} is not a framework mode", mode_name(mode))};
  }
}

}  // namespace trainit
