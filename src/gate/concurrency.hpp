// Concurrency classes: a rate limit bounds arrivals, this bounds work in
// progress. Each class has a number of slots and a bounded FIFO queue; the
// caller times queued waits itself (cancel() tells whether it still may).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gate/config.hpp"
#include "gate/request.hpp"

namespace ot::gate {

class Slots {
public:
    enum class Outcome : std::uint8_t { Granted, Queued, Full };
    // Limits by class name; classes not named here are unlimited.
    void configure(const std::vector<ConcurrencyClass>& classes, std::size_t max_queue);
    // Granted: the caller holds a slot now. Queued: `on_grant` will be called
    // (from another thread's release()) unless cancel(cls, *ticket) wins
    // first. Full: the queue is full too.
    Outcome acquire(const std::string& cls, std::function<void()> on_grant, std::uint64_t* ticket);
    // True when the queued waiter was removed (it will never be granted).
    bool cancel(const std::string& cls, std::uint64_t ticket);
    void release(const std::string& cls);

    struct View {
        std::string name;
        int limit, active;
        std::size_t queued;
        std::uint64_t rejected;
    };
    std::vector<View> view() const;

private:
    struct Class {
        int limit = 0;
        int active = 0;
        std::uint64_t rejected = 0;
        std::deque<std::pair<std::uint64_t, std::function<void()>>> queue;
    };
    mutable std::mutex mu_;
    std::map<std::string, Class> classes_;
    std::size_t max_queue_ = 0;
    std::uint64_t next_ticket_ = 1;
};

// The configured class a request belongs to ("" for none): the first class
// whose `match` lists its operation (GetMap, GetFeature, …) or cost class.
std::string concurrency_class(const OgcRequest& r, const std::string& cost_class, const Config& c);

}  // namespace ot::gate
