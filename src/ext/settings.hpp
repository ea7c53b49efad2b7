// GUCs: defined once in define_settings(), read through these accessors.
#pragma once
#include "core/cost_model.hpp"
#include "core/gcra.hpp"

namespace ot::ext {

void define_settings();

extern int setting_max_identities;
extern bool setting_save;

core::Budget current_budget();
core::CostModel current_cost_model();

}  // namespace ot::ext
