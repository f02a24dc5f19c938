// The text form of a layer in `model.layers` (docs/models.md):
//   "dense N" | "conv F KxK [stride S] [pad P]" | "maxpool S" | "relu" | "dropout R" | "layernorm"
// Parsing checks the syntax and the ranges; LayerModel checks the shapes against the data.
#pragma once

#include <string>
#include <vector>

namespace tether {

struct LayerSpec {
    enum class Kind { dense, conv, maxpool, relu, dropout, layernorm };
    Kind kind = Kind::dense;
    int outputs = 0;               // dense: outputs; conv: filters
    int kernel_h = 1, kernel_w = 1;  // conv; maxpool: size x size
    int stride = 1, pad = 0;       // conv; maxpool: stride = size
    float rate = 0.f;              // dropout: probability of dropping a value
    std::string text;              // as written, for errors and the fingerprint
    std::string where;             // "model.layers[3] \"conv 64 5x5 pad 2\"", for errors
};

// Throws ConfigError naming the layer (index and text) and what would be right.
LayerSpec parse_layer(const std::string& text, std::size_t index);
std::vector<LayerSpec> parse_layers(const std::vector<std::string>& texts);

}  // namespace tether
