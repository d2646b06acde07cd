// Small pure text rules shared by the platform model and the planners.
//
// Everything here is total: no input makes these functions throw, allocate
// without bound, or read outside the text they are given.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace trainit {

// True when `text` may be used as one path component or DNS-label-like name:
// 1..200 bytes of [A-Za-z0-9._-], starting with a letter or digit (so never
// ".", "..", a dot file or an option-like "-x").
[[nodiscard]] bool is_safe_name(std::string_view text) noexcept;

// Appends `text` as a JSON string literal, quotes included. Control
// characters are escaped; bytes that are not valid UTF-8 become U+FFFD, so
// the output is always valid JSON.
void append_json_string(std::string& out, std::string_view text);

// `text` quoted for a one-line message: its secrets hidden (base/redact.h),
// then cut to at most `max_bytes` ("..." marks the cut), then JSON-like
// escapes, every byte outside printable ASCII as \xNN. Never contains a
// newline, nor any part of a secret.
[[nodiscard]] std::string quote_for_message(std::string_view text, std::size_t max_bytes = 80);

// `text` with its secrets hidden, then every byte outside printable ASCII
// written as \xNN (a newline included): what a message built from foreign
// text needs to stay one line.
[[nodiscard]] std::string one_line(std::string_view text);

// `n` and the noun that agrees with it: "1 rank", "0 ranks", "2 ranks";
// `plural` where the noun does not just take an "s" ("processes").
[[nodiscard]] std::string count_of(std::size_t n, std::string_view singular, std::string_view plural = {});

}  // namespace trainit
