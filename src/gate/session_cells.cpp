// The area budget (tiers[].cells): asked only once the address admitted;
// when it refuses, the address bucket gets its charge back, so the refused
// request is neither charged nor counted twice.
#include "gate/cell_request.hpp"
#include "gate/session.hpp"

namespace ot::gate {

void Session::local_cell(const Identity& id, const core::SpendResult& addr, std::int64_t now) {
    const Tier& tier = cfg_->tier(id.tier);
    if (addr.outcome != core::SpendOutcome::Allowed) return;
    if (auto cell = cell_for(ex_.assessment, id, tier))
        ex_.cell = spend_cell(gate_.cells(), gate_.buckets(), id.key, *cell, ex_.assessment.price.cost, tier, now);
}

// With the buckets in the shared store (buckets.store: redis): a second call,
// for the cell's key, and a compensating settle of the address when the cell
// refuses. Two calls rather than one script: between them another gate can
// see the address charged for a request that ends refused — by one
// request's cost, for one round trip.
void Session::shared_cell(const HttpIn& in, const HeaderList& headers, const Identity& id,
                          const core::SpendResult& addr, bool addr_local) {
    const Config& c = *cfg_;
    const Tier& tier = c.tier(id.tier);
    BucketStore* store = gate_.store(worker_);
    std::optional<std::string> cell;
    if (tier.cells && store && addr.outcome == core::SpendOutcome::Allowed) cell = cell_for(ex_.assessment, id, tier);
    if (!cell) return decided(in, headers, id, addr);
    const double cost = ex_.assessment.price.cost;
    auto self = shared_from_this();
    store->admit(cell_bucket_key(id.key, *cell), cost, tier.cells->budget,
                 c.buckets.policy_for(ex_.assessment.price.cost_class),
                 [self, in, headers, id, addr, addr_local, cell = *cell, cost](StoreDecision d) {
                     self->guard([&] {
                         // cfg_ is this request's snapshot: the same tier as above.
                         const Tier& t = self->cfg_->tier(id.tier);
                         core::SpendResult s = d.spend;
                         if (d.source == StoreDecision::Source::Local)
                             s = self->gate_.cells().spend(cell_bucket_key(id.key, cell), cost, t.cells->budget, now_us());
                         if (s.outcome != core::SpendOutcome::Allowed) {
                             if (addr_local)
                                 self->gate_.buckets().refund(id.key, cost, t.budget, now_us());
                             else if (BucketStore* st = self->gate_.store(self->worker_))
                                 st->settle(id.key, -cost, t.budget, [](const SettleResult&) {});  // counted in its metrics
                         }
                         self->ex_.cell = CellSpend{cell, s};
                         self->decided(in, headers, id, addr);
                     });
                 });
}

// The store path asks the address first, then the cell, and gives the
// address its charge back when the cell refuses: a cell known to refuse
// leaves the address as it was, so neither call is needed. The address's
// cached refusal comes first, as its refusal would.
bool Session::cached_cell_refusal(const HttpIn& in, const HeaderList& headers, const Identity& id, BucketStore& store) {
    const Tier& tier = cfg_->tier(id.tier);
    const std::optional<std::string> cell = cell_for(ex_.assessment, id, tier);
    if (!cell) return false;
    const double cost = ex_.assessment.price.cost;
    if (auto addr = store.cached_refusal(id.key, cost, tier.budget)) {
        ex_.ledger = Ledger::Store;
        decided(in, headers, id, *addr);
        return true;
    }
    auto s = store.cached_refusal(cell_bucket_key(id.key, *cell), cost, tier.cells->budget);
    if (!s) return false;
    ex_.ledger = Ledger::Store;
    ex_.cell = CellSpend{*cell, *s};
    // Not charged (decide() reads only the cell's figures for its refusal).
    decided(in, headers, id, core::SpendResult{core::SpendOutcome::Allowed, 0, tier.budget.capacity, 0, 0});
    return true;
}

// A refund (304, empty answer, upstream failure) gives the cell the same
// share as the address, where the cell was charged.
void Session::refund_cell() {
    const Tier& t = cfg_->tier(ex_.tier);
    if (!ex_.cell || !t.cells || ex_.cell->spent.outcome != core::SpendOutcome::Allowed) return;
    const std::string key = cell_bucket_key(ex_.bucket_key, ex_.cell->cell);
    if (BucketStore* store = gate_.store(worker_))
        store->settle(key, -ex_.refunded, t.cells->budget, [](const SettleResult&) {});
    else
        gate_.cells().refund(key, ex_.refunded, t.cells->budget, now_us());
}

}  // namespace ot::gate
