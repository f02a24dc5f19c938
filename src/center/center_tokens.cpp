// Server 0's word on the other servers of a sharded center (center/server_tokens.hpp): server 0
// gives each worker a token for its id after the welcome; a server k > 0 takes the id a hello
// asks for only with that token, and never from a live peer; a request for the final x~, which
// ends a server that waits for it, counts only with server 0's token. Without a shared key
// (CenterOptions::tokens null) nothing is checked, but a hello still evicts no one.
#include "center/center.hpp"
#include "center/center_worker.hpp"
#include "center/server_tokens.hpp"

namespace tether {

bool Center::admits_id(const std::string& peer, const Header& hello, const Frames& frames) {
    const auto refuse = [&](ErrorCode why, const std::string& detail) {
        reject(peer, 0, why, detail);
        return false;
    };
    if (options_.tokens) {
        if (!(hello.flags & kFlagToken) || frames.payload.size() < kServerTokenBytes)
            return refuse(ErrorCode::no_token, "a hello to this server needs the token server 0 sent after its welcome");
        if (!options_.tokens->admits_worker(hello.worker_id, frames.payload.data(), kServerTokenBytes))
            return refuse(ErrorCode::bad_token, "not server 0's token for worker id " + std::to_string(hello.worker_id));
    }
    // A live worker keeps its id: another peer asking for it is a stranger, or a worker server 0
    // gave the id to after counting its holder lost, which asks again until this server has too.
    if (membership_.id_held(hello.worker_id, peer))
        return refuse(ErrorCode::id_taken, "worker id " + std::to_string(hello.worker_id) + " belongs to a live worker here");
    return true;
}

bool Center::admits_final_request(const std::string& peer, const Header& request, const Frames& frames) {
    if (!options_.tokens) return true;
    if ((request.flags & kFlagToken) &&
        options_.tokens->admits_final(request.sequence, frames.payload.data(), frames.payload.size()))
        return true;
    reject(peer, request.worker_id, ErrorCode::bad_token, "a request for the final x~ must carry server 0's token");
    return false;
}

void Center::send_token(Worker& w) {
    if (!options_.issues_tokens || w.state != Worker::State::active) return;
    // Empty where the servers share no key: the worker then shows the others nothing.
    const std::string token = options_.tokens ? options_.tokens->for_worker(w.id) : std::string();
    Header h;
    h.type = MessageType::token;
    h.worker_id = w.id;
    h.center_version = updates_.version();
    h.fingerprint = options_.fingerprint;
    h.element_count = token.size();
    try {
        const auto header = encode(h);
        endpoint_->send(w.peer, header, token.data(), token.size());
        stats_.bytes_sent += header.size() + token.size();
    } catch (const DeliveryError& e) {
        lose(w, e.what());
    }
}

}  // namespace tether
