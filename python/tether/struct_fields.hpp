// The C++ structs Python sees as dicts, each field named once: one table per struct, read both
// ways where Python also gives values back (ServiceOptions: tether::for_each_service_option,
// through for_each_option in tether_module.cpp). field_count() counts a struct's fields as the compiler sees them, and the
// module's struct_fields() reports it beside each table's names, so a field added to a struct
// and not to its table fails tests/python/defaults_test.py instead of silently missing from
// Python.
#pragma once

#include <tether/curve_keys.hpp>
#include <tether/tether.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tether_python {

// Converts to any field's type: T{AnyField{}, ...} compiles with at most as many as T has fields.
struct AnyField {
    template <typename T>
    operator T() const;
};

// (C++17, as the module is built: no requires-expressions.)
template <typename T, typename... Fields>
decltype(void(T{std::declval<Fields>()...}), std::true_type{}) initializable(int);
template <typename T, typename... Fields>
std::false_type initializable(...);

template <typename T, typename... Fields>
constexpr std::size_t field_count() {
    if constexpr (decltype(initializable<T, Fields..., AnyField>(0))::value)
        return field_count<T, Fields..., AnyField>();
    else
        return sizeof...(Fields);
}

// What WorkerClient::finish() returns, as Python's finish() returns it.
template <typename Visit>
void for_each_field(const tether::WorkerReport& r, Visit visit) {
    visit("worker_id", r.worker_id);
    visit("steps", r.steps);
    visit("samples", r.samples);
    visit("exchanges", r.exchanges);
    visit("bytes_sent", r.bytes_sent);
    visit("bytes_received", r.bytes_received);
    visit("seconds_waiting", r.seconds_waiting);
    visit("rejoins", r.rejoins);
}

// ServiceOptions' fields that are no keyword option: start_center's and connect_spans's own
// arguments (CenterService(initial, strategy, workers, address)).
inline constexpr const char* kOwnArguments[] = {"strategy", "workers", "address"};

// ServiceOptions' fields counted as Python names them: its two bases' fields one by one.
constexpr std::size_t service_option_fields() {
    return field_count<tether::ServiceOptions>() - 2 + field_count<tether::ClusterOptions>() + field_count<tether::CurveKeys>();
}

}  // namespace tether_python
