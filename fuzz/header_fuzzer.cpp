// libFuzzer target for the wire header decoder (protocol/header.cpp), the first code that
// touches bytes from the network. Any input must decode or be refused by reason, never crash
// or read past its end (run under AddressSanitizer); a header that decodes must encode back to
// the same bytes, so the decoder accepts exactly what the encoder can write.
//   meson test -C build header_fuzz                      (a bounded run, part of the suite)
//   build/fuzz/header_fuzzer -max_total_time=60          (longer, by hand)
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "protocol/header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    tether::ErrorCode reason = tether::ErrorCode::none;
    const auto header = tether::decode(data, size, reason);
    if (!header) {
        if (reason == tether::ErrorCode::none) std::abort();  // a refusal always says why
        return 0;
    }
    const auto encoded = tether::encode(*header);
    if (encoded.size() != size || std::memcmp(encoded.data(), data, size) != 0) std::abort();
    return 0;
}
