#include "platform/rank_table_common.h"

#include <algorithm>

#include "base/number.h"
#include "os/text.h"

namespace trainit::rank_table_internal {

std::string Seen::message() const {
  if (kind != Kind::kScalar)
    return json_for_message_of_form(text);
  JsonScalar value = scalar;
  if (value.type == JsonScalar::Type::kString)
    value.string = text;
  return json_for_message(value);
}

Seen Seen::string_value(std::string_view s) {
  Seen v;
  JsonScalar value;
  value.type = JsonScalar::Type::kString;
  value.string = s;
  v.set(value);
  return v;
}

Seen Seen::empty_array() {
  Seen v;
  v.set_container(false, "[]");
  return v;
}

bool to_number(const Seen& value, std::uint64_t* out, std::string* problem) {
  if (value.kind == Seen::Kind::kScalar) {
    switch (value.scalar.type) {
      case JsonScalar::Type::kUnsigned:
        *out = value.scalar.natural;
        return true;
      case JsonScalar::Type::kInteger:
        if (value.scalar.integer < 0) {
          *problem = "negative";
          return false;
        }
        *out = static_cast<std::uint64_t>(value.scalar.integer);
        return true;
      case JsonScalar::Type::kFloat:
        *problem = "not an integer";
        return false;
      case JsonScalar::Type::kString: {
        if (auto n = parse_decimal(value.text)) {
          *out = *n;
          return true;
        }
        const std::string& t = value.text;
        bool digits =
            !t.empty() && t[0] != '0' && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
        *problem = digits ? "out of range"
                          : "not a decimal number (digits only: no sign, space, hex, fraction or leading zero)";
        return false;
      }
      default:
        break;
    }
  }
  *problem = "not a number (a decimal string like \"8\", or a JSON integer)";
  return false;
}

Seen kept_number(std::uint64_t value, bool written_as_string) {
  Seen v;
  JsonScalar scalar;
  const std::string digits = std::to_string(value);
  if (written_as_string) {
    scalar.type = JsonScalar::Type::kString;
    scalar.string = digits;
  } else {
    scalar.type = JsonScalar::Type::kUnsigned;
    scalar.natural = value;
  }
  v.set(scalar);
  return v;
}

Error TableChecks::fail(std::string_view path, const Seen& value, std::string_view problem) const {
  return Error{fmt::format("{}: {} = {}: {}", one_line(file_), path, value.message(), problem)};
}

Error TableChecks::fail_file(std::string_view problem) const {
  return Error{fmt::format("{}: {}", one_line(file_), problem)};
}

}  // namespace trainit::rank_table_internal
