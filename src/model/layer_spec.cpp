#include "model/layer_spec.hpp"

#include <sstream>

#include "util/errors.hpp"

namespace tether {
namespace {

[[noreturn]] void fail(const LayerSpec& spec, const std::string& what) { throw ConfigError(spec.where + ": " + what); }

// A whole positive integer token, or the error says which part of the layer was expected.
int positive(const LayerSpec& spec, const std::string& token, const std::string& what, int min = 1) {
    std::size_t used = 0;
    long value = -1;
    try {
        value = std::stol(token, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != token.size() || value < min || value > 1'000'000)
        fail(spec, "expected " + what + " (an integer >= " + std::to_string(min) + "), got \"" + token + "\"");
    return int(value);
}

// "5x5", "5x3" or "5" (square).
void kernel(LayerSpec& spec, const std::string& token) {
    const auto x = token.find('x');
    spec.kernel_h = positive(spec, token.substr(0, x), "a kernel size such as 5x5");
    spec.kernel_w = x == std::string::npos ? spec.kernel_h : positive(spec, token.substr(x + 1), "a kernel size such as 5x5");
}

}  // namespace

LayerSpec parse_layer(const std::string& text, std::size_t index) {
    LayerSpec spec;
    spec.text = text;
    spec.where = "model.layers[" + std::to_string(index) + "] \"" + text + "\"";
    std::istringstream in(text);
    std::vector<std::string> t;
    for (std::string word; in >> word;) t.push_back(word);
    const std::string kind = t.empty() ? "" : t[0];
    auto arity = [&](std::size_t n, const char* form) {
        if (t.size() != n) fail(spec, std::string("expected \"") + form + "\"");
    };
    if (kind == "dense") {
        arity(2, "dense OUTPUTS");
        spec.outputs = positive(spec, t[1], "the number of outputs");
    } else if (kind == "conv") {
        if (t.size() < 3 || t.size() % 2 == 0) fail(spec, "expected \"conv FILTERS KxK [stride S] [pad P]\"");
        spec.kind = LayerSpec::Kind::conv;
        spec.outputs = positive(spec, t[1], "the number of filters");
        kernel(spec, t[2]);
        for (std::size_t i = 3; i + 1 < t.size(); i += 2) {
            if (t[i] == "stride") spec.stride = positive(spec, t[i + 1], "a stride");
            else if (t[i] == "pad") spec.pad = positive(spec, t[i + 1], "a padding", 0);
            else fail(spec, "unknown option \"" + t[i] + "\"; a conv layer takes \"stride S\" and \"pad P\"");
        }
    } else if (kind == "maxpool") {
        arity(2, "maxpool SIZE");
        spec.kind = LayerSpec::Kind::maxpool;
        spec.kernel_h = spec.kernel_w = spec.stride = positive(spec, t[1], "a pooling size");
    } else if (kind == "relu") {
        arity(1, "relu");
        spec.kind = LayerSpec::Kind::relu;
    } else if (kind == "layernorm") {
        arity(1, "layernorm");
        spec.kind = LayerSpec::Kind::layernorm;
    } else if (kind == "dropout") {
        arity(2, "dropout RATE");
        spec.kind = LayerSpec::Kind::dropout;
        std::size_t used = 0;
        double rate = -1;
        try {
            rate = std::stod(t[1], &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != t[1].size() || !(rate >= 0.0 && rate < 1.0))
            fail(spec, "expected a dropout rate in [0, 1) (the probability of dropping a value), got \"" + t[1] + "\"");
        spec.rate = float(rate);
    } else {
        fail(spec, "unknown layer \"" + kind + "\"; known: dense, conv, maxpool, relu, dropout, layernorm (docs/models.md)");
    }
    return spec;
}

std::vector<LayerSpec> parse_layers(const std::vector<std::string>& texts) {
    std::vector<LayerSpec> specs;
    for (std::size_t i = 0; i < texts.size(); ++i) specs.push_back(parse_layer(texts[i], i));
    return specs;
}

}  // namespace tether
