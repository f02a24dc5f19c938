#include "data/idx_reader.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "util/huge_pages.hpp"

namespace tether {
namespace {

struct GzCloser { void operator()(gzFile f) const { gzclose(f); } };
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
    throw std::runtime_error(path + ": " + what);
}

// gzread reads gzip transparently and plain files as they are.
std::size_t read_up_to(gzFile file, void* out, std::size_t bytes, const std::string& path) {
    std::size_t done = 0;
    auto* p = static_cast<unsigned char*>(out);
    while (done < bytes) {
        const unsigned chunk = unsigned(std::min<std::size_t>(bytes - done, 1u << 30));
        const int got = gzread(file, p + done, chunk);
        if (got < 0) {
            int code = 0;
            const char* message = gzerror(file, &code);
            fail(path, std::string("truncated or corrupt gzip data (") + message + ")");
        }
        if (got == 0) break;
        done += std::size_t(got);
    }
    return done;
}

std::uint32_t big_endian(const unsigned char* b) {
    return (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | b[3];
}

}  // namespace

IdxArray read_idx(const std::string& path, std::size_t expected_dimensions) {
    errno = 0;
    GzFile file(gzopen(path.c_str(), "rb"));
    if (!file) fail(path, std::string("cannot open: ") + (errno ? std::strerror(errno) : "unknown error"));

    unsigned char magic[4];
    if (read_up_to(file.get(), magic, 4, path) != 4) fail(path, "truncated: shorter than the 4-byte IDX magic");
    if (magic[0] != 0 || magic[1] != 0)
        fail(path, "bad magic: not an IDX file (the first two bytes must be zero)");
    if (magic[2] != 0x08) {
        char type[8];
        std::snprintf(type, sizeof type, "0x%02x", magic[2]);
        fail(path, std::string("unsupported IDX element type ") + type + "; only unsigned bytes (0x08) are read");
    }
    if (magic[3] != expected_dimensions)
        fail(path, "has " + std::to_string(magic[3]) + " dimensions, expected " + std::to_string(expected_dimensions) +
                       (expected_dimensions == 1 ? " (a label file)" : " (an image file)"));

    IdxArray array;
    std::size_t total = 1;
    for (std::size_t d = 0; d < expected_dimensions; ++d) {
        unsigned char size[4];
        if (read_up_to(file.get(), size, 4, path) != 4) fail(path, "truncated inside the header");
        array.dimensions.push_back(big_endian(size));
        total *= array.dimensions.back();
    }
    if (total > (std::size_t(1) << 34)) fail(path, "header declares " + std::to_string(total) + " bytes; refusing");
    reserve_in_huge_pages(array.values, total);
    array.values.resize(total);
    const std::size_t got = read_up_to(file.get(), array.values.data(), total, path);
    if (got != total)
        fail(path, "truncated: header declares " + std::to_string(total) + " data bytes, file holds " + std::to_string(got));
    unsigned char extra;
    if (read_up_to(file.get(), &extra, 1, path) != 0) fail(path, "trailing bytes after the " + std::to_string(total) + " declared data bytes");
    return array;
}

}  // namespace tether
