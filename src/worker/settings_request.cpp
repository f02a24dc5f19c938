#include "worker/settings_request.hpp"

#include <chrono>
#include <stdexcept>

#include "protocol/header.hpp"

namespace tether {

nlohmann::json ask_agreed_settings(Channel& channel, const std::string& address, int timeout_ms) {
    using Clock = std::chrono::steady_clock;
    Header request;
    request.type = MessageType::settings;
    channel.send(encode(request), nullptr, 0);
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    Frames frames;
    while (true) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0 || !channel.receive(frames, int(left)))
            throw std::runtime_error("no answer from the server at " + address + " within " + std::to_string(timeout_ms) +
                                     " ms (join_timeout_ms) to a request for its settings (this worker was given no "
                                     "strategy, and takes the center's); is the center running there?");
        tether::ErrorCode reason = tether::ErrorCode::none;
        const auto h = decode(frames.header.data(), frames.header.size(), reason);
        if (!h) throw std::runtime_error("malformed answer from the server at " + address + ": " + to_string(reason));
        const std::string text(frames.payload.begin(), frames.payload.end());
        if (h->type == MessageType::error) throw std::runtime_error("the server at " + address + " refused: " + text);
        if (h->type != MessageType::settings) continue;  // nothing else is asked on this channel
        const auto settings = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!settings.is_object() || !settings.contains("strategy") || !settings.contains("cluster"))
            throw std::runtime_error("the server at " + address + " answered with settings that name no strategy: " + text);
        return settings;
    }
}

}  // namespace tether
