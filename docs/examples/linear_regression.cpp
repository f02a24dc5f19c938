// Linear regression trained by 3 in-process workers with asynchronous EASGD, through tether's
// embedding API. The model, the data and the gradient are the user's: tether only sees one
// flat parameter buffer per worker and a step() call after each local SGD step.
// Built and run by the test suite (tests/meson.build); walked through in docs/embedding.md.
#include <tether/tether.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int kFeatures = 8, kWorkers = 3, kSamplesPerWorker = 2000, kBatch = 32, kEpochs = 20;
constexpr float kLearningRate = 0.05f;

struct Data {
    std::vector<float> x;  // rows of kFeatures
    std::vector<float> y;
};

// y = w* . x + b* + noise, with a fixed w*, b*.
Data make_data(int rows, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    Data d;
    for (int r = 0; r < rows; ++r) {
        float target = 0.5f;  // b*
        for (int j = 0; j < kFeatures; ++j) {
            const float v = normal(rng);
            d.x.push_back(v);
            target += float(j + 1) * 0.25f * v;  // w*_j = (j + 1) / 4
        }
        d.y.push_back(target + 0.01f * normal(rng));
    }
    return d;
}

// Parameters: kFeatures weights then the bias. Mean squared error over rows [first, first+n).
void gradient(const std::vector<float>& p, const Data& d, int first, int n, std::vector<float>& g) {
    std::fill(g.begin(), g.end(), 0.f);
    for (int r = first; r < first + n; ++r) {
        const float* x = &d.x[std::size_t(r) * kFeatures];
        float error = p[kFeatures];
        for (int j = 0; j < kFeatures; ++j) error += p[j] * x[j];
        error -= d.y[std::size_t(r)];
        for (int j = 0; j < kFeatures; ++j) g[j] += 2.f * error * x[j] / float(n);
        g[kFeatures] += 2.f * error / float(n);
    }
}

double mean_squared_error(const std::vector<float>& p, const Data& d) {
    double total = 0;
    for (std::size_t r = 0; r < d.y.size(); ++r) {
        double error = p[kFeatures] - d.y[r];
        for (int j = 0; j < kFeatures; ++j) error += double(p[j]) * d.x[r * kFeatures + j];
        total += error * error;
    }
    return total / double(d.y.size());
}

}  // namespace

int main() {
    const Data test = make_data(1000, 99);
    std::vector<float> initial(kFeatures + 1, 0.f);
    std::printf("initial test MSE %.4f\n", mean_squared_error(initial, test));

    // 1. The center: x~(0) = initial, asynchronous EASGD, 3 workers, every 4 local steps.
    tether::ServiceOptions options;
    options.strategy = R"({"name": "aeasgd", "communication_window": 4})";
    options.workers = kWorkers;
    auto center = tether::CenterService::start(initial, options);

    // 2. Each worker trains its own data shard with plain SGD in its own thread.
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w)
        threads.emplace_back([&, w] {
            const Data shard = make_data(kSamplesPerWorker, 1 + unsigned(w));
            std::vector<float> params(initial.size()), grad(initial.size());
            auto worker = center->connect_worker(params.data(), params.size());  // params <- x~
            for (int epoch = 0; epoch < kEpochs; ++epoch)
                for (int first = 0; first + kBatch <= kSamplesPerWorker; first += kBatch) {
                    gradient(params, shard, first, kBatch, grad);
                    for (std::size_t i = 0; i < params.size(); ++i) params[i] -= kLearningRate * grad[i];
                    worker->step(kBatch);  // tether exchanges every communication_window steps
                }
            const tether::WorkerReport report = worker->finish();
            std::printf("worker %u: %zu steps, %zu exchanges\n", report.worker_id, report.steps, report.exchanges);
        });
    for (auto& t : threads) t.join();

    // 3. The trained center variable.
    const std::vector<float> trained = center->wait();
    const double mse = mean_squared_error(trained, test);
    std::printf("trained test MSE %.5f (noise floor 0.0001); weights", mse);
    for (int j = 0; j < kFeatures; ++j) std::printf(" %.3f", trained[std::size_t(j)]);
    std::printf(", bias %.3f\n", trained[kFeatures]);
    std::printf("center stats: %s\n", center->stats_json().c_str());
    return mse < 1e-3 ? 0 : 1;  // the test suite runs this program and expects success
}
