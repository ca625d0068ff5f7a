// Base-unit constants for the ranges in element specs, so that a bound reads
// as the user would write it (`range(1 * kMs, 1 * kDay)`). Counts and sizes
// are binary, like the language's K, M, G and KB.
#pragma once

namespace sluice::units {

inline constexpr double kK = 1024.0, kM = kK * 1024, kG = kM * 1024;
inline constexpr double kKB = kK;
inline constexpr double kMs = 1e6, kS = 1e9, kMin = 60 * kS, kHour = 60 * kMin, kDay = 24 * kHour;

}  // namespace sluice::units
