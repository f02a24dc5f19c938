// damped_sum_strategy.hpp as a plugin of the `tether` command:
//   c++ -std=c++17 -shared -fPIC damped_sum_plugin.cpp $(pkg-config --cflags tether) -o damped_sum.so
//   tether run --plugin ./damped_sum.so config.json      (with "strategy": {"name": "damped-sum"})
// It links nothing of tether: the tether executable provides tether::register_strategy.
#include "damped_sum_strategy.hpp"

extern "C" void tether_register_strategies() { damped_sum::register_it(); }
