// IDX reading: a valid pair (raw and gzip) loads with pixels scaled to [0, 1], and every kind
// of bad file is rejected with a message that names the file and the problem.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/idx_reader.hpp"
#include "test_support.hpp"

namespace {

using tether::testing::TempDir;
using Bytes = std::vector<std::uint8_t>;

// An IDX file: magic 0x00 0x00 <type> <ndim>, big-endian dimension sizes, then the values.
Bytes idx_bytes(const std::vector<std::uint32_t>& dimensions, const Bytes& values, std::uint8_t type = 0x08) {
    Bytes out{0, 0, type, std::uint8_t(dimensions.size())};
    for (std::uint32_t d : dimensions)
        for (int shift = 24; shift >= 0; shift -= 8) out.push_back(std::uint8_t(d >> shift));
    out.insert(out.end(), values.begin(), values.end());
    return out;
}

void write_raw(const std::string& path, const Bytes& bytes) {
    tether::testing::write_text(path, std::string(bytes.begin(), bytes.end()));
}

void write_gzip(const std::string& path, const Bytes& bytes) {
    gzFile file = gzopen(path.c_str(), "wb");
    REQUIRE(file != nullptr);
    if (!bytes.empty()) REQUIRE(gzwrite(file, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
    REQUIRE(gzclose(file) == Z_OK);
}

// Three 2x2 images and their labels.
const Bytes kPixels{0, 255, 51, 102, /**/ 255, 255, 0, 0, /**/ 1, 2, 3, 4};
const Bytes kLabels{0, 2, 1};
Bytes image_file() { return idx_bytes({3, 2, 2}, kPixels); }
Bytes label_file() { return idx_bytes({3}, kLabels); }

// The message of the std::runtime_error that `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

void check_pair(const tether::Dataset& d) {
    CHECK(d.size() == 3);
    CHECK(d.features == 4);
    CHECK(d.classes == 3);
    CHECK(d.labels == std::vector<std::int32_t>{0, 2, 1});
    REQUIRE(d.images.size() == 12);
    CHECK(d.images[0] == 0.f);
    CHECK(d.images[1] == doctest::Approx(1.0));
    CHECK(d.images[2] == doctest::Approx(0.2));
    CHECK(d.images[3] == doctest::Approx(0.4));
    CHECK(d.row(1)[0] == doctest::Approx(1.0));
    CHECK(d.row(2)[3] == doctest::Approx(4.0 / 255));
    for (float v : d.images) CHECK((v >= 0.f && v <= 1.f));
}

}  // namespace

TEST_CASE("a valid raw IDX pair loads") {
    TempDir dir;
    write_raw(dir.file("images"), image_file());
    write_raw(dir.file("labels"), label_file());
    const auto data = tether::load_idx_pair(dir.file("images"), dir.file("labels"));
    check_pair(*data);
}

TEST_CASE("a valid gzip IDX pair loads") {
    TempDir dir;
    write_gzip(dir.file("images.gz"), image_file());
    write_gzip(dir.file("labels.gz"), label_file());
    const auto data = tether::load_idx_pair(dir.file("images.gz"), dir.file("labels.gz"));
    check_pair(*data);
}

TEST_CASE("read_idx returns dimensions and raw bytes") {
    TempDir dir;
    write_gzip(dir.file("images.gz"), image_file());
    const tether::IdxArray a = tether::read_idx(dir.file("images.gz"), 3);
    CHECK(a.dimensions == std::vector<std::uint32_t>{3, 2, 2});
    CHECK(a.values == kPixels);
}

TEST_CASE("an IDX file with zero items is valid") {
    TempDir dir;
    write_raw(dir.file("labels"), idx_bytes({0}, {}));
    const tether::IdxArray a = tether::read_idx(dir.file("labels"), 1);
    CHECK(a.dimensions == std::vector<std::uint32_t>{0});
    CHECK(a.values.empty());
}

TEST_CASE("bad IDX files are rejected with the file and the problem") {
    TempDir dir;
    const std::string path = dir.file("bad-idx");
    // Each bad file is checked raw and gzip-compressed: the reader must say the same for both.
    const auto check_rejected = [&](const Bytes& bytes, std::size_t dimensions,
                                    const std::vector<std::string>& expected) {
        for (const bool gzip : {false, true}) {
            CAPTURE(gzip);
            gzip ? write_gzip(path, bytes) : write_raw(path, bytes);
            const std::string message = error_of([&] { tether::read_idx(path, dimensions); });
            CAPTURE(message);
            CHECK(message.find(path + ": ") == 0);
            for (const auto& part : expected) CHECK(message.find(part) != std::string::npos);
        }
    };

    SUBCASE("missing file") {
        const std::string missing = dir.file("no-such-file.gz");
        const std::string message = error_of([&] { tether::read_idx(missing, 3); });
        CHECK(message.find(missing + ": ") == 0);
        CHECK(message.find("cannot open") != std::string::npos);
        CHECK(message.find("No such file") != std::string::npos);
    }
    SUBCASE("empty file") { check_rejected({}, 1, {"truncated"}); }
    SUBCASE("wrong magic") {
        Bytes b = label_file();
        b[0] = 0x1f;
        b[1] = 0x42;
        check_rejected(b, 1, {"bad magic"});
    }
    SUBCASE("element type other than unsigned bytes") {
        check_rejected(idx_bytes({3}, kLabels, 0x0D), 1, {"unsupported IDX element type"});
    }
    SUBCASE("wrong number of dimensions") {
        check_rejected(image_file(), 1, {"has 3 dimensions, expected 1"});
        check_rejected(label_file(), 3, {"has 1 dimensions, expected 3"});
    }
    SUBCASE("truncated header") {
        Bytes b = image_file();
        b.resize(4 + 4 + 2);  // magic, the first size, half of the second
        check_rejected(b, 3, {"truncated inside the header"});
    }
    SUBCASE("truncated data") {
        Bytes b = image_file();
        b.resize(b.size() - 2);
        // Names the declared size (12) and what the file holds (10).
        check_rejected(b, 3, {"truncated", "12", "10"});
    }
    SUBCASE("trailing bytes") {
        Bytes b = label_file();
        b.push_back(7);
        check_rejected(b, 1, {"trailing bytes"});
    }
}

TEST_CASE("a cut-off gzip stream is rejected as truncated") {
    TempDir dir;
    const std::string whole = dir.file("whole.gz"), cut = dir.file("cut.gz");
    std::mt19937 rng(5);
    Bytes pixels(20000);
    for (auto& p : pixels) p = std::uint8_t(rng());  // random bytes: the stream is about as long as the data
    const Bytes big = idx_bytes({200, 10, 10}, pixels);
    write_gzip(whole, big);
    const std::string compressed = tether::testing::read_text(whole);
    tether::testing::write_text(cut, compressed.substr(0, compressed.size() / 2));
    const std::string message = error_of([&] { tether::read_idx(cut, 3); });
    CHECK(message.find(cut) == 0);
    CHECK(message.find("truncated") != std::string::npos);
}

TEST_CASE("load_idx_pair rejects images and labels of different counts") {
    TempDir dir;
    const std::string images = dir.file("images"), labels = dir.file("labels");
    write_raw(images, image_file());
    write_raw(labels, idx_bytes({2}, {0, 1}));
    const std::string message = error_of([&] { tether::load_idx_pair(images, labels); });
    CHECK(message.find(images) != std::string::npos);
    CHECK(message.find(labels) != std::string::npos);
    CHECK(message.find("3 images") != std::string::npos);
    CHECK(message.find("2 labels") != std::string::npos);
}

TEST_CASE("load_idx_pair names the file that is bad") {
    TempDir dir;
    const std::string images = dir.file("images"), labels = dir.file("labels");
    write_raw(images, image_file());
    SUBCASE("label file missing") {
        const std::string message = error_of([&] { tether::load_idx_pair(images, labels); });
        CHECK(message.find(labels) == 0);
    }
    SUBCASE("images and labels swapped") {
        write_raw(labels, label_file());
        CHECK_THROWS_WITH_AS(tether::load_idx_pair(labels, images),
                             doctest::Contains("has 1 dimensions, expected 3 (an image file)"), std::runtime_error);
    }
}

// Known defect: the element type is printed in decimal after "0x" (0x0D shows as "0x13").
TEST_CASE("the unsupported element type is shown in hexadecimal") {
    TempDir dir;
    const std::string path = dir.file("floats");
    write_raw(path, idx_bytes({3}, Bytes(12, 0), 0x0D));
    const std::string message = error_of([&] { tether::read_idx(path, 1); });
    CHECK((message.find("0x0d") != std::string::npos || message.find("0x0D") != std::string::npos));
}
