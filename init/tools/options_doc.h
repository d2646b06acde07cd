// The options reference, docs/reference/options.md, made from the option
// table (cli.h) like --help: every option with its flags, variables, values,
// default, help, and what `trainit plan` makes of it.
//
// The file in the repository is this function's output, byte for byte: the
// test options_reference_matches_the_option_table fails when they differ, and
//   cmake --build --preset release --target update_options_doc
// writes it again (trainit_options_doc, init/tools/options_doc_main.cpp).
#pragma once

#include <string>

namespace trainit {

// The Markdown text of docs/reference/options.md (ends with a newline).
[[nodiscard]] std::string options_reference();

}  // namespace trainit
