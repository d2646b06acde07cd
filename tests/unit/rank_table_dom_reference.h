// The rank table reader of trainit before issue 9, as an oracle for tests
// (see rank_table_dom_reference.cpp).
#pragma once

#include <string>
#include <string_view>

namespace trainit::dom_reference {

// What the old reader made of `text`: "pending STATUS", "refused MESSAGE", or
// "accepted VERSION TEMPLATE1_JSON".
std::string read(std::string_view text, std::string_view file, unsigned max_local_devices);

}  // namespace trainit::dom_reference
