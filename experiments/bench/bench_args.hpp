// The benchmarks' command lines, read strictly. std::atoi("abc") is 0 and a loose parser drops
// a last flag without its value, so a typo would run a different benchmark than the one asked
// for and print figures all the same; here a flag without its value, a value that is not a number in
// range, or an unknown flag stops the program (exit 2) with a line naming the flag and the value,
// what would be right, and the usage. --help prints the usage (exit 0).
//   BenchArgs args(argc, argv, "tether-bench", "[--threads 1] ...");
//   while (args.next()) {
//       if (args.is("--threads")) threads = int(args.integer(1, 4096));
//       else if (args.is("--json")) json = true;   // a switch: no value
//       else args.unknown();
//   }
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

class BenchArgs {
public:
    BenchArgs(int argc, char** argv, std::string program, std::string usage)
        : argc_(argc), argv_(argv), program_(std::move(program)), usage_(std::move(usage)) {}

    // Moves to the next flag; false when none is left.
    bool next() {
        if (++at_ >= argc_) return false;
        flag_ = argv_[at_];
        if (flag_ == "--help" || flag_ == "-h") {
            std::printf("usage: %s %s\n", program_.c_str(), usage_.c_str());
            std::exit(0);
        }
        return true;
    }
    bool is(const char* flag) const { return flag_ == flag; }

    // The flag's value, taken from the next argument.
    std::string text() {
        if (at_ + 1 >= argc_) fail("needs a value");
        return argv_[++at_];
    }
    // A whole number from min to max.
    long long integer(long long min, long long max) { return whole(text(), min, max); }
    // A number from min to max.
    double number(double min, double max) { return real(text(), min, max); }
    // A comma-separated list of whole numbers, each from min to max.
    std::vector<long long> integers(long long min, long long max) {
        std::vector<long long> out;
        for (const std::string& item : items(text())) out.push_back(whole(item, min, max));
        return out;
    }
    std::vector<double> numbers(double min, double max) {
        std::vector<double> out;
        for (const std::string& item : items(text())) out.push_back(real(item, min, max));
        return out;
    }
    // A comma-separated list of words, each one of `allowed`.
    std::vector<std::string> words(const std::vector<std::string>& allowed) {
        std::vector<std::string> out = items(text());
        for (const std::string& item : out) one_of(item, allowed);
        return out;
    }
    std::string word(const std::vector<std::string>& allowed) { return one_of(text(), allowed); }
    // The value cut at `separator`, empty parts left out (a model's layers: "conv 32 3x3;relu").
    std::vector<std::string> parts(char separator) {
        const std::string value = text();
        std::vector<std::string> out;
        for (std::size_t start = 0; start <= value.size();) {
            const std::size_t end = std::min(value.find(separator, start), value.size());
            if (end > start) out.push_back(value.substr(start, end - start));
            start = end + 1;
        }
        if (out.empty()) fail("needs a value, got \"" + value + "\"");
        return out;
    }

    [[noreturn]] void unknown() const { fail("is not a flag of " + program_); }

private:
    [[noreturn]] void fail(const std::string& why) const {
        std::fprintf(stderr, "%s: %s %s\nusage: %s %s\n", program_.c_str(), flag_.c_str(), why.c_str(), program_.c_str(),
                     usage_.c_str());
        std::exit(2);
    }
    std::vector<std::string> items(const std::string& list) const {
        std::vector<std::string> out;
        std::stringstream in(list);
        for (std::string item; std::getline(in, item, ',');) out.push_back(item);
        if (out.empty() || list.back() == ',') fail("needs a list of values, got \"" + list + "\"");
        return out;
    }
    long long whole(const std::string& value, long long min, long long max) const {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno != 0 || v < min || v > max)
            fail("\"" + value + "\": expected a whole number from " + std::to_string(min) + " to " + std::to_string(max));
        return v;
    }
    double real(const std::string& value, double min, double max) const {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !std::isfinite(v) || v < min || v > max) {
            std::ostringstream range;
            range << "\"" << value << "\": expected a number from " << min << " to " << max;
            fail(range.str());
        }
        return v;
    }
    std::string one_of(const std::string& value, const std::vector<std::string>& allowed) const {
        std::string choices;
        for (const std::string& a : allowed) {
            if (a == value) return value;
            choices += (choices.empty() ? "" : " | ") + a;
        }
        fail("\"" + value + "\": expected " + choices);
    }

    int argc_;
    char** argv_;
    std::string program_, usage_;
    int at_ = 0;
    std::string flag_;
};
