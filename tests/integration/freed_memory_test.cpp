// keep_freed_memory_mapped() (tether.hpp) on the path it is for: a center answering 4 workers
// over tcp, each exchange a ~1 MB message ZeroMQ allocates on receipt and tether frees. With
// glibc's defaults this path faulted ~100 pages in per exchange (tether-bench-center, 4
// clients); with freed memory kept mapped it reuses what it freed. Its own executable: the
// setting is for the whole process.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <tether/tether.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace {

long minor_page_faults() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

}  // namespace

TEST_CASE("with freed memory kept mapped, a center's exchanges over tcp stop faulting pages in") {
#if !(defined(__GLIBC__) && __SIZEOF_POINTER__ == 8)
    CHECK_FALSE(tether::keep_freed_memory_mapped());  // no such settings: it says so
    return;
#endif
    REQUIRE(tether::keep_freed_memory_mapped());
    const std::size_t n = 235146;  // the default MLP: 940 KB a message
    const int workers = 4, warmup = 50, measured = 200;
    tether::ServiceOptions o;
    o.strategy = R"({"name": "downpour", "communication_window": 1})";
    o.workers = workers;
    o.address = "tcp://127.0.0.1:*";
    auto center = tether::CenterService::start(std::vector<float>(n, 0.f), o);
    std::atomic<int> warm{0};
    std::atomic<long> faults_before{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w)
        threads.emplace_back([&] {
            std::vector<float> x(n, 0.f);
            auto worker = center->connect_worker(x.data(), x.size());
            for (int s = 0; s < warmup; ++s) worker->step(1);
            // Every worker past its warm-up before the count starts; the first one to see all
            // of them there takes the count.
            if (++warm == workers) faults_before = minor_page_faults();
            while (warm < workers || faults_before == 0) std::this_thread::yield();
            for (int s = 0; s < measured; ++s) worker->step(1);
            worker->finish();
        });
    for (auto& t : threads) t.join();
    const long faults = minor_page_faults() - faults_before;
    center->wait();
    const double per_exchange = double(faults) / double(workers * measured);
    MESSAGE("minor page faults per exchange: " << per_exchange << " (a message is " << n * sizeof(float) / 4096
                                                << " pages)");
    CHECK(per_exchange < 5.0);
}
