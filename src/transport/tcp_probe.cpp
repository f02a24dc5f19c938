#include "transport/tcp_probe.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace tether {

namespace {

bool split(const std::string& address, std::string& host, std::string& port) {
    if (address.rfind("tcp://", 0) != 0) return false;
    const std::string rest = address.substr(6);
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) return false;
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return true;
}

// One non-blocking connect, waited for at most `timeout_ms`.
bool accepted(const addrinfo& a, int timeout_ms, std::string& why) {
    const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
    if (fd < 0) {
        why = std::strerror(errno);
        return false;
    }
    std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* f) {
        ::close(*f);
        delete f;
    });
    if (::connect(fd, a.ai_addr, a.ai_addrlen) == 0) return true;
    if (errno != EINPROGRESS) {
        why = std::strerror(errno);
        return false;
    }
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready <= 0) {
        why = ready == 0 ? "no answer within " + std::to_string(timeout_ms) + " ms" : std::strerror(errno);
        return false;
    }
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0) why = std::strerror(error);
    return error == 0;
}

}  // namespace

bool tcp_listening(const std::string& address, int timeout_ms, std::string& why) {
    std::string host, port;
    if (!split(address, host, port)) {
        why = "not a tcp://HOST:PORT address";
        return false;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int status = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); status != 0) {
        why = "cannot resolve host \"" + host + "\": " + ::gai_strerror(status);
        return false;
    }
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
    for (const addrinfo* a = found; a; a = a->ai_next)
        if (accepted(*a, timeout_ms, why)) return true;
    return false;
}

std::string local_address_toward(const std::string& address) {
    std::string host, port;
    if (!split(address, host, port)) throw std::runtime_error(address + ": not a tcp://HOST:PORT address");
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    if (const int status = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); status != 0)
        throw std::runtime_error("cannot resolve host \"" + host + "\" of " + address + ": " + ::gai_strerror(status));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
    std::string why = "no address";
    // IPv4 first: a server bound to tcp://* listens on IPv4 only (ZeroMQ without ZMQ_IPV6).
    std::vector<const addrinfo*> order;
    for (int family : {AF_INET, AF_INET6})
        for (const addrinfo* a = found; a; a = a->ai_next)
            if (a->ai_family == family) order.push_back(a);
    for (const addrinfo* a : order) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            why = std::strerror(errno);
            continue;
        }
        sockaddr_storage local{};
        socklen_t size = sizeof local;
        const bool routed = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                            ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0;
        if (!routed) why = std::strerror(errno);
        ::close(fd);
        if (!routed) continue;
        char text[INET6_ADDRSTRLEN] = {};
        if (local.ss_family == AF_INET) {
            ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, text, sizeof text);
            return text;
        }
        ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, text, sizeof text);
        return "[" + std::string(text) + "]";
    }
    throw std::runtime_error("no route from this host to " + address + ": " + why);
}

int free_loopback_ports(int count) {
    const auto bound = [](int port) {  // a socket bound to 127.0.0.1:port (0: any), or -1
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(std::uint16_t(port));
        if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
        if (fd >= 0) ::close(fd);
        return -1;
    };
    for (int attempt = 0; attempt < 100; ++attempt) {
        const int first = bound(0);
        if (first < 0) break;
        sockaddr_in a{};
        socklen_t size = sizeof a;
        ::getsockname(first, reinterpret_cast<sockaddr*>(&a), &size);
        const int port = ntohs(a.sin_port);
        std::vector<int> held{first};
        for (int k = 1; k < count && port + k < 65536; ++k) {
            const int fd = bound(port + k);
            if (fd < 0) break;
            held.push_back(fd);
        }
        const bool all = int(held.size()) == count;
        for (int fd : held) ::close(fd);
        if (all) return port;
    }
    throw std::runtime_error("no " + std::to_string(count) + " consecutive free ports on 127.0.0.1");
}

}  // namespace tether
