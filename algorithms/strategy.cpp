#include "algorithms/strategy.hpp"

#include <stdexcept>

namespace tether {

void WorkerRule::on_join(Backend&, float*, const float*, std::uint64_t version) { pull_version_ = version; }

double CenterRule::apply(CenterState&, const Exchange&, float*) {
    throw std::logic_error("this strategy is synchronous: its center collects rounds, it does not apply exchanges");
}
void CenterRule::contribute(CenterState&, const Exchange&) {
    throw std::logic_error("this strategy is asynchronous: its center applies each exchange");
}
double CenterRule::close_round(CenterState&, float*) {
    throw std::logic_error("this strategy is asynchronous: it has no rounds");
}

CommonStrategyOptions read_common_options(JsonReader& reader, int default_window) {
    CommonStrategyOptions o;
    o.communication_window = int(reader.integer("communication_window", default_window, 1, 1'000'000));
    return o;
}

double read_moving_rate(JsonReader& reader, int workers) {
    const auto given = reader.optional_number("moving_rate", std::nullopt, 0.0, 1.0, true, "0.9 / cluster.workers");
    return given ? *given : 0.9 / double(workers);
}

}  // namespace tether
