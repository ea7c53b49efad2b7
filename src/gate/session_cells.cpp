// The area budget (tiers[].cells) when the buckets live in the shared store
// (buckets.store: redis): a second call, for the cell's key, once the
// address admitted, and a compensating refund of the address when the cell
// refuses. Two calls rather than one script: between them another gate can
// see the address charged for a request that ends refused — by one
// request's cost, for one round trip.
#include "gate/cell_request.hpp"
#include "gate/session.hpp"

namespace ot::gate {

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

}  // namespace ot::gate
