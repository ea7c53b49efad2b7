#include "gate/conn_limits.hpp"

#include <cstring>

namespace ot::gate {

std::size_t IpAddrHash::operator()(const IpAddr& a) const noexcept {
    std::uint64_t h[2];
    std::memcpy(h, a.bytes.data(), sizeof h);
    return static_cast<std::size_t>((h[0] * 0x9E3779B97F4A7C15ull) ^ (h[1] + 0x632BE59BD9B4E019ull + (h[0] << 6)));
}

ConnLimits::Ticket& ConnLimits::Ticket::operator=(Ticket&& o) noexcept {
    if (this != &o) {
        release();
        owner_ = o.owner_;
        addr_ = o.addr_;
        o.owner_ = nullptr;
    }
    return *this;
}

void ConnLimits::Ticket::release() {
    if (!owner_) return;
    owner_->give_back(addr_);
    owner_ = nullptr;
}

void ConnLimits::configure(std::size_t global, std::size_t per_address, std::size_t reserve) {
    std::lock_guard<std::mutex> lock(mu_);
    global_ = global;
    per_address_ = per_address;
    reserve_ = reserve;
}

ConnLimits::Admit ConnLimits::admit(const IpAddr& a, Ticket& t) {
    std::lock_guard<std::mutex> lock(mu_);
    Admit verdict = Admit::Ok;
    if (global_ && open_ >= global_) {
        if (open_ >= global_ + reserve_) {
            ++refused_global_;
            return Admit::Full;
        }
        verdict = Admit::ProbeOnly;
    }
    auto it = per_.find(a);
    if (per_address_ && it != per_.end() && it->second >= per_address_) {
        ++refused_address_;
        return Admit::OverAddress;
    }
    if (it == per_.end()) it = per_.emplace(a, 0).first;
    ++it->second;
    ++open_;
    t.release();
    t.owner_ = this;
    t.addr_ = a;
    return verdict;
}

void ConnLimits::give_back(const IpAddr& a) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = per_.find(a);
    if (it != per_.end() && --it->second == 0) per_.erase(it);
    if (open_ > 0) --open_;
}

std::size_t ConnLimits::open() const {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
}

std::size_t ConnLimits::addresses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return per_.size();
}

std::uint64_t ConnLimits::refused_address() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_address_;
}

std::uint64_t ConnLimits::refused_global() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_global_;
}

}  // namespace ot::gate
