#include "status_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "base/fd.h"
#include "base/log.h"
#include "base/redact.h"
#include "platform/json.h"

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

std::string default_status_path(const Environment& env) {
  std::string host;
  if (auto pod = env.current_instance_name()) {
    host = std::string(*pod);
  } else {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) {
      host = name;
    }
  }
  return fmt::format("/tmp/trainit-status-{}.json", safe_component(host.empty() ? "localhost" : host));
}

Result<void> write_file_atomically(const std::string& path, const std::string& content, unsigned mode) {
  // O_EXCL: a name someone else created (a link planted in /tmp, say) is
  // never written through; a stale one of ours is removed and made anew.
  std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd && errno == EEXIST && ::unlink(tmp.c_str()) == 0) {
    fd.reset(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  }
  if (!fd) {
    int e = errno;
    return Error{fmt::format("cannot write {}: {}", path, errno_string(e)), e};
  }
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      int e = n < 0 ? errno : ENOSPC;
      ::unlink(tmp.c_str());
      return Error{fmt::format("cannot write {}: {}", path, errno_string(e)), e};
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fchmod(fd.get(), mode) < 0 || ::close(fd.release()) < 0 || ::rename(tmp.c_str(), path.c_str()) < 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Error{fmt::format("cannot write {}: {}", path, errno_string(e)), e};
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
  doc["cause"] = cause.empty() ? Json(nullptr) : Json(cause);
  doc["exit_code"] = exit_code ? Json(*exit_code) : Json(nullptr);
  doc["ranks"] = std::move(ranks_json);
  // Owner read-write, group read (kubectl exec as the container's user, a
  // log agent of its group), nobody else; nothing secret in it.
  return write_file_atomically(path, redact(doc.dump(2, ' ', true, Json::error_handler_t::replace)) + "\n", 0640);
}

}  // namespace trainit
