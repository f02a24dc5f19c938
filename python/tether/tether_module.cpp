// The Python binding: tether's embedding API (include/tether/tether.hpp) over NumPy arrays and
// PyTorch tensors, without copies. A worker's parameters stay in the caller's buffer (a
// float32 C-contiguous NumPy array, or any tensor through its data pointer); tether reads and
// writes them in place when step() exchanges. Calls that wait on the network release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tether/tether.hpp>

#include <memory>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

using FloatArray = py::array_t<float, py::array::c_style>;

// The buffer must be float32, C-contiguous and writable: anything else would need a copy,
// and tether would then train the copy, not the caller's model.
float* writable_floats(py::array& array) {
    if (!py::isinstance<FloatArray>(array) || !(array.flags() & py::array::c_style))
        throw py::type_error("tether needs a float32, C-contiguous array (got dtype " +
                             std::string(py::str(array.dtype())) + "); use numpy.ascontiguousarray(x, dtype=numpy.float32)");
    if (!array.writeable()) throw py::value_error("tether writes the parameters in place: the array must be writable");
    return static_cast<float*>(array.mutable_data());
}

tether::ServiceOptions options_from(const std::string& strategy, int workers, const std::string& address,
                                    int join_timeout_ms, int worker_timeout_ms, int reply_timeout_ms,
                                    int round_timeout_ms, double quorum) {
    tether::ServiceOptions o;
    o.strategy = strategy;
    o.workers = workers;
    o.address = address;
    o.join_timeout_ms = join_timeout_ms;
    o.worker_timeout_ms = worker_timeout_ms;
    o.reply_timeout_ms = reply_timeout_ms;
    o.round_timeout_ms = round_timeout_ms;
    o.quorum = quorum;
    return o;
}

// A WorkerClient that keeps the Python object owning its buffer alive.
struct Worker {
    std::unique_ptr<tether::WorkerClient> client;
    py::object owner;
};

// Joins with the GIL released (joining waits for the center) and keeps `owner` alive as long
// as the worker. On an exception the GIL is taken back before `owner` is released.
template <typename Connect>
std::unique_ptr<Worker> joined(py::object owner, Connect connect) {
    auto worker = std::make_unique<Worker>();
    worker->owner = std::move(owner);
    py::gil_scoped_release unlocked;
    worker->client = connect();
    return worker;
}

py::dict report_dict(const tether::WorkerReport& r) {
    py::dict d;
    d["worker_id"] = r.worker_id;
    d["steps"] = r.steps;
    d["samples"] = r.samples;
    d["exchanges"] = r.exchanges;
    d["bytes_sent"] = r.bytes_sent;
    d["bytes_received"] = r.bytes_received;
    d["seconds_waiting"] = r.seconds_waiting;
    return d;
}

}  // namespace

PYBIND11_MODULE(_tether, m) {
    m.doc() = "tether: asynchronous elastic-averaging distributed training (C++ core)";
    m.attr("__version__") = TETHER_VERSION;
    // tether's errors (std::runtime_error and below) as tether.TetherError, a RuntimeError;
    // pybind11's own (TypeError, ValueError, ...) derive from std::runtime_error too and are
    // passed on as what they are.
    static py::exception<std::runtime_error> tether_error(m, "TetherError", PyExc_RuntimeError);
    py::register_exception_translator([](std::exception_ptr failure) {
        try {
            if (failure) std::rethrow_exception(failure);
        } catch (const py::builtin_exception&) {
            throw;
        } catch (const std::runtime_error& e) {
            tether_error(e.what());
        }
    });

    m.def("set_flush_denormals", &tether::set_flush_denormals, py::arg("on") = true,
          "Flush denormal floats to zero on the calling thread (tether never changes yours).");

    py::class_<Worker>(m, "WorkerClient")
        .def(
            "step",
            [](Worker& w, std::size_t samples) {
                py::gil_scoped_release unlocked;
                return w.client->step(samples);
            },
            py::arg("samples") = 0,
            "Call after each local optimizer step; exchanges with the center every communication window. "
            "Returns True when it exchanged.")
        .def("finish",
             [](Worker& w) {
                 tether::WorkerReport r;
                 {
                     py::gil_scoped_release unlocked;
                     r = w.client->finish();
                 }
                 return report_dict(r);
             })
        .def_property_readonly("id", [](const Worker& w) { return w.client->id(); });

    m.def(
        "connect_array",
        [](const std::string& address, py::array array, const std::string& strategy, int workers, int join_timeout_ms,
           int worker_timeout_ms, int reply_timeout_ms, int round_timeout_ms, double quorum) {
            float* data = writable_floats(array);
            const std::size_t count = std::size_t(array.size());
            const auto options = options_from(strategy, workers, "", join_timeout_ms, worker_timeout_ms,
                                              reply_timeout_ms, round_timeout_ms, quorum);
            return joined(array, [&] {
                return tether::WorkerClient::connect(address, options, data, count, tether::Memory::host);
            });
        },
        py::arg("address"), py::arg("array"), py::arg("strategy"), py::arg("workers"), py::arg("join_timeout_ms"),
        py::arg("worker_timeout_ms"), py::arg("reply_timeout_ms"), py::arg("round_timeout_ms"), py::arg("quorum"));

    m.def(
        "connect_pointer",
        [](const std::string& address, std::uintptr_t pointer, std::size_t count, bool cuda, py::object owner,
           const std::string& strategy, int workers, int join_timeout_ms, int worker_timeout_ms, int reply_timeout_ms,
           int round_timeout_ms, double quorum) {
            const auto options = options_from(strategy, workers, "", join_timeout_ms, worker_timeout_ms,
                                              reply_timeout_ms, round_timeout_ms, quorum);
            return joined(owner, [&] {
                return tether::WorkerClient::connect(address, options, reinterpret_cast<float*>(pointer), count,
                                                     cuda ? tether::Memory::cuda : tether::Memory::host);
            });
        },
        py::arg("address"), py::arg("pointer"), py::arg("count"), py::arg("cuda"), py::arg("owner"), py::arg("strategy"),
        py::arg("workers"), py::arg("join_timeout_ms"), py::arg("worker_timeout_ms"), py::arg("reply_timeout_ms"),
        py::arg("round_timeout_ms"), py::arg("quorum"));

    py::class_<tether::CenterService>(m, "CenterService")
        .def_property_readonly("address", &tether::CenterService::address)
        .def("wait",
             [](tether::CenterService& s) {
                 std::vector<float> x;
                 {
                     py::gil_scoped_release unlocked;
                     x = s.wait();
                 }
                 FloatArray out(py::ssize_t(x.size()));
                 std::copy(x.begin(), x.end(), out.mutable_data());
                 return out;
             })
        .def("stats_json", &tether::CenterService::stats_json)
        .def(
            "connect_worker",
            [](tether::CenterService& s, py::array array) {
                float* data = writable_floats(array);
                const std::size_t count = std::size_t(array.size());
                return joined(array, [&] { return s.connect_worker(data, count, tether::Memory::host); });
            },
            py::arg("array"), "A worker in this process (the center's private inproc:// address works too).");

    // The C++ defaults, so the Python layer never keeps a second copy of them.
    m.def("default_options", [] {
        const tether::ServiceOptions o;
        py::dict d;
        d["join_timeout_ms"] = o.join_timeout_ms;
        d["worker_timeout_ms"] = o.worker_timeout_ms;
        d["reply_timeout_ms"] = o.reply_timeout_ms;
        d["round_timeout_ms"] = o.round_timeout_ms;
        d["quorum"] = o.quorum;
        return d;
    });

    m.def(
        "start_center",
        [](FloatArray initial, const std::string& strategy, int workers, const std::string& address, int join_timeout_ms,
           int worker_timeout_ms, int reply_timeout_ms, int round_timeout_ms, double quorum) {
            std::vector<float> x(initial.data(), initial.data() + initial.size());
            const auto options = options_from(strategy, workers, address, join_timeout_ms, worker_timeout_ms,
                                              reply_timeout_ms, round_timeout_ms, quorum);
            return tether::CenterService::start(std::move(x), options);
        },
        py::arg("initial"), py::arg("strategy"), py::arg("workers"), py::arg("address"), py::arg("join_timeout_ms"),
        py::arg("worker_timeout_ms"), py::arg("reply_timeout_ms"), py::arg("round_timeout_ms"), py::arg("quorum"));
}
