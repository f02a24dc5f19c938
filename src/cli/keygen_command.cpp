// tether keygen: a CURVE key pair for the security.* config keys, or (--secret) a shared secret
// from which the ranks of a launcher job derive theirs (TETHER_SECRET, cluster/run_keys.hpp).
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "transport/curve_keys.hpp"

namespace po = boost::program_options;

namespace tether::cli {

int keygen_command(const std::vector<std::string>& arguments) {
    po::options_description options("tether keygen --out PREFIX | --secret");
    std::string prefix;
    bool secret = false;
    options.add_options()("help,h", "show this help")(
        "out", po::value(&prefix), "writes PREFIX.pub (public key) and PREFIX.key (secret key, mode 0600)")(
        "secret", po::bool_switch(&secret),
        "prints a shared secret for a launcher job: export TETHER_SECRET=$(tether keygen --secret)");
    if (!parse_arguments(arguments, options, "out")) return 0;
    if (secret) {
        if (!prefix.empty()) throw po::error("tether keygen: give --out PREFIX or --secret, not both");
        std::printf("%s\n", generate_secret().c_str());
        return 0;
    }
    if (prefix.empty()) throw po::error("tether keygen needs --out PREFIX, e.g. tether keygen --out keys/center (or --secret)");
    if (!curve_available()) {
        std::fprintf(stderr, "tether: error: this libzmq has no CURVE support (zmq_has(\"curve\") is false); install a "
                             "libzmq built with libsodium (Debian's libzmq5 is)\n");
        return 1;
    }
    const CurveKeyPair pair = generate_curve_key_pair();
    write_curve_key_pair(prefix, pair);
    std::printf("public key %s\nwrote %s.pub and %s.key (keep the .key file private)\n", pair.public_key.c_str(),
                prefix.c_str(), prefix.c_str());
    return 0;
}

}  // namespace tether::cli
