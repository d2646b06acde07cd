#include "base/redact.h"

#include <algorithm>
#include <vector>

namespace trainit {
namespace {

std::vector<std::string>& secrets() {
  static std::vector<std::string> list;
  return list;
}

// The value as a JSON string holds it, without the quotes.
std::string json_escaped(std::string_view value) {
  std::string out;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out;
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
  for (std::string form : {std::string(value), json_escaped(value)}) {
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
