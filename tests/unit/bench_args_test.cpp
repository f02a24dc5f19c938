// The benchmarks' command lines (experiments/bench/bench_args.hpp): a typo must stop a benchmark with
// exit 2 and a line naming the flag and the value, not run another benchmark than the one
// asked for and print its figures (std::atoi("abc") was 0; a last flag without its value was
// dropped). Each case runs in a child process, as BenchArgs ends the program on bad input.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "../../experiments/bench/bench_args.hpp"
#include "test_support.hpp"

namespace {

struct Outcome {
    int exit_code = -1;
    std::string out, err;
};

// Runs read(args) in a child on `arguments` (after the program's name); the child exits 0
// when read() returns, printing on stdout what it wrote to `seen`.
Outcome parse(const std::vector<std::string>& arguments, const std::function<std::string(BenchArgs&)>& read_flags_of) {
    int out_pipe[2], err_pipe[2];
    REQUIRE(pipe(out_pipe) == 0);
    REQUIRE(pipe(err_pipe) == 0);
    // What this process has buffered would otherwise be written again by the child.
    std::fflush(stdout), std::fflush(stderr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(out_pipe[1], 1), dup2(err_pipe[1], 2);
        close(out_pipe[0]), close(err_pipe[0]);
        std::vector<std::string> words{"tether-bench-x"};
        words.insert(words.end(), arguments.begin(), arguments.end());
        std::vector<char*> argv;
        for (auto& w : words) argv.push_back(w.data());
        argv.push_back(nullptr);
        BenchArgs args(int(words.size()), argv.data(), "tether-bench-x", "[--threads N] [--split a|b] [--json]");
        const std::string seen = read_flags_of(args);
        std::fputs(seen.c_str(), stdout);
        std::fflush(stdout);
        _exit(0);
    }
    close(out_pipe[1]), close(err_pipe[1]);
    const auto drain = [](int fd) {
        std::string text;
        char buffer[4096];
        for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, std::size_t(n));
        close(fd);
        return text;
    };
    Outcome o;
    o.out = drain(out_pipe[0]);
    o.err = drain(err_pipe[0]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return o;
}

// The flags of a small benchmark: --threads (1 to 64), --sizes (a list), --split, --json.
std::string read_flags(BenchArgs& args) {
    std::string seen;
    while (args.next()) {
        if (args.is("--threads")) seen += "threads=" + std::to_string(args.integer(1, 64)) + ";";
        else if (args.is("--sizes")) {
            seen += "sizes=";
            for (long long v : args.integers(1, 1000)) seen += std::to_string(v) + ",";
            seen += ";";
        } else if (args.is("--rate")) seen += "rate=" + std::to_string(args.number(0, 1)) + ";";
        else if (args.is("--split")) seen += "split=" + args.word({"a", "b"}) + ";";
        else if (args.is("--layers")) seen += "layers=" + std::to_string(args.parts(';').size()) + ";";
        else if (args.is("--json")) seen += "json;";
        else args.unknown();
    }
    return seen;
}

using tether::testing::contains;

}  // namespace

TEST_CASE("good values are read in the order given") {
    const Outcome o = parse({"--threads", "8", "--sizes", "1,2,30", "--split", "b", "--json", "--rate", "0.25",
                             "--layers", "conv 8 3x3;relu;;dense 10"},
                            read_flags);
    CHECK(o.exit_code == 0);
    CHECK(o.out == "threads=8;sizes=1,2,30,;split=b;json;rate=0.250000;layers=3;");
    CHECK(o.err.empty());
}

TEST_CASE("a value that is not a whole number in range stops the program, naming flag and value") {
    for (const std::string bad : {"abc", "0", "65", "4x", "", "99999999999999999999"}) {
        CAPTURE(bad);
        const Outcome o = parse({"--threads", bad}, read_flags);
        CHECK(o.exit_code == 2);
        CHECK(contains(o.err, "tether-bench-x: --threads \"" + bad + "\": expected a whole number from 1 to 64"));
        CHECK(contains(o.err, "usage: tether-bench-x [--threads N]"));
        CHECK(o.out.empty());  // nothing ran
    }
}

TEST_CASE("a bad list item, a last flag without its value, a word not offered, an unknown flag") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"--sizes", "1,x,3"}, "--sizes \"x\": expected a whole number from 1 to 1000"},
        {{"--sizes", "1,2,"}, "--sizes needs a list of values, got \"1,2,\""},
        {{"--rate", "nan"}, "--rate \"nan\": expected a number from 0 to 1"},
        {{"--json", "--threads"}, "--threads needs a value"},
        {{"--split", "c"}, "--split \"c\": expected a | b"},
        {{"--thread", "2"}, "--thread is not a flag of tether-bench-x"},
        {{"--layers", ";"}, "--layers needs a value"},
    };
    for (const auto& [arguments, message] : cases) {
        CAPTURE(message);
        const Outcome o = parse(arguments, read_flags);
        CHECK(o.exit_code == 2);
        CHECK(contains(o.err, message));
        CHECK(o.out.empty());
    }
}

TEST_CASE("--help prints the usage and exits 0") {
    const Outcome o = parse({"--threads", "2", "--help"}, read_flags);
    CHECK(o.exit_code == 0);
    CHECK(contains(o.out, "usage: tether-bench-x [--threads N] [--split a|b] [--json]"));
    CHECK(o.err.empty());
}
