// trainit_options_doc: docs/reference/options.md as the option table makes it.
//
//   trainit_options_doc               prints it
//   trainit_options_doc --write FILE  writes it to FILE (the update_options_doc target)
//   trainit_options_doc --check FILE  exits 0 when FILE holds it byte for byte, else 1
//                                     naming the first line that differs (the test
//                                     options_reference_matches_the_option_table)
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>

#include "tools/options_doc.h"

namespace {

constexpr std::string_view kUpdate = "cmake --build --preset release --target update_options_doc";

// The 1-based number of the first line where `a` and `b` differ.
std::size_t first_differing_line(std::string_view a, std::string_view b) {
  std::size_t line = 1;
  for (std::size_t i = 0; i < a.size() && i < b.size() && a[i] == b[i]; ++i) {
    line += a[i] == '\n' ? 1 : 0;
  }
  return line;
}

int check(const std::string& path, const std::string& expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot read it; write it with: " << kUpdate << "\n";
    return 1;
  }
  const std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (committed == expected) {
    std::cout << path << " matches the option table\n";
    return 0;
  }
  std::cerr << path << " is not what the option table (init/exec/options.cpp) makes of it: line "
            << first_differing_line(committed, expected) << " differs. Rewrite it with: " << kUpdate
            << " (and review git diff)\n";
  return 1;
}

int write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << path << ": cannot write it\n";
    return 1;
  }
  std::cout << "wrote " << path << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string text = trainit::options_reference();
  const std::string_view what = argc > 1 ? argv[1] : "";
  if (argc == 1) {
    std::cout << text;
    return std::cout ? 0 : 1;
  }
  if (argc == 3 && what == "--check") {
    return check(argv[2], text);
  }
  if (argc == 3 && what == "--write") {
    return write(argv[2], text);
  }
  std::cerr << "usage: trainit_options_doc [--check FILE | --write FILE]\n";
  return 64;
}
