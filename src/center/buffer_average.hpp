// b~, the center's average of the workers' model buffers: float32 state that is averaged, not
// trained (BatchNorm's running mean and variance; integer counters as float32 shadows, see
// docs/embedding.md, "Model buffers"). The strategy never sees them.
//
// The rule: b~ = the mean, element by element, of the last buffers each worker sent, over the
// workers that have sent any; each worker counts once, whatever its exchange rate, and a
// worker that finished or was lost keeps its last contribution until the run ends, so the
// final b~ covers every worker that trained. A worker is its id: one that takes a lost
// worker's id (and with it its data shard) replaces that worker's contribution. Before any
// worker has sent buffers, b~ is b~(0) (the model's, or a checkpoint's).
//
// Memory: one vector per worker id that has contributed (ids are bounded by
// cluster.max_peers), each of the buffers' size: BatchNorm's buffers are 2 x channels a layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace tether {

class BufferAverage {
public:
    explicit BufferAverage(std::vector<float> initial = {}) : mean_(std::move(initial)) {}

    std::size_t size() const { return mean_.size(); }
    // Worker `id`'s buffers now (size() floats): they replace what it sent before.
    void contribute(std::uint32_t id, const float* buffers);
    // b~ (size() floats).
    const std::vector<float>& mean() const;
    std::size_t contributors() const { return contributions_.size(); }
    // A resumed run: b~ is the checkpoint's until workers send theirs; earlier contributions go.
    void restore(std::vector<float> mean);

private:
    std::map<std::uint32_t, std::vector<float>> contributions_;  // by worker id: ordered, so b~ is reproducible
    mutable std::vector<float> mean_;
    mutable bool stale_ = false;  // recomputed when read: contributions arrive far more often than b~ is read
};

}  // namespace tether
