#include "worker/worker_node.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "protocol/worker_log.hpp"
#include "util/all_finite.hpp"
#include "util/errors.hpp"

namespace tether {

namespace {

std::vector<ServerLink> one_server(std::unique_ptr<Channel> channel, const SessionOptions& o) {
    std::vector<ServerLink> links;
    links.push_back({std::move(channel), o.fingerprint, o.agreed_settings, o.server_address, o.successor, o.keep_pulled});
    return links;
}

}  // namespace

WorkerNode::WorkerNode(std::vector<ServerLink> servers, WorkerOptions options, std::size_t num_parameters)
    : options_(std::move(options)), num_parameters_(num_parameters),
      session_(std::move(servers), options_, num_parameters),
      policy_(options_.exchange_policy ? options_.exchange_policy()
                                       : std::make_unique<WindowPolicy>(options_.communication_window)) {
    if (!policy_) throw std::logic_error("the strategy made no exchange policy for this worker");
    // Read once: the worker's layout (staged or not) and its parts follow from them.
    fragments_ = policy_->fragments();
    landing_ = policy_->landing();
    changed_.assign(std::max<std::size_t>(fragments_, 1), false);
    if (!whole() && session_.servers() != fragments_)
        throw ConfigError(std::to_string(fragments_) + " fragments need as many servers; this worker has " +
                          std::to_string(session_.servers()));
}

WorkerNode::WorkerNode(std::unique_ptr<Channel> channel, WorkerOptions options, std::size_t num_parameters)
    : WorkerNode(one_server(std::move(channel), options), options, num_parameters) {}

WorkerNode::~WorkerNode() = default;

Welcome WorkerNode::join() {
    Welcome welcome = session_.join();
    result_.worker_id = welcome.worker_id;
    // Heartbeats from the welcome on: the center's liveness clock runs from there, and what the
    // caller does before start() (a CUDA context, the trainer's shard and buffers) can take long.
    start_session_thread();
    return welcome;
}

void WorkerNode::start_session_thread() {
    if (!thread_ && (options_.heartbeat_ms > 0 || landing_.late()))
        thread_ = std::make_unique<SessionThread>(session_, options_.heartbeat_ms);
}

// A GPU worker's messages in page-locked memory: the rule's copy of its parameters (or of
// their difference) down to the message then runs at the DMA engine's rate. The buffers are
// recycled (RecycledPayloads), so each is locked once. The pin is released before the
// memory is freed: members of Pinned are destroyed in reverse order.
static std::function<Payload(std::size_t)> pinned_payloads(Backend& backend) {
    return [&backend](std::size_t bytes) {
        // Whole pages: a page shared with another pinned range would make CUDA refuse this one.
        Payload plain = Payload::allocate(bytes, 4096);
        std::shared_ptr<void> pin = backend.pin_host(plain.data(), bytes);
        if (!pin) return plain;
        struct Pinned {
            std::shared_ptr<void> memory, pin;
        };
        auto owner = std::make_shared<Pinned>(Pinned{plain.owner(), std::move(pin)});
        return Payload(std::shared_ptr<void>(owner, plain.data()), plain.data(), bytes);
    };
}

void WorkerNode::start(Backend& backend, std::vector<ParameterSegment> parameters, std::unique_ptr<WorkerRule> rule,
                       const Welcome& welcome, std::vector<ParameterSegment> buffers) {
    backend_ = &backend;
    std::size_t buffer_count = 0;
    for (const auto& b : buffers) buffer_count += b.count;
    if (buffer_count != options_.buffer_count)
        throw ConfigError("model buffers: " + std::to_string(buffer_count) + " elements in all, but this worker joined with " +
                          std::to_string(options_.buffer_count));
    buffers_ = std::move(buffers);
    if (!backend.host_addressable()) payloads_.allocate_with(pinned_payloads(backend));
    layout_.emplace(backend, std::move(parameters), staged());
    if (layout_->size() != num_parameters_)
        throw ConfigError("parameter buffers: " + std::to_string(layout_->size()) + " elements in all, but this worker " +
                          "joined with " + std::to_string(num_parameters_));
    rule_ = std::move(rule);
    take_welcome(welcome);
    publish_progress();
    start_session_thread();
}

void WorkerNode::take_buffers(const std::vector<float>& b) {
    std::size_t offset = 0;
    for (const auto& segment : buffers_) {
        backend_->copy_from_host(segment.data, b.data() + offset, segment.count * sizeof(float));
        offset += segment.count;
    }
}

std::optional<Payload> WorkerNode::make_buffers() {
    if (buffers_.empty()) return std::nullopt;
    Payload& payload = buffer_payloads_.next(options_.buffer_count * sizeof(float));
    std::size_t offset = 0;
    for (const auto& segment : buffers_) {
        backend_->copy_to_host(payload.floats() + offset, segment.data, segment.count * sizeof(float));
        offset += segment.count;
    }
    // As for the parameters: a NaN in a running variance would reach b~ and every joiner.
    if (!host::all_finite(payload.floats(), options_.buffer_count))
        throw DivergedError("diverged at step " + std::to_string(result_.steps) + " (non-finite model buffers at exchange " +
                            std::to_string(result_.exchanges + 1) + ")");
    return payload;
}

void WorkerNode::take_welcome(const Welcome& welcome) {
    if (!welcome.buffers.empty()) take_buffers(welcome.buffers);
    backend_->copy_from_host(layout_->x(), welcome.center.data(), welcome.center.size() * sizeof(float));
    if (layout_->staged()) layout_->scatter();
    rule_->on_join(*backend_, layout_->x(), welcome.center.data());
    backend_->synchronize();
}

WorkerProgress WorkerNode::progress() const { return {result_.steps, result_.samples}; }

bool WorkerNode::rejoined_everywhere(const ExchangeOutcome& outcome) const {
    return outcome.rejoined.size() == session_.servers();
}

void WorkerNode::take_partial_welcome(const ExchangeOutcome& outcome) {
    if (!outcome.buffers.empty()) take_buffers(outcome.buffers);  // server 0 was among them
    for (const ServerRange& r : outcome.rejoined)
        backend_->copy_from_host(layout_->x() + r.first, outcome.reply.floats() + r.first, r.count * sizeof(float));
    // The rule's own state (x_pull, ...) starts again from x, as on joining: its other ranges
    // hold what the rule just made of their replies, these ranges x~.
    std::vector<float> x(num_parameters_);
    backend_->copy_to_host(x.data(), layout_->x(), x.size() * sizeof(float));
    rule_->on_join(*backend_, layout_->x(), x.data());
}

void WorkerNode::log(const std::vector<std::pair<std::string, double>>& scalars) {
    publish_progress();  // the samples trained so far travel in the log's header
    session_.log(encode_log(scalars));
}

void WorkerNode::ask_lease(std::uint64_t want, std::uint64_t total) {
    publish_progress();  // the first lease begins at the samples trained so far
    session_.ask_lease(want, total);
}

Lease WorkerNode::next_lease(std::uint64_t want, std::uint64_t total) {
    publish_progress();
    const LeaseAnswer answer = session_.take_lease(want, total);
    budget_met_ = budget_met_ || answer.budget_met;
    return answer.lease;
}

WorkerResult WorkerNode::train(LocalTrainer& trainer, std::unique_ptr<WorkerRule> rule, const Welcome& welcome,
                               SampleStream* stream) {
    start(trainer.backend(), trainer.parameters(), std::move(rule), welcome);
    const std::size_t total_steps = options_.epochs * trainer.steps_per_epoch();
    // A lease is one window's samples: a worker holds the rest of one window and, in its last
    // step, asks for the next, so a worker lost mid-run gives back at most that.
    const std::uint64_t want = std::uint64_t(std::max(options_.communication_window, 1)) * trainer.batch_size();
    const std::uint64_t positions = stream ? std::uint64_t(options_.epochs) * stream->pass() : 0;
    // With leases the data come from the center, not the place's shard: a worker that takes a
    // place over counts on from what the place trained, as the center does, and skips nothing.
    if (stream) {
        count_from(welcome.trained);
    } else if (welcome.trained > 0) {  // a place trained that far before (a restart, a lost worker's place): the rest of it
        result_.samples = trainer.skip(std::size_t(welcome.trained));
        result_.steps = trainer.steps_taken();
        publish_progress();
        std::fprintf(stderr, "worker %u: its place has trained %llu samples already; going on from step %zu of %zu\n",
                     unsigned(welcome.worker_id), static_cast<unsigned long long>(welcome.trained), result_.steps, total_steps);
    }
    const auto& delays = options_.step_delay_ms;
    const auto delay = std::chrono::milliseconds(welcome.worker_id < delays.size() ? delays[welcome.worker_id] : 0);
    while (!budget_met_) {
        if (stream && trainer.rows_left() == 0) {
            const Lease lease = next_lease(want, positions);
            if (lease.count == 0 || budget_met_) break;  // no work is left
            trainer.take(stream->rows(lease.start, lease.count));
        } else if (!stream && !options_.budget && trainer.steps_taken() >= total_steps) {
            break;
        }
        const std::size_t before = trainer.samples_seen();
        if (stream && trainer.rows_left() <= trainer.batch_size()) ask_lease(want, positions);  // this is the lease's last step
        trainer.step();
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
        after_step(trainer.samples_seen() - before);
    }
    return finish();
}

}  // namespace tether
