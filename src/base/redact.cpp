#include "base/redact.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/utf8.h"

namespace trainit {
namespace {

std::vector<std::string>& secrets() {
  static std::vector<std::string> list;
  return list;
}

constexpr char kHex[] = "0123456789abcdef";

void append_hex(std::string& out, std::string_view prefix, unsigned value, int digits) {
  out += prefix;
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) {
    out += kHex[(value >> shift) & 0xf];
  }
}

// The JSON escape of `c`, or "" where JSON writes it as it is.
std::string json_escape(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  std::string out;
  if (c < 0x20) {
    append_hex(out, "\\u", c, 4);
  }
  return out;
}

// The forms a secret takes in what trainit writes, each without quotes:
// as it is; in JSON written byte for byte (UTF-8 kept) and as
// nlohmann::json's dump with ensure_ascii writes it (the status file:
// \uXXXX beyond ASCII); as one_line() and quote_for_message() escape it
// (os/text.h: \xNN per byte outside printable ASCII, the second with
// \" and \\ too).
std::vector<std::string> written_forms(std::string_view value) {
  std::string one_line, quoted;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
    }
    if (u < 0x20 || u >= 0x7f) {
      append_hex(one_line, "\\x", u, 2);
      append_hex(quoted, "\\x", u, 2);
    } else {
      one_line += c;
      quoted += c;
    }
  }
  std::string json, ascii_json;
  for (size_t at = 0; at < value.size();) {
    const auto u = static_cast<unsigned char>(value[at]);
    if (u < 0x80) {
      const std::string escape = json_escape(u);
      json += escape.empty() ? std::string(1, value[at]) : escape;
      if (u == 0x7f) {
        append_hex(ascii_json, "\\u", u, 4);
      } else {
        ascii_json += escape.empty() ? std::string(1, value[at]) : escape;
      }
      ++at;
      continue;
    }
    const std::size_t length = utf8_length_at(value, at);
    const std::size_t n = length == 0 ? 1 : length;
    const char32_t cp = utf8_decode(value, at, n);
    json.append(value.substr(at, n));
    if (length == 0) {
      append_hex(ascii_json, "\\u", 0xfffd, 4);  // what its error handler "replace" writes
    } else if (cp <= 0xffff) {
      append_hex(ascii_json, "\\u", cp, 4);
    } else {
      append_hex(ascii_json, "\\u", 0xd800 + ((cp - 0x10000) >> 10), 4);
      append_hex(ascii_json, "\\u", 0xdc00 + ((cp - 0x10000) & 0x3ff), 4);
    }
    at += n;
  }
  return {std::string(value), std::move(json), std::move(ascii_json), std::move(one_line), std::move(quoted)};
}

// The registered secret that starts `text`, longest first; empty: none.
std::string_view secret_at(std::string_view text) noexcept {
  for (const std::string& s : secrets()) {
    if (text.substr(0, s.size()) == s) {
      return s;
    }
  }
  return {};
}

// Whether `haystack` holds `needle` (upper-case ASCII letters) in any case.
// A byte ANDed with ~0x20 is an upper-case letter exactly when it is that
// letter in either case: the C locale's toupper(), without a call per byte
// (PID 1 asks this of every variable of its environment before it spawns,
// and a pod's environment holds hundreds).
bool contains_upper(std::string_view haystack, std::string_view needle) noexcept {
  const auto folded = [](char c) { return static_cast<char>(static_cast<unsigned char>(c) & 0xdf); };
  for (size_t at = 0; at + needle.size() <= haystack.size(); ++at) {
    size_t k = 0;
    while (k < needle.size() && folded(haystack[at + k]) == needle[k]) {
      ++k;
    }
    if (k == needle.size()) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool is_secret_name(std::string_view name) noexcept {
  if (contains_upper(name.substr(0, 4), "CRED")) {
    return true;
  }
  for (std::string_view word : {"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"}) {
    if (contains_upper(name, word)) {
      return true;
    }
  }
  return false;
}

void add_secret(std::string_view value) {
  if (value.size() < kMinSecretSize) {
    return;
  }
  auto& list = secrets();
  for (std::string& form : written_forms(value)) {
    if (std::find(list.begin(), list.end(), form) != list.end()) {
      continue;
    }
    // Longest first: a secret that holds another is hidden whole.
    auto at = std::find_if(list.begin(), list.end(), [&form](const std::string& s) { return s.size() < form.size(); });
    list.insert(at, std::move(form));
  }
}

bool glob_match(std::string_view pattern, std::string_view name) noexcept {
  // The classic backtracking match: on a mismatch, the last '*' takes one
  // more character.
  size_t p = 0;
  size_t n = 0;
  size_t star = std::string_view::npos;
  size_t star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_n = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

void register_secret_variables(const char* const* envp, const std::vector<std::string>& patterns,
                               bool (*is_setting)(std::string_view name) noexcept) {
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    const std::string_view name = entry.substr(0, eq);
    const bool listed =
        std::any_of(patterns.begin(), patterns.end(), [name](const std::string& p) { return glob_match(p, name); });
    if (listed || (is_secret_name(name) && !is_setting(name))) {
      add_secret(entry.substr(eq + 1));
    }
  }
}

bool has_secrets() noexcept {
  return !secrets().empty();
}

std::string redact(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    if (std::string_view s = secret_at(text); !s.empty()) {
      out += kRedactedText;
      text.remove_prefix(s.size());
    } else {
      out += text.front();
      text.remove_prefix(1);
    }
  }
  return out;
}

std::size_t redact_into(std::string_view text, char* out, std::size_t size) noexcept {
  std::size_t n = 0;
  auto put = [&](std::string_view piece) {
    const std::size_t k = std::min(piece.size(), size - n);
    std::copy_n(piece.data(), k, out + n);
    n += k;
  };
  while (!text.empty() && n < size) {
    if (std::string_view s = secret_at(text); !s.empty()) {
      put(kRedactedText);
      text.remove_prefix(s.size());
    } else {
      put(text.substr(0, 1));
      text.remove_prefix(1);
    }
  }
  return n;
}

}  // namespace trainit
