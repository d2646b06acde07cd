#include "plan/plan_json.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "plan/mpi.h"

namespace trainit {
namespace {

using Ordered = nlohmann::ordered_json;

Ordered rank_table_json(const RankTablePlan& rt) {
  Ordered out = Ordered::object();
  out["source"] = rt.source;
  out["ready"] = rt.ready;
  if (!rt.ready) {
    out["pending"] = rt.pending;
    return out;
  }
  out["format"] = format_name(rt.format);
  if (rt.format == RankTableFormat::kTemplate1)
    out["version"] = rt.version;
  out["rank_size"] = rt.rank_size;
  out["server_id"] = rt.server_id;
  if (rt.format == RankTableFormat::kTemplate2)
    out["pod_name"] = rt.pod_name;
  out["rank_table_file"] = rt.rank_table_file;
  return out;
}

Ordered hosts_json(const HostsPlan& hosts) {
  Ordered out = Ordered::object();
  out["hosts"] = hosts.hosts;
  out["index"] = hosts.index;
  out["control_port"] = hosts.control_port;
  out["peers"] = hosts.peers;
  return out;
}

Ordered process_json(const ProcessSpec& p);

Ordered launch_json(const LaunchPlan& launch) {
  Ordered out = Ordered::object();
  out["source"] = launch.source;
  out["disagreements"] = launch.disagreements;
  out["hosts"] = launch.hosts;
  out["index"] = launch.index;
  out["nproc_per_host"] = launch.nproc;
  out["master_addr"] = launch.master_addr;
  out["master_port"] = launch.master_port;
  out["rendezvous_timeout"] = launch.rendezvous_timeout ? Ordered(*launch.rendezvous_timeout) : Ordered(nullptr);
  out["notes"] = launch.notes;
  return out;
}

Ordered sshd_json(const SshdPlan& sshd) {
  Ordered out = Ordered::object();
  out["path"] = sshd.sshd_path;
  out["port"] = sshd.port;
  out["config_path"] = sshd.config_path;
  out["config"] = sshd.config;
  Ordered keys = Ordered::array();
  for (const std::string& key : sshd.host_keys) {
    Ordered k = Ordered::object();
    k["path"] = key;
    k["generate"] = host_key_generation_argv(key);
    keys.push_back(std::move(k));
  }
  out["host_keys"] = std::move(keys);
  out["authorized_keys"] = sshd.authorized_keys;
  out["user"] = sshd.user.empty() ? Ordered(nullptr) : Ordered(sshd.user);
  out["process"] = process_json(sshd.process);
  return out;
}

Ordered mpi_json(const MpiPlan& mpi) {
  Ordered out = Ordered::object();
  out["host0"] = mpi.host0;
  out["slots"] = mpi.slots;
  if (!mpi.host0)
    return out;
  out["hostfile_path"] = mpi.hostfile_path;
  out["tune_path"] = mpi.tune_path;
  out["ssh_config_path"] = mpi.ssh_config_path.empty() ? Ordered(nullptr) : Ordered(mpi.ssh_config_path);
  if (!mpi.ssh_config_path.empty())
    out["peers_by"] = mpi.addresses ? "address" : "name";
  return out;
}

Ordered process_json(const ProcessSpec& p) {
  Ordered out = Ordered::object();
  out["name"] = p.name;
  if (p.rank)
    out["rank"] = *p.rank;
  out["argv"] = p.argv;
  out["cwd"] = p.cwd.empty() ? Ordered(nullptr) : Ordered(p.cwd);
  Ordered env = Ordered::object();
  for (const EnvVar& var : p.env)
    env[var.name] = is_secret_name(var.name) ? std::string(kRedacted) : var.value;
  out["env"] = std::move(env);
  out["group"] = p.group == GroupPolicy::kSession ? "session" : "process_group";
  Ordered output = Ordered::object();
  if (p.output == OutputPolicy::kInherit) {
    output["mode"] = "inherit";
  } else {
    output["mode"] = "log_and_console";
    output["log_file"] = p.log_file;
    output["console_prefix"] = p.console_prefix;
  }
  out["output"] = std::move(output);
  return out;
}

Ordered privileges_json(const PrivilegesPlan& p) {
  Ordered out = Ordered::object();
  out["user"] = p.user.empty() ? Ordered(nullptr) : Ordered(p.user);
  out["home"] = p.home.empty() ? Ordered(nullptr) : Ordered(p.home);
  out["caps"] = p.caps;
  Ordered sets = Ordered::object();
  sets["bounding"] = p.bounding;
  sets["permitted"] = p.permitted;
  sets["effective"] = p.effective;
  sets["inheritable"] = p.inheritable;
  sets["ambient"] = p.ambient;
  out["sets"] = std::move(sets);
  out["no_new_privs"] = p.no_new_privs;
  return out;
}

}  // namespace

std::string plan_to_json(const Plan& plan) {
  Ordered out = Ordered::object();
  out["schema"] = kPlanSchema;
  out["mode"] = mode_name(plan.mode);
  out["signals"] = plan.signals == SignalPolicy::kStop ? "stop" : "forward";
  Ordered states = Ordered::array();
  for (State s : plan.states)
    states.push_back(state_name(s));
  out["states"] = std::move(states);
  if (plan.rank_table)
    out["rank_table"] = rank_table_json(*plan.rank_table);
  if (plan.launch)
    out["launch"] = launch_json(*plan.launch);
  if (plan.hosts)
    out["hosts"] = hosts_json(*plan.hosts);
  if (!plan.private_dir.empty())
    out["private_dir"] = plan.private_dir;
  if (plan.sshd)
    out["sshd"] = sshd_json(*plan.sshd);
  if (plan.mpi)
    out["mpi"] = mpi_json(*plan.mpi);
  if (plan.restarts)
    out["restarts"] = *plan.restarts == kUnlimitedRestarts ? Ordered("unlimited") : Ordered(*plan.restarts);
  out["dirs"] = plan.dirs;
  Ordered files = Ordered::array();
  for (const FileSpec& f : plan.files) {
    Ordered file = Ordered::object();
    file["path"] = f.path;
    file["mode"] = fmt::format("{:04o}", f.mode);
    file["content"] = f.content;
    files.push_back(std::move(file));
  }
  out["files"] = std::move(files);
  Ordered processes = Ordered::array();
  for (const ProcessSpec& p : plan.processes)
    processes.push_back(process_json(p));
  out["processes"] = std::move(processes);
  if (plan.privileges)
    out["privileges"] = privileges_json(*plan.privileges);
  Ordered settings = Ordered::object();
  for (const Setting& s : plan.settings) {
    Ordered setting = Ordered::object();
    setting["value"] = s.value ? Ordered(*s.value) : Ordered(nullptr);
    setting["source"] = s.source;
    settings[s.name] = std::move(setting);
  }
  out["settings"] = std::move(settings);
  return out.dump(2, ' ', false, Ordered::error_handler_t::replace) + "\n";
}

}  // namespace trainit
