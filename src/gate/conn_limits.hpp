// How many client connections the gate holds: in all, and per client
// address. Counted on the socket's peer address: when a connection is
// accepted no request (and so no X-Forwarded-For) has been read yet, so a
// trusted proxy's clients share the proxy's count (doc/gate.md, "Limits").
// Above the global limit a small reserve is still accepted, to answer
// health probes only: a flood must not make the orchestrator kill the gate.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "gate/net.hpp"

namespace ot::gate {

struct IpAddrHash {
    std::size_t operator()(const IpAddr& a) const noexcept;
};

class ConnLimits {
public:
    enum class Admit : std::uint8_t { Ok, ProbeOnly, OverAddress, Full };

    // A connection's place in the counts, given back when it is destroyed.
    class Ticket {
    public:
        Ticket() = default;
        Ticket(Ticket&& o) noexcept : owner_(o.owner_), addr_(o.addr_) { o.owner_ = nullptr; }
        Ticket& operator=(Ticket&& o) noexcept;
        Ticket(const Ticket&) = delete;
        Ticket& operator=(const Ticket&) = delete;
        ~Ticket() { release(); }
        void release();

    private:
        friend class ConnLimits;
        ConnLimits* owner_ = nullptr;
        IpAddr addr_{};
    };

    // 0 = no limit. `reserve`: connections beyond `global` kept for probes.
    void configure(std::size_t global, std::size_t per_address, std::size_t reserve);
    // Ok and ProbeOnly fill `t`; the others leave it empty (close the socket).
    Admit admit(const IpAddr& a, Ticket& t);

    std::size_t open() const;
    std::size_t addresses() const;
    std::uint64_t refused_address() const;
    std::uint64_t refused_global() const;

private:
    void give_back(const IpAddr& a);
    mutable std::mutex mu_;
    std::unordered_map<IpAddr, std::uint32_t, IpAddrHash> per_;
    std::size_t open_ = 0, global_ = 0, per_address_ = 0, reserve_ = 0;
    std::uint64_t refused_address_ = 0, refused_global_ = 0;
};

}  // namespace ot::gate
