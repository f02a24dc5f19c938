// One cluster's settings from every entry point: a config file with --set overrides (tether run,
// server, worker) and ServiceOptions (the C++ API, and Python, whose keyword arguments the
// binding writes into a default ServiceOptions) give the same center, worker and transport
// options and the same fingerprints; the defaults are equal; errors name the key as written.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <type_traits>
#include <utility>

#include "center/center_settings.hpp"
#include "cluster/cluster_settings.hpp"
#include "config/config.hpp"
#include "protocol/framing.hpp"
#include "protocol/header.hpp"
#include "test_support.hpp"
#include "transport/transport.hpp"
#include "worker/worker_settings.hpp"

using namespace tether;
using namespace tether::testing;
using nlohmann::json;

namespace {

constexpr std::size_t kParameters = 1000;

json of(const CodecOptions& c) { return {to_string(c.kind), c.topk_ratio}; }
json of(const WireKinds& k) { return {int(k.payload), int(k.reply)}; }

json of(const CenterOptions& o) {
    return {{"expected_workers", o.membership.expected_workers}, {"fingerprint", o.fingerprint}, {"chunk_elements", o.updates.chunk_elements},
            {"quorum", o.rounds.quorum}, {"round_timeout_ms", o.rounds.round_timeout_ms}, {"worker_timeout_ms", o.membership.worker_timeout_ms},
            {"center_restart_ms", o.end.center_restart_ms},
            {"join_timeout_ms", o.membership.join_timeout_ms}, {"samples_per_snapshot", o.snapshots.samples_per_snapshot},
            {"max_message_bytes", o.max_message_bytes}, {"max_peers", o.membership.max_peers},
            {"max_samples_per_worker", o.membership.max_samples_per_worker}, {"elastic", o.membership.elastic},
            {"explain_mismatch", o.explain_mismatch ? o.explain_mismatch("{}") : "unset"},
            {"checkpoint_ms", o.snapshots.checkpoint_ms}, {"payload_codec", of(o.updates.payload_codec)}, {"reply_codec", of(o.updates.reply_codec)},
            {"wire_kinds", of(o.updates.wire_kinds)}, {"ids_from_hello", o.membership.ids_from_hello},
            {"await_final_snapshot", o.end.await_final_snapshot}, {"name", o.name}, {"final_snapshot", o.snapshots.final_snapshot}};
}

json of(const WorkerOptions& o) {
    return {{"fingerprint", o.fingerprint}, {"chunk_elements", o.chunk_elements}, {"join_timeout_ms", o.join_timeout_ms},
            {"reply_timeout_ms", o.reply_timeout_ms}, {"heartbeat_ms", o.heartbeat_ms},
            {"center_timeout_ms", o.center_timeout_ms}, {"center_restart_ms", o.center_restart_ms},
            {"payload_codec", of(o.payload_codec)},
            {"reply_codec", of(o.reply_codec)}, {"wire_kinds", of(o.wire_kinds)}, {"epochs", o.epochs},
            {"step_delay_ms", o.step_delay_ms}, {"communication_window", o.communication_window},
            {"overlap_steps", o.exchange_policy ? o.exchange_policy()->landing().after_steps : -1}};
}

json of(const TransportOptions& o) {
    return {{"send_timeout_ms", o.send_timeout_ms}, {"high_water_mark", o.high_water_mark},
            {"receive_high_water_mark", o.receive_high_water_mark},
            {"max_message_bytes", o.max_message_bytes}, {"heartbeat_interval_ms", o.heartbeat_interval_ms},
            {"heartbeat_timeout_ms", o.heartbeat_timeout_ms}, {"curve_server_secret", o.curve_server_secret},
            {"curve_server_public", o.curve_server_public}, {"curve_client_public", o.curve_client_public},
            {"curve_client_secret", o.curve_client_secret}};
}

// Everything the settings give a process of the cluster, for x~ of kParameters.
json products(const ClusterSettings& k) {
    auto transport = make_zmq_transport();
    json out = {{"worker", of(worker_options(k))},
                {"worker_transport", of(k.worker_transport("tcp://127.0.0.1:5555"))},
                {"center_transport", of(k.center_transport(*transport, {"inproc://settings-test"}))}};
    for (const ServerIdentity& server : k.server_identities(kParameters)) {
        out["servers"].push_back({{"center", of(center_options(k, server))},
                                  {"range", {server.range.first, server.range.count}},
                                  {"agreed", server.agreed},
                                  {"fingerprint", server.fingerprint}});
    }
    return out;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("a config file with --set overrides and ServiceOptions resolve to the same options and fingerprints") {
    TempDir dir;
    write_text(dir.file("cluster.json"), R"({
        "strategy": {"name": "downpour", "communication_window": 3, "overlap_steps": 3},
        "cluster": {"workers": 3, "servers": 2, "codec": "bf16", "quorum": 0.75}})");
    const RunConfig config = load_config(dir.file("cluster.json"), {"cluster.worker_timeout_ms=4000", "cluster.heartbeat_ms=500",
                                                                    "cluster.round_timeout_ms=9000", "cluster.center_restart_ms=25000"});
    ServiceOptions o;  // as the Python binding fills it: the defaults, then each keyword argument
    o.strategy = R"({"name": "downpour", "communication_window": 3, "overlap_steps": 3})";
    o.workers = 3;
    o.servers = 2;
    o.codec = "bf16";
    o.quorum = 0.75;
    o.worker_timeout_ms = 4000;
    o.center_restart_ms = 25000;
    o.heartbeat_ms = 500;
    o.round_timeout_ms = 9000;
    const json from_config = products(config.cluster), from_api = products(cluster_settings(o, kParameters));
    CHECK(from_config == from_api);
    CHECK(from_config["worker"]["heartbeat_ms"] == 500);
    CHECK(from_config["servers"].size() == 2);
    CHECK(from_config["servers"][0]["fingerprint"] != from_config["servers"][1]["fingerprint"]);
}

TEST_CASE("the defaults are the same in a config file and in ServiceOptions: 10 s worker timeout, 2 s heartbeat") {
    const ClusterSettings config = parse_config({{"strategy", {{"name", "aeasgd"}}}}).cluster;
    const ClusterSettings api = cluster_settings(ServiceOptions{}, kParameters);
    CHECK(products(config) == products(api));
    const CenterOptions center = center_options(api, api.server_identities(kParameters).front());
    CHECK(center.membership.worker_timeout_ms == 10000);
    CHECK(worker_options(api).heartbeat_ms == 2000);
    CHECK(worker_options(api).center_timeout_ms == 10000);
    CHECK(worker_options(api).center_restart_ms == 60000);
    CHECK(center.end.center_restart_ms == 60000);
    CHECK(center.membership.join_timeout_ms == 60000);
}

TEST_CASE("the transport's heartbeat, timeouts and message cap come from the same settings as the center's and workers'") {
    ServiceOptions o;
    o.worker_timeout_ms = 3000;
    o.heartbeat_ms = 250;
    o.codec = "int8";
    const ClusterSettings k = cluster_settings(o, kParameters);
    auto transport = make_zmq_transport();
    const TransportOptions center = k.center_transport(*transport, {"inproc://cap-test"});
    const TransportOptions worker = k.worker_transport("tcp://127.0.0.1:5555");
    const CenterOptions options = center_options(k, k.server_identities(kParameters).front());
    CHECK(center.heartbeat_interval_ms == 0);  // libzmq 4.3.4 aborts on a center's ping timer (cluster_transport.cpp)
    CHECK(worker.heartbeat_interval_ms == 250);
    // A connection outlives the restart window (cluster.center_restart_ms, 60 s by default): a
    // stalled or cut-off far end gets what was on its way late, not never.
    CHECK(center.heartbeat_timeout_ms == 60000);
    CHECK(worker.heartbeat_timeout_ms == 60000);
    CHECK(options.membership.worker_timeout_ms == 3000);
    CHECK(options.end.center_restart_ms == 60000);
    CHECK(worker_options(k).center_restart_ms == 60000);
    o.center_restart_ms = 0;  // no restart window: the liveness bound alone
    CHECK(cluster_settings(o, kParameters).worker_transport("tcp://127.0.0.1:5555").heartbeat_timeout_ms == 3000);
    CHECK(center.send_timeout_ms == 0);     // a server never waits on a peer
    CHECK(worker.send_timeout_ms == 3000);  // a worker no longer than the liveness bound
    // One message: a header and one chunk of the exchange codec, plus a fixed slack for a hello.
    CHECK(center.max_message_bytes == options.max_message_bytes);
    const std::size_t chunk = kHeaderBytes + max_payload_bytes(k.payload_codec(), std::size_t(k.chunk_elements));
    CHECK(center.max_message_bytes > chunk);
    CHECK(center.max_message_bytes < chunk + 64 * 1024);
}

// What a center queues per peer: what it has not read shares 256 MiB over the
// workers, in 4 MiB chunks, so 64 workers pushing a 100M-parameter vector at once cannot park
// two vectors each in its memory; what it sends holds twice a vector and a few small messages,
// and never fewer than 64 messages.
TEST_CASE("a center's receive queue per peer is 256 MiB shared over the workers; its send queue at least 64 messages") {
    auto transport = make_zmq_transport();
    ServiceOptions o;
    const std::size_t chunks = 96;  // a 100M-parameter vector in chunks of 2^20 elements
    o.workers = 64;
    TransportOptions center = cluster_settings(o, kParameters).center_transport(*transport, {"inproc://q-64"}, chunks);
    CHECK(center.receive_high_water_mark == 1);  // 256 MiB / (64 x 4 MiB)
    CHECK(center.high_water_mark == 2 * (96 + 8));
    o.workers = 2;
    center = cluster_settings(o, kParameters).center_transport(*transport, {"inproc://q-2"}, chunks);
    CHECK(center.receive_high_water_mark == 32);  // 256 MiB / (2 x 4 MiB)
    // A one-chunk vector: the send queue's floor, and the receive queue never above it.
    center = cluster_settings(o, kParameters).center_transport(*transport, {"inproc://q-1"}, 1);
    CHECK(center.high_water_mark == 64);
    CHECK(center.receive_high_water_mark == 32);
    o.workers = 1;
    center = cluster_settings(o, kParameters).center_transport(*transport, {"inproc://q-one"}, 1);
    CHECK(center.receive_high_water_mark == 64);
}

TEST_CASE("errors name the setting as the user wrote it: cluster.KEY in a config, ServiceOptions.FIELD in the API") {
    ServiceOptions o;
    o.worker_timeout_ms = 1000;
    const std::string api = error_of([&] { cluster_settings(o, kParameters); });
    CHECK(contains(api, "ServiceOptions.heartbeat_ms: 2000 must be at most half of ServiceOptions.worker_timeout_ms (1000)"));
    const std::string config = error_of([] { parse_config({{"cluster", {{"worker_timeout_ms", 1000}}}}); });
    CHECK(contains(config, "cluster.heartbeat_ms: 2000 must be at most half of cluster.worker_timeout_ms (1000)"));

    o = ServiceOptions{};
    o.servers = 2;
    o.address = "tcp://127.0.0.1:*";
    const ClusterSettings two = cluster_settings(o, kParameters);
    CHECK(contains(error_of([&] { two.bind_addresses([] { return std::string(); }); }),
                   "ServiceOptions.address: 1 address(es) for ServiceOptions.servers 2"));
    CHECK(contains(error_of([&] { two.server_identities(1); }), "ServiceOptions.servers: 2 servers for a model of 1 parameters"));
    const ClusterSettings from_config =
        parse_config({{"strategy", {{"name", "adag"}}}, {"cluster", {{"servers", 2}, {"endpoint", "tcp://127.0.0.1:*"}}}}).cluster;
    CHECK(contains(error_of([&] { from_config.bind_addresses([] { return std::string(); }); }),
                   "cluster.endpoint: 1 address(es) for cluster.servers 2"));

    o = ServiceOptions{};
    o.codec = "zip";
    CHECK(contains(error_of([&] { cluster_settings(o, kParameters); }), "ServiceOptions.codec: \"zip\" is not allowed"));
    o = ServiceOptions{};
    o.strategy = R"({"name": "sequential"})";
    CHECK(contains(error_of([&] { cluster_settings(o, kParameters); }), "ServiceOptions.strategy.name: \"sequential\" has no center"));
    o = ServiceOptions{};
    o.warmstart_samples = 10;
    o.servers = 2;
    CHECK(contains(error_of([&] { cluster_settings(o, kParameters); }),
                   "ServiceOptions.warmstart_samples: 10 with ServiceOptions.servers 2; the warmstart is built for one server"));
    // Streaming DiLoCo's fragments are exchanged in phase: a worker joining mid-run would not be.
    CHECK(contains(error_of([] {
                       parse_config({{"strategy", {{"name", "diloco"}, {"fragments", 2}}},
                                     {"cluster", {{"servers", 2}, {"elastic", true}}}});
                   }),
                   "cluster.elastic: true with 2 fragments"));
}

TEST_CASE("cluster.warmstart_samples is checked in one place: the settings' rules, and worker 0's samples where a run knows them") {
    const ClusterSettings k =
        parse_config({{"strategy", {{"name", "adag"}}}, {"cluster", {{"workers", 2}, {"warmstart_samples", 10}}}}).cluster;
    k.check_warmstart();    // the data unknown: the settings alone
    k.check_warmstart(10);  // worker 0 trains exactly that many
    CHECK(contains(error_of([&] { k.check_warmstart(9); }),
                   "cluster.warmstart_samples: 10 is more than worker 0 trains in all (training.epochs x its shard = 9)"));
    CHECK(contains(error_of([] {
                       parse_config({{"strategy", {{"name", "adag"}}}, {"cluster", {{"warmstart_samples", 10}, {"servers", 2}}}});
                   }),
                   "cluster.warmstart_samples: 10 with cluster.servers 2"));
}

namespace {

// The values to try for one option: one inside its limits other than the default, and those
// just outside them.
template <typename Field>
std::vector<Field> values_to_try(const Field& fallback, const OptionLimits& limits) {
    if constexpr (std::is_same_v<Field, bool>) {
        return {!fallback};
    } else if constexpr (std::is_integral_v<Field>) {
        return {fallback < limits.max_integer ? fallback + 1 : fallback - 1, Field(limits.min_integer - 1),
                Field(limits.max_integer + 1)};
    } else if constexpr (std::is_floating_point_v<Field>) {
        return {(fallback + limits.max) / 2, limits.min - 1, limits.max + 1};
    } else {
        std::vector<Field> out = limits.words;
        out.push_back(limits.words.empty() ? "tcp://127.0.0.1:*" : "no-such-word");
        return out;
    }
}

// What a setting comes to: the products of the settings, or the error, named as a config file
// names it.
json outcome(const std::function<ClusterSettings()>& resolve) {
    try {
        return products(resolve());
    } catch (const ConfigError& e) {
        std::string text = e.what();
        for (const auto& [api, file] : {std::pair<std::string, std::string>{"ServiceOptions.address", "cluster.endpoint"},
                                        {"ServiceOptions.", "cluster."}}) {
            for (std::size_t at = text.find(api); at != std::string::npos; at = text.find(api, at + file.size()))
                text.replace(at, api.size(), file);
        }
        const std::size_t file_prefix = text.find("cluster.");  // load_config names the file first
        return text.substr(file_prefix == std::string::npos ? 0 : file_prefix);
    }
}

}  // namespace

TEST_CASE("every cluster option resolves alike from a config file and from ServiceOptions: its value, its limits, its errors") {
    TempDir dir;
    const std::string strategy = R"({"name": "downpour"})";
    write_text(dir.file("c.json"), "{\"strategy\": " + strategy + "}");
    int tried = 0, refused = 0;
    ServiceOptions defaults;
    for_each_cluster_option(defaults, [&](const OptionName& name, const auto& fallback, const OptionLimits& limits) {
        using Field = std::decay_t<decltype(fallback)>;
        const std::vector<Field> values = values_to_try(fallback, limits);
        for (std::size_t i = 0; i < values.size(); ++i) {
            const Field value = values[i];  // a copy: vector<bool> holds no bools
            const std::string key = name.key;
            CAPTURE(key);
            CAPTURE(json(value).dump());
            const json from_file =
                outcome([&] { return load_config(dir.file("c.json"), {"cluster." + key + "=" + json(value).dump()}).cluster; });
            const json from_api = outcome([&] {
                ServiceOptions o;
                o.strategy = strategy;
                for_each_cluster_option(o, [&](const OptionName& other, auto& field, const OptionLimits&) {
                    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, Field>)
                        if (other.key == key) field = value;
                });
                return cluster_settings(o, kParameters);
            });
            CHECK(from_file == from_api);
            ++tried;
            refused += from_file.is_string();
        }
    });
    CHECK(tried > 50);
    CHECK(refused > 30);  // the limits are checked on both ways in
}
