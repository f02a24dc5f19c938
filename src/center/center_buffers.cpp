// The center's model buffers (center/buffer_average.hpp): float32 state the workers average
// rather than train. They travel as their own message type, float32 whatever cluster.codec
// says (running statistics are small, and a lossy codec's error would stay in them), through
// the same framing as every vector: a worker sends its buffers right before each exchange's
// first chunk, so every exchange carries its current buffers; the center sends b~ right after
// each welcome, so a joining worker starts from the averaged buffers as it starts from x~.
// Replies carry none: a worker's running statistics describe its own x_i, which an elastic
// strategy keeps apart from x~, and stay its own between exchanges (DDP, whose replicas are
// equal, broadcasts rank 0's buffers instead).
#include <cstring>
#include <string>

#include "center/center.hpp"
#include "center/center_worker.hpp"
#include "center/checkpoint.hpp"

namespace tether {

void Center::hold_buffers(std::vector<float> initial) {
    buffers_out_ = std::make_unique<ChunkSender>(ChunkFormat{initial.size(), options_.updates.chunk_elements});
    buffers_ = BufferAverage(std::move(initial));
}

void Center::handle_buffers(Worker& w, const Header& h, const Frames& frames) {
    if (buffers_.size() == 0)
        return reject(w.peer, w.id, ErrorCode::unexpected_type,
                      options_.name + " holds no model buffers (only server 0 of a run with buffers does)");
    // Sent right before its exchange, with that exchange's sequence: a replayed one is older.
    if (h.chunk_index == 0 && h.sequence <= w.accepted_sequence)
        return reject(w.peer, w.id, ErrorCode::stale_sequence,
                      "buffers of exchange " + std::to_string(h.sequence) + " after exchange " +
                          std::to_string(w.accepted_sequence) + " was accepted");
    if (!w.buffers_from)
        w.buffers_from = std::make_unique<ChunkAssembler>(ChunkFormat{buffers_.size(), options_.updates.chunk_elements}, "buffers",
                                                          "", /*refuse_non_finite=*/true);
    switch (w.buffers_from->add(h, frames.payload)) {
        case ChunkAssembler::Result::refused:
            return reject(w.peer, w.id, w.buffers_from->refusal().code, w.buffers_from->refusal().detail);
        case ChunkAssembler::Result::partial:
        case ChunkAssembler::Result::piece: return;  // never: this assembler does not stream
        case ChunkAssembler::Result::complete: {
            const Payload buffers = w.buffers_from->take();
            buffers_.contribute(w.id, buffers.floats());
            return;
        }
    }
}

void Center::send_buffers(Worker& w) {
    if (buffers_.size() == 0 || w.gone()) return;
    const std::vector<float>& mean = buffers_.mean();
    Payload b = Payload::allocate(mean.size() * sizeof(float));
    std::memcpy(b.data(), mean.data(), b.size());
    Header h;
    h.type = MessageType::buffers;
    h.worker_id = w.id;
    try {
        send_chunks(w.peer, h, b, *buffers_out_);
    } catch (const DeliveryError& e) {
        lose(w, e.what());
    }
}

}  // namespace tether
