// Fitting the weights from what statements really took.
//
// A statement's estimate is linear in the weights (core/statement_cost.hpp:
// PlanFeatures), so samples of (features, measured milliseconds) fit them by
// non-negative least squares, each sample weighted by 1/measured: plain
// squared error would let a few slow statements decide every weight, squared
// relative error (1/measured²) pulls estimates below what statements take.
// A second stage then reshapes the fitted weights for the tail (the
// under-priced statements, which admission and the cut-off act on) without
// moving their level: calibration.cpp, fit_tail. From 60 samples on, both
// stages run on 8 resamples of the samples and the weights are their mean
// (which statements make the tail is luck; calibration.cpp, calibrate).
// Samples with a term priced at cost_max (an argument known only at run
// time) say nothing about the weights and are skipped.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/statement_cost.hpp"

namespace ot::core {

struct Sample {
    PlanFeatures features;
    double measured_ms;
};

struct Calibration {
    const char* problem;                     // nullptr on success; else why nothing was fitted
    CostModel fitted;                        // the input model with every fitted weight replaced
    std::int64_t samples_used;               // samples the fit saw
    std::int64_t samples_of[kCostClasses];   // samples in which each class appears
    bool fitted_class[kCostClasses];         // enough samples: its weights were fitted
    double spearman_before;                  // rank correlation of estimate and measured time, input model
    double spearman_after;                   // the same with the fitted weights
    double median_ratio_after;               // median of measured / fitted estimate (1 = unbiased)
};

// A class is fitted when it appears in at least min_samples samples; the
// others keep the input model's weights. Requires at least min_samples usable
// samples overall.
Calibration calibrate(const CostModel& m, const Sample* samples, std::size_t n, std::int64_t min_samples = 20);

// Spearman rank correlation (average ranks for ties); NaN for n < 3 or a constant input.
double spearman(const double* x, const double* y, std::size_t n);

}  // namespace ot::core
