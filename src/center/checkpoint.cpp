#include "center/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace tether {

namespace {

constexpr char kMagic[8] = {'T', 'E', 'T', 'H', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kFormat = 3;  // 1: no buffers, 2: no places (both still read)

void put(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes = 8) {
    for (int i = 0; i < bytes; ++i) out.push_back(std::uint8_t(v >> (8 * i)));
}

std::uint64_t get(const std::uint8_t*& p, int bytes = 8) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t(p[i]) << (8 * i);
    p += bytes;
    return v;
}

void write_all(int fd, const void* data, std::size_t size, const std::string& path) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error(path + ": cannot write the checkpoint: " + std::strerror(errno));
        p += n;
        size -= std::size_t(n);
    }
}

}  // namespace

void write_checkpoint(const std::string& path, const Checkpoint& c) {
    std::vector<std::uint8_t> head(kMagic, kMagic + 8);
    put(head, kFormat, 4);
    for (std::uint64_t v : {c.fingerprint, c.version, c.updates_applied, c.exchanges, c.rounds, c.total_samples,
                            std::uint64_t(c.x.size()), std::uint64_t(c.buffers.size()), std::uint64_t(c.places.size())})
        put(head, v);
    std::vector<std::uint8_t> places;
    for (const auto& [id, samples] : c.places) {
        put(places, id);
        put(places, samples);
    }
    static_assert(sizeof(float) == 4, "float32 payloads");
    const std::string temporary = path + ".tmp";
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error(temporary + ": cannot create the checkpoint: " + std::strerror(errno));
    try {
        write_all(fd, head.data(), head.size(), temporary);
        write_all(fd, c.x.data(), c.x.size() * sizeof(float), temporary);  // x86-64: already little-endian
        write_all(fd, c.buffers.data(), c.buffers.size() * sizeof(float), temporary);
        write_all(fd, places.data(), places.size(), temporary);
        if (::fsync(fd) != 0) throw std::runtime_error(temporary + ": fsync failed: " + std::strerror(errno));
    } catch (...) {
        ::close(fd);
        ::unlink(temporary.c_str());
        throw;
    }
    ::close(fd);
    if (::rename(temporary.c_str(), path.c_str()) != 0)
        throw std::runtime_error(path + ": cannot rename the checkpoint into place: " + std::strerror(errno));
    // The rename itself is durable only once the directory is.
    const std::string directory = std::filesystem::path(path).parent_path().string();
    const int dir = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        ::fsync(dir);
        ::close(dir);
    }
}

Checkpoint read_checkpoint(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": no checkpoint to resume from (the center writes one every "
                                             "cluster.checkpoint_seconds and at the end)");
    std::vector<std::uint8_t> head(8 + 4);
    in.read(reinterpret_cast<char*>(head.data()), std::streamsize(head.size()));
    if (in.gcount() != std::streamsize(head.size()) || std::memcmp(head.data(), kMagic, 8) != 0)
        throw std::runtime_error(path + ": not a tether checkpoint (bad magic or truncated header)");
    const std::uint8_t* p = head.data() + 8;
    const std::uint64_t format = get(p, 4);
    if (format < 1 || format > kFormat)
        throw std::runtime_error(path + ": checkpoint format " + std::to_string(format) + "; this tether reads formats 1 to " +
                                 std::to_string(kFormat));
    const std::size_t fields = 6 + format;
    head.resize(head.size() + fields * 8);
    in.read(reinterpret_cast<char*>(head.data() + 12), std::streamsize(fields * 8));
    if (in.gcount() != std::streamsize(fields * 8)) throw std::runtime_error(path + ": truncated checkpoint header");
    p = head.data() + 12;
    Checkpoint c;
    c.fingerprint = get(p);
    c.version = get(p);
    c.updates_applied = get(p);
    c.exchanges = get(p);
    c.rounds = get(p);
    c.total_samples = get(p);
    const std::uint64_t count = get(p);
    const std::uint64_t buffers = format == 1 ? 0 : get(p);
    const std::uint64_t places = format <= 2 ? 0 : get(p);
    const auto expected = std::filesystem::file_size(path);
    if (count > expected || buffers > expected || places > expected ||
        expected != head.size() + (count + buffers) * sizeof(float) + places * 16)
        throw std::runtime_error(path + ": checkpoint truncated or padded (" + std::to_string(expected) + " bytes for " +
                                 std::to_string(count) + " elements, " + std::to_string(buffers) + " buffer elements and " +
                                 std::to_string(places) + " places)");
    c.x.resize(count);
    in.read(reinterpret_cast<char*>(c.x.data()), std::streamsize(count * sizeof(float)));
    c.buffers.resize(buffers);
    in.read(reinterpret_cast<char*>(c.buffers.data()), std::streamsize(buffers * sizeof(float)));
    std::vector<std::uint8_t> records(places * 16);
    in.read(reinterpret_cast<char*>(records.data()), std::streamsize(records.size()));
    p = records.data();
    for (std::uint64_t i = 0; i < places; ++i) {
        const std::uint64_t id = get(p);
        c.places[std::uint32_t(id)] = get(p);
    }
    return c;
}

}  // namespace tether
