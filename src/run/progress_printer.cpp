#include "run/progress_printer.hpp"

#include <unistd.h>

#include <cstdio>

namespace tether {

using Clock = std::chrono::steady_clock;

ProgressPrinter::ProgressPrinter(std::string label, double total_epochs, std::size_t samples_per_epoch, const std::string& curve_set)
    : label_(std::move(label)),
      accuracy_label_(curve_set == "validation" ? "val acc" : "test acc"),
      total_epochs_(total_epochs),
      samples_per_epoch_(samples_per_epoch),
      terminal_(::isatty(STDOUT_FILENO) == 1), started_(Clock::now()), last_line_(started_) {}

ProgressPrinter::~ProgressPrinter() { stop(); }

void ProgressPrinter::start(std::function<LiveStatus()> poll) {
    poll_ = std::move(poll);
    started_ = last_line_ = Clock::now();
    thread_ = std::thread([this] { loop(); });
}

void ProgressPrinter::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    if (status_shown_) std::printf("\r\033[K");
    status_shown_ = false;
    std::fflush(stdout);
}

std::string ProgressPrinter::status_line(const LiveStatus& s, double elapsed) const {
    const double epoch = samples_per_epoch_ ? double(s.samples) / double(samples_per_epoch_) : 0.0;
    const double rate = elapsed > 0 ? double(s.samples) / elapsed : 0.0;
    const double eta = epoch > 0 ? elapsed * (total_epochs_ - epoch) / epoch : 0.0;
    char accuracy[16] = "   -  ";
    if (last_accuracy_ >= 0) std::snprintf(accuracy, sizeof accuracy, "%6.2f%%", 100 * last_accuracy_);
    char line[256];
    std::snprintf(line, sizeof line, "[%s] epoch %5.2f/%g  %s %s  %8.0f samples/s  version %llu  elapsed %6.1fs  eta %6.1fs",
                  label_.c_str(), epoch, total_epochs_, accuracy_label_.c_str(), accuracy, rate, static_cast<unsigned long long>(s.version), elapsed,
                  eta > 0 ? eta : 0.0);
    return line;
}

void ProgressPrinter::loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(terminal_ ? 500 : 1000), [this] { return stopping_; })) {
        const auto now = Clock::now();
        if (!terminal_ && now - last_line_ < std::chrono::seconds(30)) continue;
        const std::string line = status_line(poll_(), std::chrono::duration<double>(now - started_).count());
        if (terminal_) {
            std::printf("\r\033[K%s", line.c_str());
            status_shown_ = true;
        } else {
            std::printf("%s\n", line.c_str());
            last_line_ = now;
        }
        std::fflush(stdout);
    }
}

void ProgressPrinter::report(const EvaluationPoint& p, double samples_per_second) {
    std::lock_guard<std::mutex> lock(mutex_);
    last_accuracy_ = p.accuracy;
    last_line_ = Clock::now();
    const double remaining = p.epoch > 0 ? p.wall_seconds * (total_epochs_ - p.epoch) / p.epoch : 0.0;
    if (status_shown_) std::printf("\r\033[K");  // the evaluation line replaces the status line
    status_shown_ = false;
    std::printf("[%s] epoch %5.2f/%g  train loss %.4f  %s %6.2f%%  %8.0f samples/s  elapsed %6.1fs  eta %6.1fs\n",
                label_.c_str(), p.epoch, total_epochs_, p.train_loss, accuracy_label_.c_str(), 100.0 * p.accuracy, samples_per_second,
                p.wall_seconds, remaining > 0 ? remaining : 0.0);
    std::fflush(stdout);
}

}  // namespace tether
