// Exec mode runs none of the job modes' code and reads none of their data.
// The linker puts both in sections of their own (init/job_modes.ld:
// .text.job_modes after .text, .rodata.job_modes after .rodata), so that an
// idle PID 1 in exec mode keeps them out of memory. The kernel maps a file's
// cached pages in 64 KiB windows around each fault (fault-around), and a
// large folio of the page cache whole: a page of those sections present in a
// window that holds only job-mode bytes, and not part of a folio reaching
// out of them, means exec mode touched that window.
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "emulation.h"
#include "harness.h"

namespace trainit::test {
namespace {

constexpr uint64_t kWindow = uint64_t{64} * 1024;  // fault-around's default window
constexpr uint64_t kPage = 4096;

struct Section {
  uint64_t addr = 0;
  uint64_t size = 0;
};

struct Image {
  Section text_job, rodata_job;
  uint64_t first_load = 0;  // the vaddr of the PT_LOAD that maps offset 0
  bool found = false;
};

Image read_image(const std::string& path) {
  Image image;
  std::ifstream in(path, std::ios::binary);
  const std::string elf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (elf.size() < sizeof(Elf64_Ehdr) || elf.compare(0, SELFMAG, ELFMAG) != 0 || elf[EI_CLASS] != ELFCLASS64) {
    return image;
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  auto shdr = [&](unsigned i) {
    Elf64_Shdr sh{};
    std::memcpy(&sh, elf.data() + eh.e_shoff + static_cast<uint64_t>(i) * eh.e_shentsize, sizeof sh);
    return sh;
  };
  if (eh.e_shoff + static_cast<uint64_t>(eh.e_shnum) * eh.e_shentsize > elf.size() || eh.e_shstrndx >= eh.e_shnum) {
    return image;
  }
  const Elf64_Shdr names = shdr(eh.e_shstrndx);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = shdr(i);
    if (names.sh_offset + sh.sh_name >= elf.size()) {
      continue;
    }
    const std::string name(elf.c_str() + names.sh_offset + sh.sh_name);
    if (name == ".text.job_modes") {
      image.text_job = {sh.sh_addr, sh.sh_size};
    } else if (name == ".rodata.job_modes") {
      image.rodata_job = {sh.sh_addr, sh.sh_size};
    }
  }
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    std::memcpy(&ph, elf.data() + eh.e_phoff + static_cast<uint64_t>(i) * eh.e_phentsize, sizeof ph);
    if (ph.p_type == PT_LOAD && ph.p_offset == 0) {
      image.first_load = ph.p_vaddr;
      break;
    }
  }
  image.found = image.text_job.size > 0 && image.rodata_job.size > 0;
  return image;
}

// Where `path`'s offset 0 is mapped in process `pid`; 0 when it is not.
uint64_t mapped_at(pid_t pid, const std::string& path) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, file;
    fields >> range >> perms >> offset >> dev >> inode >> file;
    if (file == path && std::stoull(offset, nullptr, 16) == 0) {
      return std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    }
  }
  return 0;
}

constexpr unsigned kCompoundHead = 15;  // /proc/kpageflags (linux/kernel-page-flags.h)
constexpr unsigned kCompoundTail = 16;
constexpr int kMaxFolioPages = 512;

uint64_t read_u64(int fd, uint64_t index) {
  uint64_t value = 0;
  if (::pread(fd, &value, sizeof value, static_cast<off_t>(index * sizeof value)) != sizeof value) {
    return 0;
  }
  return value;
}

// Whether the page of physical frame `pfn`, mapped at `v`, is part of a
// large folio that reaches outside [lo, hi): the kernel maps a large folio
// of a file's page cache (or the part of it in the fault-around window)
// whole, so a fault before or after the range can bring it in.
bool folio_reaches_out(int kpageflags, uint64_t pfn, uint64_t v, uint64_t lo, uint64_t hi) {
  uint64_t head = pfn;
  for (int i = 0; i < kMaxFolioPages && ((read_u64(kpageflags, head) >> kCompoundTail) & 1U); ++i) {
    --head;
  }
  if (((read_u64(kpageflags, head) >> kCompoundHead) & 1U) == 0) {
    return false;  // a page of its own
  }
  uint64_t end = head + 1;
  for (int i = 0; i < kMaxFolioPages && ((read_u64(kpageflags, end) >> kCompoundTail) & 1U); ++i) {
    ++end;
  }
  const uint64_t first = v - (pfn - head) * kPage;
  return first < lo || first + (end - head) * kPage > hi;
}

// The pages of `s` (shifted by `bias`) present in the page table behind
// `pagemap`, leaving out the windows the section shares with what is
// before and after it, and the pages of large folios that reach into them.
std::vector<uint64_t> present_inner_pages(int pagemap, int kpageflags, const Section& s, uint64_t bias) {
  std::vector<uint64_t> present;
  const uint64_t lo = (s.addr / kWindow + 1) * kWindow;
  const uint64_t hi = (s.addr + s.size) / kWindow * kWindow;
  for (uint64_t page = lo; page < hi; page += kPage) {
    const uint64_t entry = read_u64(pagemap, (page + bias) / kPage);
    if (((entry >> 63) & 1U) == 0) {
      continue;
    }
    const uint64_t pfn = entry & ((uint64_t{1} << 55) - 1);
    if (pfn != 0 && folio_reaches_out(kpageflags, pfn, page + bias, lo + bias, hi + bias)) {
      continue;
    }
    present.push_back(page);
  }
  return present;
}

TEST(HotCold, AnIdleExecModePid1HasNoPageOfTheJobModesCodeOrDataMapped) {
  TRAINIT_REQUIRE_ROOT();
  TRAINIT_SKIP_UNDER_EMULATION(
      "the binary is mapped by qemu-user, not by the kernel's loader: its page table says what the emulator "
      "touched, not what the aarch64 code ran");
  const Image image = read_image(trainit_path());
  ASSERT_TRUE(image.found) << trainit_path() << " has no .text.job_modes and .rodata.job_modes (init/job_modes.ld)";
  // A copy of the binary that only this test maps, out of the page cache
  // (written back, then dropped), as on a container's first start: what is
  // mapped then is what the faults read in, not what another test's
  // trainit (a job mode's) left cached in large folios.
  TempDir dir;
  const std::string binary = dir / "trainit";
  std::filesystem::copy_file(trainit_path(), binary);
  ::chmod(binary.c_str(), 0755);
  {
    Fd copy(::open(binary.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(copy && ::fsync(copy.get()) == 0) << std::strerror(errno);
    ASSERT_EQ(::posix_fadvise(copy.get(), 0, 0, POSIX_FADV_DONTNEED), 0);
  }
  Spec spec;
  spec.program = binary;
  spec.args = {"--", "sleep", "30"};
  Trainit t(spec);
  TRAINIT_ASSERT_STARTED(t);
  const std::string children = "/proc/" + std::to_string(t.pid()) + "/task/" + std::to_string(t.pid()) + "/children";
  const auto until = Clock::now() + kTimeout;
  std::string child;
  while (child.empty() && Clock::now() < until) {
    std::ifstream(children) >> child;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_FALSE(child.empty()) << "sleep never started";
  std::this_thread::sleep_for(50ms);  // settled, as the VmHWM bench reads it
  const uint64_t base = mapped_at(t.pid(), binary);
  ASSERT_NE(base, 0U) << "trainit's binary is not mapped in " << t.pid();
  const uint64_t bias = base - image.first_load / kPage * kPage;
  Fd pagemap(::open(("/proc/" + std::to_string(t.pid()) + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(pagemap) << std::strerror(errno);
  Fd kpageflags(::open("/proc/kpageflags", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(kpageflags) << "/proc/kpageflags: " << std::strerror(errno);
  for (const auto& [name, section] :
       {std::pair{".text.job_modes", image.text_job}, std::pair{".rodata.job_modes", image.rodata_job}}) {
    const std::vector<uint64_t> present = present_inner_pages(pagemap.get(), kpageflags.get(), section, bias);
    std::ostringstream pages;
    for (uint64_t page : present) {
      pages << " 0x" << std::hex << page;
    }
    EXPECT_TRUE(present.empty()) << name << ": exec mode touched " << present.size()
                                 << " page(s) of its inner windows:" << pages.str() << " (look them up in a link map)";
  }
  ASSERT_EQ(t.signal(SIGTERM), 0);
  EXPECT_EQ(t.wait(), Exit::code(128 + SIGTERM)) << t.transcript();
}

}  // namespace
}  // namespace trainit::test
