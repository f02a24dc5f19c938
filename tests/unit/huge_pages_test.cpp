// util/huge_pages.hpp: the data loaders reserve their large buffers through it, so it must keep
// what a vector holds, and (where the kernel offers transparent huge pages) mark the buffer's
// mapping for 2 MB pages, which is what took a Fashion-MNIST load from 1.2 s
// to about 0.4-0.8 s on a virtual machine.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "util/huge_pages.hpp"

namespace {

// The mode in /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never" -> "madvise").
std::string transparent_huge_pages_mode() {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string text;
    std::getline(in, text);
    const std::size_t open = text.find('['), close = text.find(']');
    return open == std::string::npos || close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

// The VmFlags line of the mapping in /proc/self/smaps that holds `address`; "" if none.
std::string mapping_flags(const void* address) {
    const auto at = reinterpret_cast<std::uintptr_t>(address);
    std::ifstream smaps("/proc/self/smaps");
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        std::uintptr_t begin = 0, end = 0;
        char dash = 0;
        std::istringstream range(line);
        if (range >> std::hex >> begin >> dash >> end && dash == '-') {  // a mapping's first line
            inside = begin <= at && at < end;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0) return line.substr(8) + " ";
    }
    return "";
}

}  // namespace

TEST_CASE("reserving keeps what the vector holds and makes room for n") {
    std::vector<float> v{1.f, 2.f, 3.f};
    tether::reserve_in_huge_pages(v, std::size_t(1) << 22);
    CHECK(v.capacity() >= (std::size_t(1) << 22));
    CHECK(v == std::vector<float>{1.f, 2.f, 3.f});
    tether::reserve_in_huge_pages(v, 2);  // smaller than held: no change
    CHECK(v == std::vector<float>{1.f, 2.f, 3.f});
    std::vector<unsigned char> empty;
    tether::reserve_in_huge_pages(empty, 0);  // nothing to advise
    CHECK(empty.empty());
}

TEST_CASE("a reserved data-set buffer is marked for 2 MB pages where the kernel offers them") {
    const std::string mode = transparent_huge_pages_mode();
    if (mode != "madvise" && mode != "always") {
        MESSAGE("transparent huge pages are '" << mode << "' here: nothing to check");
        return;
    }
    std::vector<float> images;
    tether::reserve_in_huge_pages(images, std::size_t(16) << 20);  // 64 MB, as a loader would
    images.resize(std::size_t(16) << 20);
    const std::string flags = mapping_flags(images.data() + images.size() / 2);
    REQUIRE_MESSAGE(!flags.empty(), "no VmFlags for the buffer's mapping in /proc/self/smaps");
    // "hg": the mapping was advised MADV_HUGEPAGE (with "always" every mapping is eligible
    // anyway, so eligibility alone would not show the advice).
    CHECK(flags.find(" hg ") != std::string::npos);
}
