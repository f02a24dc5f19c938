#include "center/rounds.hpp"

#include <algorithm>
#include <cmath>

namespace tether {

std::optional<Rounds::Clock::time_point> Rounds::opened() const {
    if (round_.empty()) return std::nullopt;
    return opened_;
}

void Rounds::add(CenterWorker& w, Clock::time_point now) {
    if (round_.empty()) opened_ = now;
    w.in_round = true;
    round_.push_back(&w);
}

bool Rounds::past_deadline(Clock::time_point now) const {
    return now > opened_ + std::chrono::milliseconds(options_.round_timeout_ms);
}

bool Rounds::complete(int live, bool deadline_passed) const {
    const std::size_t waiting = std::size_t(std::count_if(
        round_.begin(), round_.end(), [](const CenterWorker* w) { return w->state != CenterWorker::State::lost; }));
    const std::size_t quorum = std::max<std::size_t>(1, std::size_t(std::ceil(options_.quorum * live)));
    return !round_.empty() && (int(waiting) >= live || (deadline_passed && waiting >= quorum));
}

std::vector<CenterWorker*> Rounds::close(Clock::time_point now) {
    std::vector<CenterWorker*> contributors;
    contributors.swap(round_);
    for (CenterWorker* w : contributors) {
        w->in_round = false;
        w->last_seen = w->last_exchange = now;
    }
    return contributors;
}

}  // namespace tether
