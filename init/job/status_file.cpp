#include "job/status_file.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>

#include "base/fd.h"
#include "base/log.h"
#include "base/redact.h"
#include "base/safe_fs.h"
#include "base/utf8.h"
#include "os/json.h"

namespace trainit {
namespace {

std::string safe_component(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 128)) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || out[0] == '.') {
    out.insert(out.begin(), '_');
  }
  return out;
}

}  // namespace

std::string this_host_name(const Environment& env) {
  std::string host;
  if (auto pod = env.current_instance_name()) {
    host = std::string(*pod);
  } else {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) {
      host = name;
    }
  }
  return host.empty() ? std::string("localhost") : host;
}

std::string default_status_path(const Environment& env) {
  return fmt::format("/tmp/trainit-status-{}.json", safe_component(this_host_name(env)));
}

std::string cause_line(std::string_view cause, int code, std::string_view state) {
  return fmt::format("{}; exit {} in state {}", cause, code, state);
}

std::string StatusFile::end_line() const {
  const int code = exit_code.value_or(cause_code);
  if (!cause.empty()) {
    return cause_line(cause, cause_code, cause_state.empty() ? state : cause_state);
  }
  return code == 0 ? fmt::format("host {}: every rank exited 0; exit 0", host)
                   : fmt::format("host {}: exit {}", host, code);
}

std::string cut_utf8(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return std::string(text);
  }
  constexpr std::string_view kMark = "...";
  if (max_bytes < kMark.size()) {
    return std::string(kMark.substr(0, max_bytes));
  }
  std::size_t cut = max_bytes - kMark.size();
  // Back to the first byte of the character the cut would split (UTF-8
  // continuation bytes are 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) {
    --cut;
  }
  return std::string(text.substr(0, cut)) + std::string(kMark);
}

Result<void> write_file_atomically(const std::string& path, const std::string& content, unsigned mode,
                                   safe_fs::Give give) {
  if (auto r = safe_fs::write_atomically(path, content, mode, give); !r) {
    return Error{fmt::format("cannot write {}: {}", path, r.error().message), r.error().errnum};
  }
  return {};
}

Result<void> StatusFile::write() {
  Json ranks_json = Json::array();
  for (const auto& r : ranks) {
    Json j;
    j["name"] = r.name;
    j["rank"] = r.rank ? Json(*r.rank) : Json(nullptr);
    j["pid"] = r.pid;
    constexpr const char* kStates[] = {"running", "exited", "failed", "stopped"};
    j["state"] = kStates[static_cast<int>(r.state)];
    j["exit_code"] = r.state != RankState::kRunning ? Json(r.code) : Json(nullptr);
    ranks_json.push_back(std::move(j));
  }
  Json doc;
  doc["schema"] = "trainit.status/v1";
  doc["state"] = state;
  doc["since"] = since;
  doc["mode"] = mode;
  doc["host"] = host;
  doc["pid"] = ::getpid();
  doc["reason"] = reason;
  doc["cause"] =
      cause.empty() ? Json(nullptr) : Json(cause_line(cause, cause_code, cause_state.empty() ? state : cause_state));
  doc["exit_code"] = exit_code ? Json(*exit_code) : Json(nullptr);
  doc["ranks"] = std::move(ranks_json);
  // Owner read-write, group read (kubectl exec as the container's user, a
  // log agent of its group), nobody else; nothing secret in it.
  const std::string text = redact(doc.dump(2, ' ', true, Json::error_handler_t::replace)) + "\n";
  auto written = write_file_atomically(path, text, 0640);
  if (written) {
    return written;
  }
  // A file that cannot be brought up to date (a full disk) must not go on
  // saying what is no longer so: it goes, and its room may take the new one.
  const size_t slash = path.rfind('/');
  auto dir = safe_fs::open_dir(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
  const int removed = dir ? safe_fs::remove_at(dir->get(), path.substr(slash + 1)) : -dir.error().errnum;
  if (removed < 0) {
    return Error{fmt::format("{}; the stale status file stays: {}", written.error().message, errno_string(-removed)),
                 written.error().errnum};
  }
  if (write_file_atomically(path, text, 0640)) {
    return Error{fmt::format("{}; written again in the room the old one left", written.error().message),
                 written.error().errnum};
  }
  return Error{fmt::format("{}; the stale status file was removed", written.error().message), written.error().errnum};
}

}  // namespace trainit
