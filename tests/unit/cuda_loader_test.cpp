// The dlopen seam (backend/cuda_loader.cpp): libtether answers cuda_built() from whether
// libtether-cuda.so loads, and asking for CUDA without it (or without a GPU) is a ConfigError
// that says what is missing. TETHER_EXPECT_CUDA_LIBRARY (tests/meson.build) says whether this
// build made libtether-cuda.so, which in-tree executables find through their RUNPATH.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "backend/backend.hpp"
#include "backend/device_choice.hpp"
#include "test_support.hpp"
#include "util/errors.hpp"

using namespace tether;
using tether::testing::contains;

namespace {
bool library_expected() {
    const char* expected = std::getenv("TETHER_EXPECT_CUDA_LIBRARY");
    REQUIRE_MESSAGE(expected != nullptr, "run through meson test, which sets TETHER_EXPECT_CUDA_LIBRARY");
    return std::string(expected) == "1";
}
}  // namespace

// First in this file: nothing has loaded the CUDA backend yet. (Where the build made no
// libtether-cuda.so nothing could load it anyway; CI builds it wherever nvcc is present.)
TEST_CASE("without the NVIDIA driver, device auto loads no CUDA library") {
    if (nvidia_driver_present()) return;  // a GPU machine: tests/cuda covers it
    const auto mapped = [] {
        std::ifstream maps("/proc/self/maps");
        return std::string((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    };
    CHECK(choose_backend("auto", 1, 0).device == "auto");
    BackendOptions options;
    options.device = "auto";
    CHECK(make_backend(options)->kind() == DeviceKind::cpu);
    CHECK_FALSE(contains(mapped(), "libtether-cuda"));
    CHECK_FALSE(contains(mapped(), "libcudart"));
}

TEST_CASE("the CUDA backend loads exactly when the build made libtether-cuda.so") {
    CHECK(cuda_built() == library_expected());
    if (!cuda_built()) CHECK(cuda_device_count() == 0);
}

TEST_CASE("device cuda without a usable GPU is a ConfigError that names what is missing") {
    if (cuda_built() && cuda_device_count() > 0) return;  // a GPU machine: tests/cuda covers it
    BackendOptions options;
    options.device = "cuda";
    std::string message;
    try {
        make_backend(options);
        FAIL("make_backend(cuda) succeeded without a usable GPU");
    } catch (const ConfigError& e) {
        message = e.what();
    }
    if (cuda_built()) {
        CHECK(contains(message, "no CUDA GPU is visible"));
    } else {
        CHECK(contains(message, "libtether-cuda.so could not be loaded"));
        CHECK(contains(message, "cannot open shared object file"));  // dlerror()'s own words
    }
    // "auto" falls back to the CPU instead of failing.
    options.device = "auto";
    CHECK(make_backend(options)->kind() == DeviceKind::cpu);
}
