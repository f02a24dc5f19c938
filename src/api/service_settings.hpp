// What the ServiceOptions of the embedding API decide, checked and resolved once, the same way
// for a CenterService and for each WorkerClient: the strategy, the codecs, and per server of x~
// its server range and the settings (and fingerprint) it agrees with its workers. Errors are
// ConfigErrors naming the option ("ServiceOptions.codec: ...").
#pragma once

#include <tether/tether.hpp>

#include <memory>
#include <vector>

#include "codec/codec.hpp"
#include "run/model_identity.hpp"
#include "strategy/configured_strategy.hpp"

namespace tether {

struct ServiceSettings {
    std::shared_ptr<const ConfiguredStrategy> strategy;
    CodecOptions payload_codec, reply_codec;
    std::vector<ServerIdentity> servers;
};

// `buffer_count`: the model buffers' elements (b~), an agreed setting like the parameter count.
ServiceSettings service_settings(const ServiceOptions& options, std::size_t num_parameters, std::size_t buffer_count = 0);

}  // namespace tether
