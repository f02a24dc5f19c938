// The center's book of leases (center/leases.hpp): blocks in order, a departed worker's rest
// served first to the next ask, and the run's last positions shared among the live workers.
#include <doctest/doctest.h>

#include "center/leases.hpp"

using tether::LeaseCounts;
using tether::Leases;

TEST_CASE("leases: fresh blocks in order, none past the run's positions") {
    LeaseCounts counts;
    Leases book(counts, 1000);
    CHECK(book.grant(0, 300, 0, 0, 0).start == 0);
    CHECK(book.grant(1, 300, 0, 0, 0).start == 300);
    CHECK(book.grant(0, 300, 0, 0, 0).start == 600);
    const auto last = book.grant(1, 300, 0, 0, 0);
    CHECK(last.start == 900);
    CHECK(last.count == 100);
    CHECK(book.grant(0, 300, 0, 0, 0).count == 0);  // no work is left
    CHECK(counts.granted == 1000);
}

TEST_CASE("leases: what a departed worker had not exchanged goes to the next ask") {
    LeaseCounts counts;
    Leases book(counts, 0);  // unbounded until a worker names a total
    book.grant(0, 100, 0, 0, 10'000);   // [0, 100), from its sample 0
    book.grant(0, 100, 50, 0, 10'000);  // [100, 200), from its sample 100
    book.grant(1, 100, 0, 0, 10'000);   // [200, 300)
    book.release(0, 150);               // it exchanged 150 samples: [150, 200) is untrained
    const auto again = book.grant(1, 100, 100, 100, 10'000);
    CHECK(again.start == 150);
    CHECK(again.count == 50);
    CHECK(book.grant(1, 100, 150, 150, 10'000).start == 300);  // then fresh ones
    CHECK(counts.returned_positions == 50);
    CHECK(counts.served_again == 50);
    CHECK(counts.positions == 10'000);
}

TEST_CASE("leases: the last positions are shared among the live workers, at least an eighth of a block each") {
    LeaseCounts counts;
    Leases book(counts, 1000);
    CHECK(book.grant(0, 320, 0, 0, 0, 2).count == 320);
    CHECK(book.grant(1, 320, 0, 0, 0, 2).count == 320);
    CHECK(book.grant(0, 320, 0, 0, 0, 2).count == 180);  // 360 left for 2 workers
    CHECK(book.grant(1, 320, 0, 0, 0, 2).count == 90);   // 180 left
    CHECK(book.grant(0, 320, 0, 0, 0, 2).count == 45);   // 90 left: 45, above 320 / 8 = 40
    CHECK(book.grant(1, 320, 0, 0, 0, 2).count == 40);   // 45 left: the floor
    CHECK(book.grant(0, 320, 0, 0, 0, 2).count == 5);
    CHECK(book.grant(1, 320, 0, 0, 0, 2).count == 0);
}

TEST_CASE("leases: an unbounded stream hands out whole blocks, however many workers") {
    LeaseCounts counts;
    Leases book(counts, 0);
    for (int i = 0; i < 5; ++i) CHECK(book.grant(std::uint32_t(i % 4), 320, 0, 0, 0, 4).count == 320);
}
