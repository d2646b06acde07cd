#include "job/error_file.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "base/fd.h"
#include "base/log.h"
#include "base/redact.h"
#include "base/safe_fs.h"
#include "job/status_file.h"
#include "os/json.h"
#include "os/text.h"

namespace trainit {
namespace {

// What a cause shows of the rank's text, before escaping: enough to name
// the error and where, short of a termination message's 4 KiB.
constexpr std::size_t kMaxException = 300;
constexpr std::size_t kMaxFramePath = 200;
constexpr std::size_t kMaxFunction = 100;

// The first line of `text`, trailing blanks and a bare ": " off, its secrets
// hidden, then cut and escaped to one line of printable ASCII: hidden first,
// as a cut would leave a secret's beginning and the escapes its \xNN form.
std::string first_line(std::string_view text, std::size_t max_bytes) {
  text = text.substr(0, std::min(text.find('\n'), text.size()));
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' || text.back() == ':')) {
    text.remove_suffix(1);
  }
  return one_line(cut_utf8(redact(text), max_bytes));
}

// `  File "/w/train.py", line 10, in main` as "/w/train.py:10 in main";
// nullopt for any other line.
std::optional<std::string> frame_of(std::string_view line) {
  const auto start = line.find_first_not_of(' ');
  constexpr std::string_view kFile = "File \"";
  constexpr std::string_view kLine = "\", line ";
  constexpr std::string_view kIn = ", in ";
  if (start == std::string_view::npos || line.substr(start, kFile.size()) != kFile) {
    return std::nullopt;
  }
  line.remove_prefix(start + kFile.size());
  const auto path_end = line.rfind(kLine);
  if (path_end == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view path = line.substr(0, path_end);
  std::string_view rest = line.substr(path_end + kLine.size());
  const auto digits = std::min(rest.find_first_not_of("0123456789"), rest.size());
  if (digits == 0 || rest.substr(digits, kIn.size()) != kIn) {
    return std::nullopt;
  }
  const std::string_view number = rest.substr(0, digits);
  const std::string_view function = rest.substr(digits + kIn.size());
  return fmt::format("{}:{} in {}", first_line(path, kMaxFramePath), first_line(number, 20),
                     first_line(function, kMaxFunction));
}

// The last frame of a Python traceback: the innermost one, where the
// exception was raised (of the last exception, when they are chained).
std::string innermost_frame(std::string_view traceback) {
  std::string frame;
  while (!traceback.empty()) {
    const auto end = std::min(traceback.find('\n'), traceback.size());
    if (auto f = frame_of(traceback.substr(0, end))) {
      frame = std::move(*f);
    }
    traceback.remove_prefix(std::min(end + 1, traceback.size()));
  }
  return frame;
}

const std::string* string_at(const Json& object, const char* key) {
  if (!object.is_object()) {
    return nullptr;
  }
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

// The variable's value in `spec`, or null.
const std::string* error_file_of(const ProcessSpec& spec) {
  for (const EnvVar& var : spec.env) {
    if (var.name == kErrorFileVariable) {
      return &var.value;
    }
  }
  return nullptr;
}

// Whether `path` names a file directly in `dir`: the only error files read
// or removed are the plan's own.
bool directly_in(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/' && path.find('/', dir.size() + 1) == std::string::npos;
}

// An exception's message as one line: its first, with " ..." when more
// follows.
std::string exception_line(std::string_view text) {
  std::string line = first_line(text, kMaxException);
  const auto nl = text.find('\n');
  if (nl != std::string_view::npos && text.find_first_not_of(" \t\r\n", nl) != std::string_view::npos) {
    line += " ...";
  }
  return line;
}

// The error file at `path` for processes that run as the job's user, who
// cannot create it in trainit's directory: made anew, empty, and handed to
// them (the last start's goes: what a file holds is this start's, whatever
// the clock's granularity says of its time). 0 or -errno.
int make_for_the_job(int dir, std::string_view name) {
  if (int r = safe_fs::remove_at(dir, name); r < 0) {
    return r;
  }
  auto file = safe_fs::open_at(dir, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (!file) {
    return -file.error().errnum;
  }
  if (int r = safe_fs::give_to_job(file->get()); r < 0) {
    (void)safe_fs::remove_at(dir, name);
    return r;
  }
  return 0;
}

}  // namespace

std::optional<RootCause> parse_error_file(std::string_view text) {
  JsonLimits limits;
  limits.max_bytes = kMaxErrorFile;
  limits.max_depth = 16;
  auto doc = parse_json(text, "error file", limits);
  if (!doc || !doc->is_object()) {
    return std::nullopt;
  }
  const auto message = doc->find("message");
  if (message == doc->end()) {
    return std::nullopt;
  }
  RootCause cause;
  if (message->is_string()) {
    cause.exception = exception_line(message->get_ref<const std::string&>());
  } else if (message->is_object()) {
    if (const std::string* text_of = string_at(*message, "message")) {
      cause.exception = exception_line(*text_of);
    }
    if (const auto extra = message->find("extraInfo"); extra != message->end()) {
      if (const std::string* stack = string_at(*extra, "py_callstack")) {
        cause.frame = innermost_frame(*stack);
      }
    }
  }
  if (cause.exception.empty()) {
    return std::nullopt;
  }
  return cause;
}

std::string describe(const RootCause& cause) {
  return cause.frame.empty() ? cause.exception : fmt::format("{} at {}", cause.exception, cause.frame);
}

struct timespec file_clock_now() {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return now;
}

std::optional<RootCause> read_error_file(const std::string& path, const struct timespec& since) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    if (errno != ENOENT) {
      log_debug("error file {}: {}", path, errno_string(errno));
    }
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
      static_cast<std::size_t>(st.st_size) > kMaxErrorFile) {
    log_debug("error file {}: not a regular file of one name within {} bytes; not read", path, kMaxErrorFile);
    return std::nullopt;
  }
  if (st.st_mtim.tv_sec < since.tv_sec || (st.st_mtim.tv_sec == since.tv_sec && st.st_mtim.tv_nsec < since.tv_nsec)) {
    log_debug("error file {}: written before this start; not read", path);
    return std::nullopt;
  }
  std::string text(kMaxErrorFile + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    used += static_cast<std::size_t>(n);
  }
  if (used > kMaxErrorFile) {
    return std::nullopt;  // grew past the limit since fstat
  }
  text.resize(used);
  return parse_error_file(text);
}

std::string root_cause_of(const ProcessSpec& spec, const std::string& private_dir, const struct timespec& since) {
  const std::string* path = error_file_of(spec);
  if (path == nullptr || !directly_in(*path, private_dir)) {
    return {};
  }
  auto cause = read_error_file(*path, since);
  return cause ? ": " + describe(*cause) : std::string();
}

void prepare_error_files(const std::string& private_dir, const std::vector<ProcessSpec>& processes, bool for_the_job) {
  bool warned = false;
  std::optional<Result<Fd>> dir;  // trainit's directory, opened at the first file
  for (const ProcessSpec& p : processes) {
    const std::string* path = error_file_of(p);
    if (path == nullptr || !directly_in(*path, private_dir)) {
      continue;
    }
    if (!dir) {
      dir = safe_fs::open_dir(private_dir);
    }
    const std::string_view name = std::string_view(*path).substr(private_dir.size() + 1);
    const int r = !*dir         ? -(*dir).error().errnum
                  : for_the_job ? make_for_the_job((*dir)->get(), name)
                                : safe_fs::remove_at((*dir)->get(), name);
    if (r < 0 && for_the_job && !warned) {
      warned = true;
      log_warning(
          "error file {}: cannot make it for the job's user: {}; a failing rank's exception may be "
          "missing from the job's cause",
          *path, errno_string(-r));
    } else if (r < 0 && !for_the_job) {
      log_debug("error file {}: cannot remove the last start's: {}", *path, errno_string(-r));
    }
  }
}

}  // namespace trainit
