#include "plan/ascend.h"

#include <fmt/core.h>

#include <cerrno>
#include <unordered_set>

#include "os/path.h"
#include "os/text.h"
#include "platform/geometry.h"

namespace trainit {
namespace {

constexpr std::string_view kCacheDir = "/cache";
constexpr std::string_view kDefaultHcclConnectTimeout = "1800";

Plan waiting_plan(RankTablePlan rank_table) {
  Plan plan;
  plan.mode = Mode::kAscend;
  plan.states = {State::kWaitRankTable, State::kSpawn,   State::kRunning,
                 State::kStopping,      State::kReaping, State::kExit};
  plan.signals = SignalPolicy::kStop;
  plan.rank_table = std::move(rank_table);
  return plan;
}

// The hosts (containers) of the table: its servers (template 1) or its pods
// with devices (template 2, where two pods may share a server). Not this
// host's index: its peers reach host I by the platform's name for I, which
// the table's order does not follow.
KnownGeometry table_geometry(const RankTable& table, std::string_view source) {
  KnownGeometry known;
  if (table.format == RankTableFormat::kTemplate1) {
    known.hosts = static_cast<unsigned>(table.servers.size());
    known.source = fmt::format("the rank table {}, which lists {} server{}", one_line(source), known.hosts,
                               known.hosts == 1 ? "" : "s");
    return known;
  }
  known.hosts = 0;
  for (const auto& pod : table.pods) {
    if (pod.count != 0)
      ++known.hosts;
  }
  known.source = fmt::format("the rank table {}, which lists {} pod{} with devices", one_line(source), known.hosts,
                             known.hosts == 1 ? "" : "s");
  return known;
}

// Several hosts: the geometry they meet by (HostsPlan); nullopt for one.
// The platform says how many hosts the job has (MA_NUM_HOSTS): more than one,
// and the table must agree. Unset or 1, this host runs its own devices of
// the table alone, as the reference launcher does, whatever else the table
// lists, and reads no other geometry variable.
Result<std::optional<HostsPlan>> plan_hosts(const PlanInput& input, const KnownGeometry& known) {
  auto declared = input.env.num_hosts();
  if (!declared)
    return declared.error();
  if (declared->value_or(1) <= 1)
    return std::optional<HostsPlan>();
  auto geometry = job_geometry(input.env, known);
  if (!geometry)
    return geometry.error();
  return std::optional<HostsPlan>(
      HostsPlan{geometry->hosts, geometry->index, std::move(geometry->peers), input.options.control_port});
}

void add_dir(std::vector<std::string>& dirs, std::unordered_set<std::string>& seen, std::string dir) {
  if (seen.insert(dir).second)
    dirs.push_back(std::move(dir));
}

}  // namespace

Result<TableState> read_rank_table(const PlanInput& input) {
  auto location = input.env.rank_table_location(*input.fs);
  if (!location)
    return location.error();
  TableState state;
  RankTablePlan& rank_table = state.plan;
  rank_table.source = location->path;
  RankTableLimits limits;
  limits.max_local_devices = input.options.max_local_devices;

  auto text = input.fs->read_file(rank_table.source, limits.max_bytes);
  if (!text) {
    if (text.error().errnum != ENOENT)
      return Error{fmt::format("cannot read the rank table: {}", text.error().message)};
    rank_table.pending = "the file does not exist yet";
    return state;
  }
  if (text->empty()) {
    rank_table.pending = "the file is empty";
    return state;
  }
  auto parsed = parse_rank_table(*text, rank_table.source, limits);
  std::string().swap(*text);  // the table is parsed: its text is not kept while the plan is made
  if (!parsed)
    return parsed.error();
  if (!parsed->table) {
    rank_table.pending = fmt::format("its status is {}, not \"completed\"", quote_for_message(parsed->status, 64));
    return state;
  }
  rank_table.ready = true;
  rank_table.format = parsed->table->format;
  rank_table.version = parsed->table->version;
  rank_table.rank_size = parsed->table->rank_size;
  state.table = std::move(parsed->table);
  return state;
}

Result<Plan> plan_ascend(const PlanInput& input) {
  const Environment& env = input.env;
  const FileSystem& fs = *input.fs;

  // The environment first: a bad variable is an error even while the table
  // is not there yet.
  auto job_id = env.job_id();
  if (!job_id)
    return job_id.error();
  auto mount = env.mount_path();
  if (!mount)
    return mount.error();
  auto state = read_rank_table(input);
  if (!state)
    return state.error();
  RankTablePlan& rank_table = state->plan;
  if (!state->table)
    return waiting_plan(std::move(rank_table));
  const RankTable& table = *state->table;

  HostIdentity identity;
  identity.host_ip = std::string(env.current_host_ip().value_or(""));
  identity.instance_name = std::string(env.current_instance_name().value_or(""));
  auto host = select_host(table, identity, rank_table.source);
  if (!host)
    return host.error();

  auto hosts = plan_hosts(input, table_geometry(table, rank_table.source));
  if (!hosts)
    return hosts.error();

  rank_table.server_id = host->server_id;
  rank_table.pod_name = host->pod_name;

  Plan plan = waiting_plan(RankTablePlan{});
  if (*hosts) {
    // The hosts meet before any rank starts: a slow host no longer makes the
    // others' HCCL connections time out.
    plan.states = {State::kWaitRankTable, State::kResolvePeers, State::kHostBarrier, State::kSpawn,
                   State::kRunning,       State::kStopping,     State::kReaping,     State::kExit};
    plan.hosts = std::move(*hosts);
  }
  std::unordered_set<std::string> seen_dirs;
  const std::string log_dir = job_log_dir(*mount, fs);
  add_dir(plan.dirs, seen_dirs, log_dir);

  if (table.format == RankTableFormat::kTemplate2) {
    if (!*mount) {
      return Error{
          fmt::format("{}: a template-2 rank table is converted to template 1 for the ranks, into "
                      "$MA_MOUNT_PATH/rank_table/jobstart_hccl.json, but MA_MOUNT_PATH is not set",
                      one_line(rank_table.source))};
    }
    std::string dir = join_path(**mount, "rank_table");
    std::string file = join_path(dir, "jobstart_hccl.json");
    if (file == rank_table.source) {
      return Error{
          fmt::format("{}: this template-2 table sits where its template-1 conversion is written "
                      "($MA_MOUNT_PATH/rank_table/jobstart_hccl.json) and would be overwritten",
                      one_line(rank_table.source))};
    }
    add_dir(plan.dirs, seen_dirs, dir);
    plan.files.push_back(FileSpec{file, to_template1_json(table), 0644});
    rank_table.rank_table_file = file;
  } else {
    rank_table.rank_table_file = rank_table.source;
  }

  const std::string workspace = *mount ? join_path(**mount, "workspace") : std::string(kCacheDir);
  const std::vector<EnvVar> base_env = child_base_env(env);
  const bool hccl_timeout_set = env.get("HCCL_CONNECT_TIMEOUT").has_value();
  const auto process_log_set = env.get("ASCEND_PROCESS_LOG_PATH");
  const std::string rank_size = std::to_string(table.rank_size);
  const auto devices = table.devices_of(host->server);

  plan.processes.reserve(host->count);
  for (std::size_t i = 0; i < host->count; ++i) {
    const RankDevice& device = devices[host->first + i];
    const std::string index = std::to_string(i);
    const std::string rank = std::to_string(device.rank_id);
    ProcessSpec process;
    process.name = fmt::format("proc-rank-{}-device-{}", rank, index);
    process.rank = device.rank_id;
    process.argv = input.argv;
    process.env = base_env;
    set_env(process.env, "RANK_TABLE_FILE", rank_table.rank_table_file);
    set_env(process.env, "JOB_ID", *job_id);
    set_env(process.env, "ASCEND_DEVICE_ID", index);
    set_env(process.env, "DEVICE_ID", index);
    set_env(process.env, "RANK_ID", rank);
    set_env(process.env, "RANK_SIZE", rank_size);
    if (!hccl_timeout_set)
      set_env(process.env, "HCCL_CONNECT_TIMEOUT", std::string(kDefaultHcclConnectTimeout));
    std::string process_log;
    if (process_log_set) {
      process_log = std::string(*process_log_set);
    } else {
      process_log = join_path(log_dir, fmt::format("{}/ascend/process_log/rank_{}", *job_id, rank));
      set_env(process.env, "ASCEND_PROCESS_LOG_PATH", process_log);
    }
    process.cwd = join_path(workspace, "device" + index);
    process.group = GroupPolicy::kSession;
    process.output = OutputPolicy::kLogAndConsole;
    process.log_file = join_path(log_dir, fmt::format("{}-proc-rank-{}-device-{}.txt", *job_id, rank, index));
    process.console_prefix = fmt::format("[rank {}] ", rank);
    add_dir(plan.dirs, seen_dirs, process.cwd);
    // A relative ASCEND_PROCESS_LOG_PATH of the user's names a directory
    // under each rank's own working directory: the rank's to create.
    if (is_absolute_path(process_log))
      add_dir(plan.dirs, seen_dirs, normalize_path(process_log));
    plan.processes.push_back(std::move(process));
  }
  plan.rank_table = std::move(rank_table);
  return plan;
}

}  // namespace trainit
