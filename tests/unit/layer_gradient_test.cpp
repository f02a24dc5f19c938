// The layers of model/layers.hpp on the CPU backend: each backward pass against central finite
// differences (tests/layer_checks.hpp), the convolution and pooling forward passes against
// plain-loop references written here, dropout's masks, and the LayerModel as a whole.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/backend.hpp"
#ifndef TETHER_HD
#define TETHER_HD  // host only here: the functors the GPU runs, called in plain loops
#endif
#include "backend/layer_ops.inl"
#include "layer_checks.hpp"
#include "model/layer_model.hpp"
#include "util/errors.hpp"

namespace {

using namespace tether;
using namespace tether::testing;

std::unique_ptr<Backend> cpu() { return make_backend({"cpu", 1, 0}); }

std::vector<float> parameters_of(const Layer& layer, std::uint64_t seed) {
    std::vector<float> p(layer.num_parameters());
    std::mt19937_64 rng(seed);
    layer.initialize(p.data(), rng);
    // Non-zero biases, so a bias that is dropped or misplaced changes the output.
    auto noise = random_vector(p.size(), seed + 1, 0.1f);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
    return p;
}

// Direct convolution of NHWC images, W laid out (ky, kx, c_in) x filters, then b.
std::vector<float> conv_reference(const std::vector<float>& x, const std::vector<float>& p, Shape in, int rows, int filters,
                                  int kh, int kw, int stride, int pad) {
    const int oh = (in.height + 2 * pad - kh) / stride + 1, ow = (in.width + 2 * pad - kw) / stride + 1;
    const std::size_t patch = std::size_t(kh) * kw * in.channels;
    std::vector<float> out(std::size_t(rows) * oh * ow * filters);
    for (int n = 0; n < rows; ++n)
        for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox)
                for (int f = 0; f < filters; ++f) {
                    double sum = p[patch * filters + f];
                    for (int ky = 0; ky < kh; ++ky)
                        for (int kx = 0; kx < kw; ++kx)
                            for (int c = 0; c < in.channels; ++c) {
                                const int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                                if (iy < 0 || iy >= in.height || ix < 0 || ix >= in.width) continue;
                                const double v = x[((std::size_t(n) * in.height + iy) * in.width + ix) * in.channels + c];
                                sum += v * p[((std::size_t(ky) * kw + kx) * in.channels + c) * filters + f];
                            }
                    out[((std::size_t(n) * oh + oy) * ow + ox) * filters + f] = float(sum);
                }
    return out;
}

std::vector<float> forward(Layer& layer, Backend& b, const std::vector<float>& x, const std::vector<float>& p, int rows,
                           Pass pass = {}) {
    layer.reserve(rows);
    auto dx = to_backend(b, x);
    auto dp = to_backend(b, p.empty() ? std::vector<float>{0.f} : p);
    DeviceBuffer<float> out(b, std::size_t(rows) * layer.output_shape().size());
    layer.forward(dp.data(), dx.data(), out.data(), rows, pass);
    return to_host(out);
}

}  // namespace

TEST_CASE("dense layer: gradients match finite differences, with and without a fused ReLU") {
    auto b = cpu();
    for (const bool relu : {false, true}) {
        CAPTURE(relu);
        const Shape in{3, 2, 2};  // an image is flattened: 12 inputs
        auto layer = make_dense(*b, in, 5, relu);
        LayerCase c{*layer, *b, in, 3, random_vector(3 * in.size(), 1), parameters_of(*layer, 2), {}};
        CHECK(check_layer_gradients(c) > (c.inputs.size() + c.parameters.size()) / 2);
    }
}

TEST_CASE("conv layer: forward equals a direct convolution; gradients match finite differences") {
    auto b = cpu();
    struct Geometry { Shape in; int filters, kh, kw, stride, pad; bool relu; };
    for (const Geometry g : {Geometry{{2, 5, 5}, 3, 3, 3, 1, 1, false}, Geometry{{3, 7, 6}, 4, 5, 5, 2, 2, true},
                             Geometry{{1, 6, 5}, 2, 3, 2, 1, 0, false}}) {
        CAPTURE(g.in.text());
        CAPTURE(g.kh);
        CAPTURE(g.stride);
        auto layer = make_conv(*b, g.in, g.filters, g.kh, g.kw, g.stride, g.pad, g.relu);
        const int rows = 2;
        LayerCase c{*layer, *b, g.in, rows, random_vector(rows * g.in.size(), 3), parameters_of(*layer, 4), {}};
        auto expected = conv_reference(c.inputs, c.parameters, g.in, rows, g.filters, g.kh, g.kw, g.stride, g.pad);
        if (g.relu)
            for (auto& v : expected) v = std::max(v, 0.f);
        const Shape out = layer->output_shape();
        CHECK(out.channels == g.filters);
        CHECK(out.height == (g.in.height + 2 * g.pad - g.kh) / g.stride + 1);
        CHECK(max_relative_error(forward(*layer, *b, c.inputs, c.parameters, rows), expected) < 1e-5);
        CHECK(check_layer_gradients(c) > (c.inputs.size() + c.parameters.size()) / 2);
    }
}

TEST_CASE("maxpool layer: forward takes each window's maximum; the gradient goes to the winner") {
    auto b = cpu();
    const Shape in{3, 5, 4};  // 5 rows: the last one is cut off by rounding down, as in PyTorch
    auto layer = make_maxpool(*b, in, 2);
    CHECK(layer->output_shape().text() == "3x2x2");
    const int rows = 2;
    LayerCase c{*layer, *b, in, rows, distinct_values(rows * in.size(), 0.1f, 5), {}, {}};
    const auto out = forward(*layer, *b, c.inputs, {}, rows);
    for (int n = 0; n < rows; ++n)
        for (int oy = 0; oy < 2; ++oy)
            for (int ox = 0; ox < 2; ++ox)
                for (int ch = 0; ch < 3; ++ch) {
                    float best = -1e30f;
                    for (int y = 2 * oy; y < 2 * oy + 2; ++y)
                        for (int x = 2 * ox; x < 2 * ox + 2; ++x)
                            best = std::max(best, c.inputs[((std::size_t(n) * 5 + y) * 4 + x) * 3 + ch]);
                    CHECK(out[((std::size_t(n) * 2 + oy) * 2 + ox) * 3 + ch] == best);
                }
    CHECK(check_layer_gradients(c, 1e-3f) == c.inputs.size());
}

// The GPU splits im2col, col2im and max pooling into one unit per value (coalesced); the CPU
// into one unit per row or pixel. Both must give the same bits; checked here on the host, so
// a GPU is needed only for what runs on it (tests/cuda).
TEST_CASE("the GPU's per-value im2col, col2im and maxpool units equal the CPU's per-row ones") {
    struct Geometry { int batch, height, width, channels, kh, kw, stride, pad; };
    for (const Geometry g : {Geometry{2, 7, 6, 3, 3, 2, 2, 1}, Geometry{2, 5, 5, 5, 3, 3, 1, 1}, Geometry{1, 6, 5, 1, 3, 3, 1, 0},
                             Geometry{3, 4, 4, 2, 2, 2, 2, 0}}) {
        const WindowShape s{g.batch, g.height, g.width, g.channels, g.kh, g.kw, g.stride, g.pad};
        CAPTURE(g.channels);
        CAPTURE(g.stride);
        const std::size_t pixels = std::size_t(g.batch) * g.height * g.width;
        // Rounded to 0.25, so that windows hold ties and the first winner must be the same.
        auto images = random_vector(pixels * g.channels, 11);
        for (float& v : images) v = std::round(v * 4.f) / 4.f;
        std::vector<float> by_row(s.positions() * s.patch(), -7.f), by_value(by_row.size(), -7.f), by_value64 = by_value;
        for (std::size_t r = 0; r < std::size_t(g.batch) * s.out_height(); ++r) ops::Im2colRow{images.data(), by_row.data(), s}(r);
        for (std::size_t i = 0; i < by_value.size(); ++i) {
            ops::Im2colElement<std::uint32_t>{images.data(), by_value.data(), s}(i);
            ops::Im2colElement<std::uint64_t>{images.data(), by_value64.data(), s}(i);
        }
        CHECK(by_value == by_row);
        CHECK(by_value64 == by_row);

        const auto columns = random_vector(by_row.size(), 12);
        std::vector<float> summed_by_pixel(pixels * g.channels, -7.f), summed_by_value(summed_by_pixel.size(), -7.f),
            summed_by_value64 = summed_by_value;
        for (std::size_t p = 0; p < pixels; ++p) ops::Col2im{columns.data(), summed_by_pixel.data(), s}(p);
        for (std::size_t i = 0; i < summed_by_value.size(); ++i) {
            ops::Col2imElement<std::uint32_t>{columns.data(), summed_by_value.data(), s}(i);
            ops::Col2imElement<std::uint64_t>{columns.data(), summed_by_value64.data(), s}(i);
        }
        CHECK(summed_by_value == summed_by_pixel);
        CHECK(summed_by_value64 == summed_by_pixel);

        if (g.kh != g.kw || g.kh != g.stride || g.pad != 0) continue;  // pooling windows do not overlap
        const std::size_t outputs = s.positions() * g.channels;
        std::vector<float> pooled_by_pixel(outputs, -7.f), pooled_by_value(outputs, -7.f);
        std::vector<std::int32_t> winner_by_pixel(outputs, -1), winner_by_value(outputs, -1);
        for (std::size_t p = 0; p < s.positions(); ++p)
            ops::MaxPool{images.data(), pooled_by_pixel.data(), winner_by_pixel.data(), s}(p);
        for (std::size_t i = 0; i < outputs; ++i)
            ops::MaxPoolElement<std::uint32_t>{images.data(), pooled_by_value.data(), winner_by_value.data(), s}(i);
        CHECK(pooled_by_value == pooled_by_pixel);
        CHECK(winner_by_value == winner_by_pixel);
        for (std::size_t i = 0; i < outputs; ++i)
            ops::MaxPoolElement<std::uint64_t>{images.data(), pooled_by_value.data(), winner_by_value.data(), s}(i);
        CHECK(pooled_by_value == pooled_by_pixel);
        CHECK(winner_by_value == winner_by_pixel);
    }
}

TEST_CASE("relu layer: gradients match finite differences") {
    auto b = cpu();
    const Shape in{4, 3, 3};
    auto layer = make_relu(*b, in);
    LayerCase c{*layer, *b, in, 2, distinct_values(2 * in.size(), 0.1f, 6), {}, {}};
    CHECK(check_layer_gradients(c, 1e-3f) == c.inputs.size());
}

TEST_CASE("dropout: inverted masks from the pass's seed; identity when not training; gradient through the mask") {
    auto b = cpu();
    const Shape in{16, 8, 8};
    const float rate = 0.25f;
    auto layer = make_dropout(*b, in, rate);
    const int rows = 8;
    const std::vector<float> ones(rows * in.size(), 1.f);
    const auto a = forward(*layer, *b, ones, {}, rows, Pass{true, 11});
    const auto again = forward(*layer, *b, ones, {}, rows, Pass{true, 11});
    const auto other = forward(*layer, *b, ones, {}, rows, Pass{true, 12});
    CHECK(a == again);
    CHECK(a != other);
    std::size_t kept = 0;
    for (float v : a) {
        CHECK((v == 0.f || std::fabs(v - 1.f / (1.f - rate)) < 1e-6f));
        kept += v != 0.f;
    }
    CHECK(std::fabs(double(kept) / a.size() - (1.0 - rate)) < 0.02);  // 8192 draws: sd 0.005
    CHECK(forward(*layer, *b, ones, {}, rows) == ones);
    const Shape small_shape{3, 2, 2};
    auto small = make_dropout(*b, small_shape, 0.5f);
    LayerCase s{*small, *b, small_shape, 2, random_vector(2 * small_shape.size(), 7), {}, Pass{true, 13}};
    CHECK(check_layer_gradients(s) > s.inputs.size() / 2);
}

TEST_CASE("layernorm: each sample normalised to mean 0, variance 1, then scaled and shifted; gradients") {
    auto b = cpu();
    const Shape in{3, 2, 2};
    auto layer = make_layer_norm(*b, in);
    REQUIRE(layer->num_parameters() == 2 * in.size());
    std::vector<float> identity(layer->num_parameters());
    std::mt19937_64 rng(1);
    layer->initialize(identity.data(), rng);  // gamma 1, beta 0
    const int rows = 3;
    auto x = random_vector(rows * in.size(), 10, 3.f);
    for (auto& v : x) v += 5.f;  // an offset the normalisation must remove
    const auto out = forward(*layer, *b, x, identity, rows);
    for (int r = 0; r < rows; ++r) {
        double mean = 0, squares = 0;
        for (std::size_t j = 0; j < in.size(); ++j) mean += out[r * in.size() + j];
        mean /= double(in.size());
        for (std::size_t j = 0; j < in.size(); ++j) squares += std::pow(out[r * in.size() + j] - mean, 2);
        CHECK(std::fabs(mean) < 1e-5);
        CHECK(squares / double(in.size()) == doctest::Approx(1.0).epsilon(1e-3));
    }
    LayerCase c{*layer, *b, in, rows, x, parameters_of(*layer, 11), {}};
    CHECK(check_layer_gradients(c, 1e-2f) > (c.inputs.size() + c.parameters.size()) * 9 / 10);
}

TEST_CASE("layer model: softmax cross-entropy gradient of a conv net matches finite differences") {
    auto b = cpu();
    const Shape in{2, 6, 6};
    const int rows = 3, classes = 4;
    LayerModel model(*b,
                     parse_layers({"conv 3 3x3 pad 1", "relu", "maxpool 2", "conv 4 2x2 stride 1", "layernorm", "dense 5",
                                   "relu", "dense 4"}),
                     in, classes, 1);
    CHECK(model.description() == "layers 2x6x6 | conv 3 3x3 pad 1 + relu | maxpool 2 | conv 4 2x2 stride 1 | layernorm | dense 5 + relu | dense 4");
    std::vector<float> x = random_vector(rows * in.size(), 8), p(model.num_parameters()), g(p.size());
    model.initialize(p.data(), 9);
    const std::vector<std::int32_t> labels{0, 3, 1};
    auto dx = to_backend(*b, x);
    auto dl = to_backend(*b, labels);
    auto dp = to_backend(*b, p);
    DeviceBuffer<float> dg(*b, p.size());
    const Batch batch{dx.data(), dl.data(), rows};
    const double loss = model.evaluate_with_gradient(dp.data(), batch, dg.data());
    g = to_host(dg);
    CHECK(std::fabs(loss - model.evaluate(dp.data(), batch)) < 1e-6);
    const float h = 1e-3f;
    std::size_t close = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const float keep = p[i];
        p[i] = keep + h;
        dp.upload(p.data(), p.size());
        const double plus = model.evaluate(dp.data(), batch);
        p[i] = keep - h;
        dp.upload(p.data(), p.size());
        const double minus = model.evaluate(dp.data(), batch);
        p[i] = keep;
        close += std::fabs((plus - minus) / (2 * h) - g[i]) <= 2e-3 + 1e-2 * std::fabs(g[i]);
    }
    // A difference may straddle a ReLU kink or a pooling tie; nearly all must agree.
    CHECK(close >= p.size() * 97 / 100);
}

TEST_CASE("layer model: shapes are checked at load, naming the layer and the sizes") {
    auto b = cpu();
    auto error_of = [&](std::vector<std::string> layers, Shape in, int classes) -> std::string {
        try {
            LayerModel(*b, parse_layers(layers), in, classes, 0);
        } catch (const ConfigError& e) {
            return e.what();
        }
        return "";
    };
    const std::string flat = error_of({"conv 8 3x3", "dense 4"}, Shape{32, 1, 1}, 4);
    CHECK(flat.find("model.layers[0] \"conv 8 3x3\"") == 0);
    CHECK(flat.find("flat vector of 32 values") != std::string::npos);
    const std::string big = error_of({"maxpool 2", "maxpool 2", "conv 4 5x5", "dense 10"}, Shape{1, 12, 12}, 10);
    CHECK(big.find("model.layers[2] \"conv 4 5x5\"") == 0);
    CHECK(big.find("1x3x3") != std::string::npos);
    const std::string head = error_of({"conv 4 3x3", "relu", "dense 7"}, Shape{1, 8, 8}, 10);
    CHECK(head.find("model.layers[2] \"dense 7\"") == 0);
    CHECK(head.find("dense 10") != std::string::npos);
    CHECK(error_of({"conv 4 3x3 pad 1", "relu", "maxpool 2", "dense 10"}, Shape{1, 28, 28}, 10).empty());
}

TEST_CASE("layer specs: syntax errors name the layer and the expected form") {
    auto error_of = [](const std::string& text) -> std::string {
        try {
            parse_layer(text, 4);
        } catch (const ConfigError& e) {
            return e.what();
        }
        return "";
    };
    CHECK(error_of("conv 32 5x5 pad 2 stride 2").empty());
    CHECK(error_of("conv 32 5x5 padding 2").find("model.layers[4] \"conv 32 5x5 padding 2\": unknown option") == 0);
    CHECK(error_of("conv 32 5y5").find("kernel size") != std::string::npos);
    CHECK(error_of("dense").find("expected \"dense OUTPUTS\"") != std::string::npos);
    CHECK(error_of("dropout 1.0").find("[0, 1)") != std::string::npos);
    CHECK(error_of("batchnorm").find("unknown layer \"batchnorm\"") != std::string::npos);
    const LayerSpec s = parse_layer("conv 16 3x5 stride 2 pad 1", 0);
    CHECK(s.kernel_h == 3);
    CHECK(s.kernel_w == 5);
    CHECK(s.stride == 2);
    CHECK(s.pad == 1);
}
