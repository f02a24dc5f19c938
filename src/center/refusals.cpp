#include "center/refusals.hpp"

#include <iterator>

namespace tether {

bool Refusals::answers(ErrorCode why, const std::string& peer, Clock::time_point now) {
    if (why != ErrorCode::unknown_worker) return true;
    const auto window = std::chrono::milliseconds(500);
    if (unknown_answered_.size() > 4 * max_peers_)  // recent askers only
        for (auto it = unknown_answered_.begin(); it != unknown_answered_.end();)
            it = now - it->second > window ? unknown_answered_.erase(it) : std::next(it);
    const auto it = unknown_answered_.find(peer);
    if (it != unknown_answered_.end() && now - it->second <= window) return false;
    unknown_answered_[peer] = now;
    return true;
}

}  // namespace tether
