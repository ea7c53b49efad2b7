#include "gate/concurrency.hpp"

namespace ot::gate {

void Slots::configure(const std::vector<ConcurrencyClass>& classes, std::size_t max_queue) {
    std::lock_guard<std::mutex> lock(mu_);
    max_queue_ = max_queue;
    // A reload keeps the counts of work already in progress.
    for (auto& [name, cl] : classes_) cl.limit = 0;
    for (const ConcurrencyClass& c : classes) classes_[c.name].limit = c.limit;
}

Slots::Outcome Slots::acquire(const std::string& cls, std::function<void()> on_grant, std::uint64_t* ticket) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = classes_.find(cls);
    if (it == classes_.end() || it->second.limit <= 0) return Outcome::Granted;
    Class& c = it->second;
    if (c.active < c.limit && c.queue.empty()) {
        c.active++;
        return Outcome::Granted;
    }
    if (c.queue.size() >= max_queue_) {
        c.rejected++;
        return Outcome::Full;
    }
    *ticket = next_ticket_++;
    c.queue.emplace_back(*ticket, std::move(on_grant));
    return Outcome::Queued;
}

bool Slots::cancel(const std::string& cls, std::uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = classes_.find(cls);
    if (it == classes_.end()) return false;
    auto& q = it->second.queue;
    for (auto w = q.begin(); w != q.end(); ++w)
        if (w->first == ticket) {
            q.erase(w);
            it->second.rejected++;
            return true;
        }
    return false;
}

void Slots::release(const std::string& cls) {
    std::function<void()> next;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = classes_.find(cls);
        if (it == classes_.end() || it->second.limit <= 0) {
            if (it != classes_.end() && it->second.active > 0) it->second.active--;
            return;
        }
        Class& c = it->second;
        // The slot passes straight to the next waiter: `active` stays put.
        if (!c.queue.empty() && c.active <= c.limit) {
            next = std::move(c.queue.front().second);
            c.queue.pop_front();
        } else if (c.active > 0) {
            c.active--;
        }
    }
    if (next) next();
}

std::vector<Slots::View> Slots::view() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<View> out;
    for (const auto& [name, c] : classes_) out.push_back({name, c.limit, c.active, c.queue.size(), c.rejected});
    return out;
}

std::string concurrency_class(const OgcRequest& r, const std::string& cost_class, const Config& c) {
    const std::string op = op_name(r.op);
    for (const ConcurrencyClass& cl : c.concurrency.classes)
        for (const std::string& m : cl.match)
            if (m == op || m == cost_class) return cl.name;
    return {};
}

}  // namespace ot::gate
