// Fuzz target: the environment, geometry and cluster model
// (src/platform/environment, geometry, cluster) and the planners that read
// it (make_plan, every mode).
//
// The input is readable text, one item a line ("\n" and "\\" inside an item
// stand for a newline and a backslash): NAME=VALUE is a variable of
// trainit's environment, as main() gets it (a line without '=' too: the
// environment drops it); /PATH=CONTENT is a file of the file system the
// planners read (rank tables, /etc/volcano/*.host), /PATH alone a
// directory. The seeds are the golden cases' environments and files.
//
// Properties, besides no sanitizer finding: every error is one line; paths
// come out absolute and normal; a geometry's index is below its host count
// and every peer name is a DNS name; a cluster's index is below its host
// count, and it names every host when it says so; a plan gives each process
// an argv and an environment with each name once, absolute paths, each rank
// once; the plan of the mode auto picks has its JSON form.
#include "platform/environment.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "os/fs.h"
#include "os/path.h"
#include "plan/plan.h"
#include "plan/plan_json.h"
#include "platform/cluster.h"
#include "platform/geometry.h"

namespace trainit {
namespace {

template <typename T>
void check_error(const Result<T>& r) {
  if (!r.ok())
    FUZZ_CHECK(fuzz::one_line(r.error().message) && !r.error().message.empty(), r.error().message);
}

void check_accessors(const Environment& env, const FileSystem& fs) {
  check_error(env.num_hosts());
  check_error(env.num_gpus());
  check_error(env.task_index());
  check_error(env.vj_name());
  auto job_id = env.job_id();
  check_error(job_id);
  auto location = env.rank_table_location(fs);
  check_error(location);
  if (location)
    FUZZ_CHECK(location->path.starts_with('/') && normalize_path(location->path) == location->path, location->path);
  auto mount = env.mount_path();
  check_error(mount);
  if (mount && *mount)
    FUZZ_CHECK(normalize_path(**mount) == **mount, **mount);
  check_error(env.run_method());
  check_error(env.torchrun_master_port());
  check_error(env.msrun_cluster_timeout());
  check_error(env.tf_ps_hosts());
  check_error(env.tf_worker_hosts());
  for (unsigned index : {0u, 1u, 65535u})
    check_error(env.peer_name(index));
  check_error(env.home());
  check_error(env.sshd_port());
  check_error(env.mpi_slots());
  check_error(env.mpi_interfaces());
  (void)env.has_rank_table_variable();
  (void)env.ms_ranktable_enable();
}

void check_geometry(const Environment& env, const std::optional<KnownGeometry>& known) {
  auto geometry = job_geometry(env, known);
  check_error(geometry);
  if (!geometry)
    return;
  FUZZ_CHECK(geometry->hosts >= 1 && geometry->index < geometry->hosts, "index not below the host count");
  FUZZ_CHECK(geometry->peers.size() == geometry->hosts, "not one peer per host");
  for (const std::string& peer : geometry->peers)
    FUZZ_CHECK(is_dns_name(peer), peer);
}

void check_cluster(const Environment& env, const FileSystem& fs) {
  auto cluster = cluster_from_env(env, fs);
  check_error(cluster);
  if (!cluster)
    return;
  FUZZ_CHECK(cluster->hosts >= 1 && cluster->index < cluster->hosts, cluster->source);
  if (cluster->all_named)
    FUZZ_CHECK(cluster->peers.size() == cluster->hosts, cluster->source);
  for (const std::string& line : cluster->disagreements)
    FUZZ_CHECK(fuzz::one_line(line), line);
}

bool absolute(const std::string& path) {
  return path.starts_with('/');
}

// What spawn() and the file writer rely on: a whole environment per process,
// each name once and a name at all; absolute paths; a rank once.
void check_plan(const Plan& plan) {
  std::set<unsigned> ranks;
  for (const ProcessSpec& p : plan.processes) {
    FUZZ_CHECK(!p.argv.empty(), p.name);
    FUZZ_CHECK(p.cwd.empty() || absolute(p.cwd), p.name + ": cwd " + p.cwd);
    FUZZ_CHECK(p.log_file.empty() || absolute(p.log_file), p.name + ": log file " + p.log_file);
    if (p.rank)
      FUZZ_CHECK(ranks.insert(*p.rank).second, p.name + ": a rank twice");
    std::set<std::string_view> names;
    for (const EnvVar& var : p.env) {
      FUZZ_CHECK(!var.name.empty() && var.name.find('=') == std::string::npos, p.name + ": variable " + var.name);
      FUZZ_CHECK(names.insert(var.name).second, p.name + ": variable " + var.name + " twice");
    }
  }
  for (const std::string& dir : plan.dirs)
    FUZZ_CHECK(absolute(dir), "dir " + dir);
  for (const FileSpec& file : plan.files)
    FUZZ_CHECK(absolute(file.path), "file " + file.path);
}

void check_plans(const Environment& env, const FileSystem& fs) {
  PlanInput input;
  input.argv = {"python", "/home/ma-user/modelarts/user-job-dir/code/train.py", "--epochs=1"};
  input.env = env;
  input.fs = &fs;
  std::vector<RequestedMode> modes = {kAutoMode};
  for (Mode mode : {Mode::kExec, Mode::kAscend, Mode::kMpi, Mode::kTorchrun, Mode::kTorchrunExec, Mode::kMsrun,
                    Mode::kMsrunExec, Mode::kPytorch, Mode::kTensorflow})
    modes.emplace_back(mode);
  for (RequestedMode mode : modes) {
    input.options.mode = mode;
    input.peer_addresses.clear();
    auto plan = make_plan(input);
    check_error(plan);
    if (!plan)
      continue;
    check_plan(*plan);
    // The JSON form (half the time of all this) for the plan `trainit plan`
    // shows without --mode only.
    if (mode == kAutoMode)
      FUZZ_CHECK(!plan_to_json(*plan).empty(), "no JSON form");
    // The run makes it again once the peers are resolved (a few of them here).
    if (plan->replan_with_addresses && plan->hosts && plan->hosts->hosts <= 64) {
      for (unsigned i = 0; i < plan->hosts->hosts; ++i)
        input.peer_addresses.push_back("10.1.0." + std::to_string(i + 1));
      auto again = make_plan(input);
      check_error(again);
      if (again)
        check_plan(*again);
    }
  }
}

}  // namespace
}  // namespace trainit

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainit;
  static fuzz::CheckedLog log;
  std::vector<std::string> entries;
  MemoryFileSystem fs;
  for (std::string& line : fuzz::unescaped_lines(fuzz::as_text(data, size))) {
    if (!line.starts_with('/')) {
      entries.push_back(std::move(line));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos)
      fs.add_dir(line);
    else
      fs.add_file(line.substr(0, eq), line.substr(eq + 1));
  }
  const Environment env = Environment::from_strings(entries);
  check_accessors(env, fs);
  check_geometry(env, std::nullopt);
  check_geometry(env, KnownGeometry{2, "the rank table lists 2 servers"});
  check_geometry(env, KnownGeometry{3, "the rank table lists 3 servers"});
  check_cluster(env, fs);
  (void)visible_accelerators(fs);
  check_plans(env, fs);
  return 0;
}
