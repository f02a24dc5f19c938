// The CURVE keys of a center and its workers (ZeroMQ's CURVE, with libsodium): one set, held
// alike by the embedding API's ServiceOptions, a config file's "security" block and the keys
// tether makes for the runs it starts, so a set moves in one assignment. Each key is a key file
// as `tether keygen` writes it, or the Z85 key itself (40 characters); authorized_workers a file
// of allowed worker public keys, one per line, or the keys separated by ','. No keys: an empty
// center_public_key. docs/config.md, "security"; docs/embedding.md, "Security".
#pragma once

#include <string>

namespace tether {

struct CurveKeys {
    std::string center_public_key, center_secret_key;  // the center's pair (a worker: the public key)
    std::string worker_public_key, worker_secret_key;  // a worker's own pair
    std::string authorized_workers;                    // the center's allowlist
};

// visit(name, key) for each key of `keys` (a CurveKeys, const or not), named as in the
// "security" block: the one list of the names, for the config reader, its resolved blocks and
// Python's keyword arguments.
template <typename Keys, typename Visit>
void for_each_curve_key(Keys& keys, Visit visit) {
    visit("center_public_key", keys.center_public_key);
    visit("center_secret_key", keys.center_secret_key);
    visit("worker_public_key", keys.worker_public_key);
    visit("worker_secret_key", keys.worker_secret_key);
    visit("authorized_workers", keys.authorized_workers);
}

}  // namespace tether
