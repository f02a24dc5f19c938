// The Python binding: tether's embedding API (include/tether/tether.hpp) over NumPy arrays and
// PyTorch tensors, without copies. A worker's parameters stay in the caller's buffers, passed
// here as (data pointer, element count) after python/tether/__init__.py checked them (float32,
// contiguous, writable, one kind of memory); tether reads and writes them in place when step()
// exchanges. Calls that wait on the network or on the center release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tether/schedule.hpp>
#include <tether/strategy.hpp>
#include <tether/tether.hpp>

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "struct_fields.hpp"

namespace py = pybind11;

namespace {

using FloatArray = py::array_t<float, py::array::c_style>;

// The parameter buffers as the Python layer checked them: (data pointer, element count).
using RawSpans = std::vector<std::pair<std::uintptr_t, std::size_t>>;

std::vector<tether::ParameterSpan> spans_of(const RawSpans& raw) {
    std::vector<tether::ParameterSpan> spans;
    for (const auto& [pointer, count] : raw) spans.push_back({reinterpret_cast<float*>(pointer), count});
    return spans;
}

FloatArray to_numpy(const std::vector<float>& x) {
    FloatArray out(py::ssize_t(x.size()));
    std::copy(x.begin(), x.end(), out.mutable_data());
    return out;
}

// The options the Python layer may set, by name: ServiceOptions' own table
// (<tether/tether.hpp>), less the arguments start_center and connect_spans take themselves.
// One table for the defaults Python reads (default_options) and for the dict it passes back
// (options_from). Python has already refused unknown names; the C++ side checks values.
template <typename Options, typename Visit>
void for_each_option(Options& o, Visit visit) {
    tether::for_each_service_option(o, [&](const tether::OptionName& name, auto& field, const tether::OptionLimits&) {
        for (const char* own : tether_python::kOwnArguments)
            if (std::string(name.field_name()) == own) return;
        visit(name.field_name(), field);
    });
}

// `strategy` and `workers` None: ServiceOptions' defaults.
tether::ServiceOptions options_from(const std::optional<std::string>& strategy, std::optional<int> workers,
                                    const std::string& address, const py::dict& options) {
    tether::ServiceOptions o;
    if (strategy) o.strategy = *strategy;
    if (workers) o.workers = *workers;
    o.address = address;
    for_each_option(o, [&](const char* name, auto& field) {
        using Field = std::remove_reference_t<decltype(field)>;
        if (!options.contains(name)) return;
        const py::handle value = options[name];
        // bool is an int in Python, and pybind11 would read True as 1 server: refuse it by name.
        const bool is_bool = py::isinstance<py::bool_>(value);
        try {
            if (is_bool != std::is_same_v<Field, bool>) throw py::cast_error();
            field = value.cast<Field>();
        } catch (const py::cast_error&) {
            const char* expected = std::is_same_v<Field, bool>          ? "bool"
                                   : std::is_same_v<Field, std::string> ? "str"
                                   : std::is_integral_v<Field>          ? "int"
                                                                        : "float";
            throw py::type_error(std::string("option ") + name + ": expected " + expected + ", got " +
                                 py::str(value.get_type().attr("__name__")).cast<std::string>() + " " +
                                 py::repr(value).cast<std::string>());
        }
    });
    return o;
}

// A WorkerClient that keeps the Python objects owning its buffers alive.
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
    tether_python::for_each_field(r, [&](const char* name, const auto& field) { d[name] = field; });
    return d;
}

// Each struct Python sees as a dict: (the names its table gives, the fields the struct has).
py::dict struct_fields() {
    py::list report_names, key_names, option_names;
    const auto into = [](py::list& names) { return [&names](const char* name, const auto&) { names.append(name); }; };
    const tether::WorkerReport report;
    tether_python::for_each_field(report, into(report_names));
    const tether::CurveKeys keys;
    tether::for_each_curve_key(keys, into(key_names));
    for (const char* name : tether_python::kOwnArguments) option_names.append(name);
    const tether::ServiceOptions options;
    for_each_option(options, into(option_names));
    py::dict fields;
    fields["WorkerReport"] = py::make_tuple(report_names, tether_python::field_count<tether::WorkerReport>());
    fields["CurveKeys"] = py::make_tuple(key_names, tether_python::field_count<tether::CurveKeys>());
    fields["ServiceOptions"] = py::make_tuple(option_names, tether_python::service_option_fields());
    return fields;
}

// pybind11 before 2.12 reads NumPy 2's array descriptors with NumPy 1's layout: an array's
// item size comes out wrong and every element of a float32 array reads as its first, silently
// (measured: a model's x~ of 0.3, -0.4, ... arrived as -0.0045 everywhere). Refuse at import.
void refuse_numpy_this_pybind11_cannot_read() {
#if PYBIND11_VERSION_MAJOR == 2 && PYBIND11_VERSION_MINOR < 12
    const std::string version = py::module_::import("numpy").attr("__version__").cast<std::string>();
    if (!version.empty() && version[0] >= '2' && version[0] <= '9' && version[1] == '.')
        throw py::import_error("tether: this build's pybind11 (" + std::to_string(PYBIND11_VERSION_MAJOR) + "." +
                               std::to_string(PYBIND11_VERSION_MINOR) + ", Debian 12's) reads only NumPy 1 arrays, "
                               "but NumPy " + version + " is imported here; use NumPy 1 in this environment "
                               "(pip install 'numpy<2'), or build tether for it with pybind11 2.12 or later "
                               "(pip install . in this environment, docs/python.md)");
#endif
}

}  // namespace

PYBIND11_MODULE(_tether, m) {
    refuse_numpy_this_pybind11_cannot_read();
    m.doc() = "tether: asynchronous elastic-averaging distributed training (C++ core)";
    m.attr("__version__") = TETHER_VERSION;
    m.attr("pybind11_version") = py::make_tuple(PYBIND11_VERSION_MAJOR, PYBIND11_VERSION_MINOR);  // built with
    // tether's errors (std::runtime_error and below) as tether.TetherError, a RuntimeError;
    // pybind11's own (TypeError, ValueError, ...) derive from std::runtime_error too and are
    // passed on as what they are.
    static py::exception<std::runtime_error> tether_error(m, "TetherError", PyExc_RuntimeError);
    // CenterService::wait() on a failed run: a TetherError too.
    static py::exception<tether::RunFailedError> run_failed(m, "RunFailedError", tether_error.ptr());
    // Local to this module: a global translator would also turn other pybind11 modules'
    // std::runtime_errors (torch.distributed's gloo errors under DDP) into TetherError.
    py::register_local_exception_translator([](std::exception_ptr failure) {
        try {
            if (failure) std::rethrow_exception(failure);
        } catch (const py::builtin_exception&) {
            throw;
        } catch (const tether::RunFailedError& e) {
            run_failed(e.what());
        } catch (const std::runtime_error& e) {
            tether_error(e.what());
        }
    });

    m.def(
        "launcher_keys",
        [](int rank, const std::string& job_id, const std::string& directory, std::optional<int> join_timeout_ms) {
            tether::ServiceOptions o;  // None: its join_timeout_ms, the default
            if (join_timeout_ms) o.join_timeout_ms = *join_timeout_ms;
            {
                py::gil_scoped_release release;  // a rank > 0 waits for rank 0's secret
                o = tether::with_launcher_keys(o, rank, job_id, directory);
            }
            py::dict keys;
            tether::for_each_curve_key(o.curve_keys(), [&](const char* name, const std::string& key) { keys[name] = key; });
            return keys;
        },
        py::arg("rank"), py::arg("job_id"), py::arg("directory") = "", py::arg("join_timeout_ms") = py::none());
    m.def("remove_launcher_secret", &tether::remove_launcher_secret, py::arg("rank"), py::arg("job_id"),
          py::arg("directory") = "", "Rank 0, once its center is done: removes the secret launcher_keys wrote.");
    m.def("set_flush_denormals", &tether::set_flush_denormals, py::arg("on") = true,
          "Flush denormal floats to zero on the calling thread (tether never changes yours).");
    m.def("load_plugin", &tether::load_plugin, py::arg("path"),
          "Load a shared library of strategies (a plugin built against <tether/strategy.hpp>, as for tether --plugin); "
          "its strategies may then be named like the built-ins.");

    // A launcher's environment (torchrun, srun, mpirun), read by the same function as the CLI's.
    py::class_<tether::Launcher>(m, "Launcher")
        .def_readonly("name", &tether::Launcher::name)
        .def_readonly("rank", &tether::Launcher::rank)
        .def_readonly("world_size", &tether::Launcher::world_size)
        .def_readonly("local_rank", &tether::Launcher::local_rank)
        .def_readonly("local_world_size", &tether::Launcher::local_world_size)
        .def_readonly("center_host", &tether::Launcher::center_host)
        .def_readonly("port", &tether::Launcher::port)
        .def_readonly("job_id", &tether::Launcher::job_id)
        .def_readonly("attempt", &tether::Launcher::attempt)
        .def_readonly("variables", &tether::Launcher::variables)
        .def_readonly("center_variables", &tether::Launcher::center_variables)
        .def_readwrite("connect_timeout_ms", &tether::Launcher::connect_timeout_ms)
        .def_readonly("host", &tether::Launcher::host)
        .def("rank_server_bind_address", &tether::Launcher::rank_server_bind_address)
        .def("rank_server_address", &tether::Launcher::rank_server_address)
        .def("workers", &tether::Launcher::workers, py::arg("center_trains"))
        .def("check_workers", &tether::Launcher::check_workers, py::arg("given"), py::arg("center_trains"), py::arg("key"))
        .def("center_address", &tether::Launcher::center_address, py::arg("servers") = 1)
        .def("bind_address", &tether::Launcher::bind_address, py::arg("servers") = 1)
        .def("wait_for_center", &tether::Launcher::wait_for_center, py::arg("address"),
             py::call_guard<py::gil_scoped_release>())
        .def("__repr__", [](const tether::Launcher& l) {
            return "<tether.Launcher " + l.name + " rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) +
                   ", center " + (l.center_host.empty() ? "?" : l.center_host) + ":" + std::to_string(l.port) + ">";
        });
    m.def("read_launcher", [] { return tether::read_launcher(); },
          "This process's launcher (torchrun, srun, mpirun ...) from its environment, or None.");

    m.def("keep_freed_memory_mapped", &tether::keep_freed_memory_mapped,
          "Keep freed memory mapped for the whole process (glibc): a center receiving ~1 MB exchanges over tcp "
          "otherwise faults each one in afresh. Returns False where the C library has no such setting.");

    py::class_<Worker>(m, "Worker")
        .def(
            "step",
            [](Worker& w, std::size_t samples) {
                py::gil_scoped_release unlocked;
                return w.client->step(samples);
            },
            py::arg("samples") = 0)
        .def("finish",
             [](Worker& w) {
                 tether::WorkerReport r;
                 {
                     py::gil_scoped_release unlocked;
                     r = w.client->finish();
                 }
                 return report_dict(r);
             })
        // (name, value) pairs, as python/tether/__init__.py checked them.
        .def(
            "log",
            [](Worker& w, const std::vector<std::pair<std::string, double>>& scalars) {
                py::gil_scoped_release unlocked;  // it may wait for the channel when many logs queue up
                w.client->log(scalars);
            },
            py::arg("scalars"))
        .def_property_readonly("id", [](const Worker& w) { return w.client->id(); })
        .def_property_readonly("running", [](const Worker& w) { return w.client->running(); })
        .def(
            "lease",
            [](Worker& w, std::uint64_t samples, std::uint64_t total) {
                tether::Lease l;
                {
                    py::gil_scoped_release unlocked;
                    l = w.client->lease(samples, total);
                }
                return py::make_tuple(l.start, l.count);
            },
            py::arg("samples"), py::arg("total") = 0)
        .def("ask_lease", [](Worker& w, std::uint64_t samples, std::uint64_t total) { w.client->ask_lease(samples, total); },
             py::arg("samples"), py::arg("total") = 0)
        .def_property_readonly("communication_window", [](const Worker& w) { return w.client->communication_window(); })
        .def_property_readonly("place_samples", [](const Worker& w) { return w.client->place_samples(); });

    m.def(
        "connect_spans",
        [](const std::string& address, const RawSpans& spans, bool cuda, py::object owners, const std::string& strategy,
           int workers, const py::dict& service_options, const RawSpans& buffers) {
            const auto options = options_from(strategy, workers, "", service_options);
            return joined(std::move(owners), [&] {
                return tether::WorkerClient::connect(address, options, spans_of(spans),
                                                     cuda ? tether::Memory::cuda : tether::Memory::host, spans_of(buffers));
            });
        },
        py::arg("address"), py::arg("spans"), py::arg("cuda"), py::arg("owners"), py::arg("strategy"),
        py::arg("workers"), py::arg("options"), py::arg("buffers") = RawSpans{});

    py::class_<tether::CenterService>(m, "CenterService")
        .def_property_readonly("address", &tether::CenterService::address)
        .def_property_readonly("is_center", &tether::CenterService::is_center)
        .def("wait",
             [](tether::CenterService& s) {
                 std::vector<float> x;
                 {
                     py::gil_scoped_release unlocked;
                     x = s.wait();
                 }
                 return to_numpy(x);
             })
        .def("snapshot",
             [](const tether::CenterService& s) {
                 tether::CenterSnapshot snapshot;
                 {
                     py::gil_scoped_release unlocked;  // it waits for the center to finish one message
                     snapshot = s.snapshot();
                 }
                 return py::make_tuple(to_numpy(snapshot.x), snapshot.version);
             })
        // x~, its version and b~ (the averaged model buffers), taken together.
        .def("snapshot_with_buffers",
             [](const tether::CenterService& s) {
                 tether::CenterSnapshot snapshot;
                 {
                     py::gil_scoped_release unlocked;
                     snapshot = s.snapshot();
                 }
                 return py::make_tuple(to_numpy(snapshot.x), snapshot.version, to_numpy(snapshot.buffers));
             })
        .def("stats_json", &tether::CenterService::stats_json, py::call_guard<py::gil_scoped_release>())
        .def(
            "connect_spans",
            [](tether::CenterService& s, const RawSpans& spans, bool cuda, py::object owners, const RawSpans& buffers) {
                return joined(std::move(owners), [&] {
                    return s.connect_worker(spans_of(spans), cuda ? tether::Memory::cuda : tether::Memory::host,
                                            spans_of(buffers));
                });
            },
            py::arg("spans"), py::arg("cuda"), py::arg("owners"), py::arg("buffers") = RawSpans{});

    m.def(
        "load_checkpoint",
        [](const std::string& path) {
            tether::CenterSnapshot c;
            {
                py::gil_scoped_release unlocked;
                c = tether::load_checkpoint(path);
            }
            return py::make_tuple(to_numpy(c.x), c.version, to_numpy(c.buffers));
        },
        py::arg("path"));
    m.def(
        "has_checkpoint",
        [](const py::kwargs& options) { return tether::has_checkpoint(options_from(std::nullopt, std::nullopt, "", options)); },
        "Whether run_dir holds every checkpoint a CenterService with these options and resume=True reads.");

    m.def("struct_fields", &struct_fields);

    // The C++ defaults, so the Python layer never keeps a second copy of them: the options', and
    // cluster.center_trains's, which tether.torch.Worker.from_env's center_trains is.
    m.attr("default_center_trains") = tether::kCenterTrainsByDefault;
    m.def("default_options", [] {
        tether::ServiceOptions o;
        py::dict d;
        for_each_option(o, [&](const char* name, const auto& field) { d[name] = field; });
        return d;
    });

    m.def(
        "start_center",
        [](FloatArray initial, const std::optional<std::string>& strategy, std::optional<int> workers,
           const std::string& address, const py::dict& service_options, FloatArray initial_buffers) {
            std::vector<float> x(initial.data(), initial.data() + initial.size());
            std::vector<float> b(initial_buffers.data(), initial_buffers.data() + initial_buffers.size());
            const auto options = options_from(strategy, workers, address, service_options);
            return tether::CenterService::start(std::move(x), options, std::move(b));
        },
        py::arg("initial"), py::arg("strategy"), py::arg("workers"), py::arg("address"), py::arg("options"),
        py::arg("initial_buffers") = FloatArray(0));

    // <tether/tether.hpp>'s Standby: a center in waiting; `center` once it took over (owned by it).
    py::class_<tether::Standby>(m, "Standby")
        .def_property_readonly("took_over", &tether::Standby::took_over)
        .def_property_readonly("copies", &tether::Standby::copies)
        .def_property_readonly("center", &tether::Standby::center, py::return_value_policy::reference_internal)
        .def("stand_down", &tether::Standby::stand_down, py::call_guard<py::gil_scoped_release>());
    m.def(
        "start_standby",
        [](FloatArray initial, const std::optional<std::string>& strategy, std::optional<int> workers,
           const std::string& address, const std::string& center, const py::dict& service_options,
           FloatArray initial_buffers) {
            std::vector<float> x(initial.data(), initial.data() + initial.size());
            std::vector<float> b(initial_buffers.data(), initial_buffers.data() + initial_buffers.size());
            return tether::Standby::start(std::move(x), options_from(strategy, workers, address, service_options), center,
                                          std::move(b));
        },
        py::arg("initial"), py::arg("strategy"), py::arg("workers"), py::arg("address"), py::arg("center"),
        py::arg("options"), py::arg("initial_buffers") = FloatArray(0));

    // <tether/schedule.hpp>: a training.optimizer.schedule block (a dict or its JSON text) over a
    // loop's planned steps, for an optimizer the caller owns (docs/python.md: with LambdaLR, which
    // calls it and saves its __dict__ in state_dict(): hence __call__ and dynamic_attr).
    py::class_<tether::LearningRateSchedule>(m, "LearningRateSchedule", py::dynamic_attr(),
                                             "LearningRateSchedule(schedule, total_steps, steps_per_epoch=0, warmup_steps=0): "
                                             "scale(step) is the factor for the learning rate of step `step` (from 0).")
        .def(py::init([](const py::object& schedule, std::size_t total_steps, std::size_t steps_per_epoch,
                         std::size_t warmup_steps) {
                 const py::object text = py::isinstance<py::str>(schedule) ? schedule : py::module_::import("json").attr("dumps")(schedule);
                 return tether::LearningRateSchedule(text.cast<std::string>(), total_steps, steps_per_epoch, warmup_steps);
             }),
             py::arg("schedule"), py::arg("total_steps"), py::arg("steps_per_epoch") = 0, py::arg("warmup_steps") = 0)
        .def("scale", &tether::LearningRateSchedule::scale, py::arg("step"))
        .def("__call__", &tether::LearningRateSchedule::scale, py::arg("step"))
        .def_property_readonly("total_steps", &tether::LearningRateSchedule::total_steps)
        .def_property_readonly("warmup_steps", &tether::LearningRateSchedule::warmup_steps);
}
