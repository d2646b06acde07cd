#include "cmd/status_cmd.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>

#include "base/exit_code.h"
#include "base/log.h"
#include "job/status_file.h"
#include "os/json.h"
#include "os/text.h"
#include "platform/environment.h"

namespace trainit {
namespace {

constexpr std::string_view kSchema = "trainit.status/v1";
constexpr std::string_view kStatusVariable = "TRAINIT_STATUS_FILE";

constexpr std::string_view kUsage =
    "usage: trainit status [--json] [--status-file PATH]\n"
    "\n"
    "Prints what the job's status file says: the state and since when, why,\n"
    "the job's cause, and each rank with its pid, state and code; --json prints\n"
    "the file as it is. Run it inside the container (kubectl exec POD --\n"
    "trainit status); it starts nothing and never waits.\n"
    "\n"
    "  --json                the status file's JSON as it is\n"
    "  --status-file PATH    the job's status file (else TRAINIT_STATUS_FILE,\n"
    "                        else /tmp/trainit-status-<host>.json, as the job)\n"
    "  -h, --help            this text\n"
    "\n"
    "Exit status, for a probe: 0 while the job runs, the job's exit code once it\n"
    "ended; 66 no status file (no job here, or not started yet); 65 the file is\n"
    "not a trainit.status/v1 document; 64 bad usage.\n";

// What the command line asks.
struct Request {
  bool help = false;
  bool json = false;
  std::optional<std::string> path;
};

Result<Request> read_request(int argc, const char* const* argv) {
  Request request;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      request.help = true;
    } else if (arg == "--json") {
      request.json = true;
    } else if (arg == "--status-file" || arg.starts_with("--status-file=")) {
      std::string_view value;
      if (arg.size() > std::string_view("--status-file").size()) {
        value = arg.substr(arg.find('=') + 1);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return Error{"--status-file needs a value", 0};
      }
      if (value.empty() || value[0] != '/') {
        return Error{fmt::format("--status-file {}: expected an absolute path", quote_for_message(value)), 0};
      }
      request.path = std::string(value);
    } else {
      return Error{fmt::format("unknown argument {}", quote_for_message(arg)), 0};
    }
  }
  return request;
}

// The file the job writes, as the job finds it from the same environment.
Result<std::string> status_path(const Request& request, const Environment& env) {
  if (request.path) {
    return *request.path;
  }
  if (auto value = env.get(kStatusVariable); value && !value->empty()) {
    if ((*value)[0] != '/') {
      return Error{fmt::format("{}={}: expected an absolute path", kStatusVariable, quote_for_message(*value)), 0};
    }
    return std::string(*value);
  }
  return default_status_path(env);
}

// --- reading the document ------------------------------------------------------

Error not_status(std::string_view path, std::string_view why) {
  return Error{fmt::format("{}: not a {} document: {}", one_line(path), kSchema, why), EBADMSG};
}

// `doc[key]` as text: a string, or "" for null or nothing; false for any
// other type.
bool text_at(const Json& doc, const char* key, std::string& out) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) {
    out.clear();
    return true;
  }
  if (!it->is_string()) {
    return false;
  }
  out = it->get<std::string>();
  return true;
}

// `doc[key]` as an integer in [min, max], or nullopt for null or nothing;
// false for anything else.
bool integer_at(const Json& doc, const char* key, long long min, long long max, std::optional<long long>& out) {
  const auto it = doc.find(key);
  out.reset();
  if (it == doc.end() || it->is_null()) {
    return true;
  }
  if (!it->is_number_integer()) {
    return false;
  }
  const long long value = it->is_number_unsigned() ? static_cast<long long>(std::min<std::uint64_t>(
                                                         it->get<std::uint64_t>(), static_cast<std::uint64_t>(max) + 1))
                                                   : it->get<long long>();
  if (value < min || value > max) {
    return false;
  }
  out = value;
  return true;
}

Result<StatusView::Rank> parse_rank(const Json& item, std::size_t index, std::string_view path) {
  const std::string where = fmt::format("ranks[{}]", index);
  if (!item.is_object()) {
    return not_status(path, where + " is not an object");
  }
  StatusView::Rank rank;
  std::optional<long long> number, pid, code;
  if (!text_at(item, "name", rank.name) || !text_at(item, "state", rank.state)) {
    return not_status(path, where + ": name and state must be strings");
  }
  if (!integer_at(item, "rank", 0, 0xffffffffLL, number) || !integer_at(item, "pid", 0, 0x7fffffffLL, pid) ||
      !integer_at(item, "exit_code", 0, 255, code)) {
    return not_status(path, where + ": rank, pid or exit_code out of range");
  }
  if (number) {
    rank.rank = static_cast<unsigned>(*number);
  }
  rank.pid = pid.value_or(0);
  if (code) {
    rank.exit_code = static_cast<int>(*code);
  }
  return rank;
}

// --- what a person reads ---------------------------------------------------

// Days since 1970-01-01 as a proleptic Gregorian date (H. Hinnant's
// civil_from_days).
void civil_from_days(long long z, long long& year, unsigned& month, unsigned& day) {
  z += 719468;
  const long long era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  day = doy - (153 * mp + 2) / 5 + 1;
  month = mp < 10 ? mp + 3 : mp - 9;
  year = static_cast<long long>(yoe) + era * 400 + (month <= 2 ? 1 : 0);
}

// Wall-clock seconds as "2026-01-05 12:00:03 UTC". UTC, not the local time
// zone: libc's time-zone code (tzset reads TZ and /etc/localtime through
// sscanf and strtod) would add 113 KiB to the static binary, and tens of kB
// to exec mode's resident memory (the kernel maps the pages around each
// fault, wherever the linker put them), for one line of this command.
std::string utc_time(double seconds_since_epoch) {
  const auto t = static_cast<long long>(std::floor(seconds_since_epoch));
  const long long days = (t >= 0 ? t : t - 86399) / 86400;
  const long long second_of_day = t - days * 86400;
  long long year = 0;
  unsigned month = 0, day = 0;
  civil_from_days(days, year, month, day);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC", year, month, day, second_of_day / 3600,
                     second_of_day % 3600 / 60, second_of_day % 60);
}

std::string code_text(const std::optional<int>& code) {
  return code ? std::to_string(*code) : std::string("-");
}

// One row per rank, in columns as wide as their widest cell.
std::string rank_table(const std::vector<StatusView::Rank>& ranks) {
  std::vector<std::array<std::string, 5>> rows;
  rows.push_back({"NAME", "RANK", "PID", "STATE", "CODE"});
  for (const auto& r : ranks) {
    rows.push_back({one_line(r.name), r.rank ? std::to_string(*r.rank) : std::string("-"), std::to_string(r.pid),
                    one_line(r.state), code_text(r.exit_code)});
  }
  std::array<std::size_t, 5> width{};
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += c + 1 < row.size() ? fmt::format("{:<{}}  ", row[c], width[c]) : row[c];
    }
    text += line + "\n";
  }
  return text;
}

}  // namespace

Result<StatusView> parse_status(std::string_view text, std::string_view path) {
  JsonLimits limits;
  limits.max_bytes = kMaxStatusFile;
  limits.max_depth = 8;
  auto parsed = parse_json(text, path, limits);
  if (!parsed) {
    return not_status(path, parsed.error().message);
  }
  const Json& doc = *parsed;
  if (!doc.is_object()) {
    return not_status(path, "not a JSON object");
  }
  std::string schema;
  if (!text_at(doc, "schema", schema) || schema != kSchema) {
    return not_status(path, fmt::format("its schema is not \"{}\"", kSchema));
  }
  StatusView status;
  if (!text_at(doc, "state", status.state) || status.state.empty()) {
    return not_status(path, "no state");
  }
  const auto since = doc.find("since");
  if (since == doc.end() || !since->is_number()) {
    return not_status(path, "no since");
  }
  status.since = since->get<double>();
  // What a clock gives, 1970 to 9999: the date's arithmetic holds there.
  constexpr double kLastSecond = 253402300799.0;  // 9999-12-31 23:59:59 UTC
  if (!(status.since >= 0 && status.since <= kLastSecond)) {
    return not_status(path, "since is not a time from 1970 to 9999");
  }
  std::optional<long long> pid, code;
  if (!text_at(doc, "mode", status.mode) || !text_at(doc, "host", status.host) ||
      !text_at(doc, "reason", status.reason) || !text_at(doc, "cause", status.cause)) {
    return not_status(path, "mode, host, reason and cause must be strings or null");
  }
  if (!integer_at(doc, "pid", 0, 0x7fffffffLL, pid) || !integer_at(doc, "exit_code", 0, 255, code)) {
    return not_status(path, "pid or exit_code out of range");
  }
  status.pid = pid.value_or(0);
  if (code) {
    status.exit_code = static_cast<int>(*code);
  }
  if (status.state == "exit" && !status.exit_code) {
    return not_status(path, "the job is in state exit without its exit_code");
  }
  if (const auto ranks = doc.find("ranks"); ranks != doc.end() && !ranks->is_null()) {
    if (!ranks->is_array()) {
      return not_status(path, "ranks is not an array");
    }
    for (std::size_t i = 0; i < ranks->size(); ++i) {
      auto rank = parse_rank((*ranks)[i], i, path);
      if (!rank) {
        return rank.error();
      }
      status.ranks.push_back(std::move(*rank));
    }
  }
  return status;
}

std::string duration_text(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, std::floor(seconds)));
  if (s < 60) {
    return fmt::format("{} s", s);
  }
  if (s < 3600) {
    return fmt::format("{} min {} s", s / 60, s % 60);
  }
  if (s < 86400) {
    return fmt::format("{} h {} min", s / 3600, s % 3600 / 60);
  }
  return fmt::format("{} d {} h", s / 86400, s % 86400 / 3600);
}

std::string render_status(const StatusView& status, double now) {
  const double age = now - status.since;
  std::string text = fmt::format(
      "state   {} since {} ({})\n", one_line(status.state), utc_time(status.since),
      age > -1 ? duration_text(std::max(age, 0.0)) + " ago" : duration_text(-age) + " ahead of this machine's clock");
  if (!status.reason.empty()) {
    text += fmt::format("reason  {}\n", one_line(status.reason));
  }
  text += fmt::format("job     {} on {}, trainit pid {}\n", status.mode.empty() ? "-" : one_line(status.mode),
                      status.host.empty() ? "-" : one_line(status.host), status.pid);
  text += fmt::format("cause   {}\n", status.cause.empty() ? "none" : one_line(status.cause));
  text += status.exit_code ? fmt::format("exit    {}\n", *status.exit_code) : std::string("exit    - (not ended)\n");
  text += fmt::format("{}:\n", count_of(status.ranks.size(), "rank"));
  if (!status.ranks.empty()) {
    text += rank_table(status.ranks);
  }
  return text;
}

int status_exit_code(const StatusView& status) {
  return status.state == "exit" ? status.exit_code.value_or(exit_code::kDataError) : 0;
}

CommandOutput status_command(int argc, const char* const* argv, const char* const* envp, const FileSystem& fs,
                             double now) {
  auto failed = [](int code, std::string_view message) {
    return CommandOutput{code, "", fmt::format("trainit: error: status: {}\n", message)};
  };
  try {
    auto request = read_request(argc, argv);
    if (!request) {
      return failed(exit_code::kUsage, request.error().message + " (see trainit status --help)");
    }
    if (request->help) {
      return {0, std::string(kUsage), ""};
    }
    const Environment env = Environment::from_envp(envp);
    auto path = status_path(*request, env);
    if (!path) {
      return failed(exit_code::kUsage, path.error().message);
    }
    auto text = fs.read_file(*path, kMaxStatusFile);
    if (!text && text.error().errnum == ENOENT) {
      return failed(exit_code::kNoInput,
                    fmt::format("no status file at {}: no job runs here, or it has not started (exec mode writes "
                                "none; --status-file or {} name another)",
                                one_line(*path), kStatusVariable));
    }
    if (!text && (text.error().errnum == EACCES || text.error().errnum == EPERM)) {
      return failed(exit_code::kNoPermission,
                    fmt::format("cannot read the status file {}: permission denied (trainit writes it mode 0640, "
                                "in directories its user and group may search: read it as one of them)",
                                one_line(*path)));
    }
    if (!text) {  // there, but no file to read (a directory, a FIFO, too large) or the disk failed
      return failed(text.error().errnum == EIO ? exit_code::kIoError : exit_code::kDataError,
                    one_line(text.error().message));
    }
    auto status = parse_status(*text, *path);
    if (!status) {
      return failed(exit_code::kDataError, status.error().message);
    }
    const int code = status_exit_code(*status);
    if (request->json) {
      return {code, std::move(*text), ""};
    }
    return {code, render_status(*status, now), ""};
  } catch (const std::exception& e) {
    return failed(exit_code::kSoftware, one_line(e.what()));
  }
}

int status_main(int argc, char** argv, char** envp) {
  RealFileSystem fs;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CommandOutput result = status_command(argc, argv, envp, fs, now);
  if (int r = write_all(STDOUT_FILENO, result.out); r < 0) {
    (void)write_all(STDERR_FILENO,
                    fmt::format("trainit: error: status: cannot write to stdout: {}\n", errno_string(-r)));
    return exit_code::kIoError;
  }
  (void)write_all(STDERR_FILENO, result.err);
  return result.exit_code;
}

}  // namespace trainit
