// Reading JSON from outside without exceptions and within bounds.
//
// nlohmann-json is used only through this boundary: the document is parsed by
// an iterative SAX builder (never a recursive descent), with the size and the
// nesting depth bounded, so hostile input can neither overflow the stack nor
// make a later recursive walk (dump, destruction) deep. Nothing here throws.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace trainit {

using Json = nlohmann::json;

struct JsonLimits {
  std::size_t max_bytes = std::size_t{16} << 20;  // 16 MiB
  unsigned max_depth = 64;                        // nested arrays/objects
};

// Parses `text` as exactly one JSON document. Errors (one line, starting with
// `file`): text over max_bytes (errnum EFBIG); a syntax error (with line and
// column), nesting deeper than max_depth or a key repeated within one object
// (both with the key path where it happened): errnum EBADMSG, "the text is not
// one well-formed document", which is also how a file caught mid-write reads.
[[nodiscard]] Result<Json> parse_json(std::string_view text, std::string_view file, const JsonLimits& limits = {});

// `value` for an error message: compact ASCII-only JSON, at most `max_bytes`
// ("..." marks a cut).
[[nodiscard]] std::string json_for_message(const Json& value, std::size_t max_bytes = 80);

}  // namespace trainit
