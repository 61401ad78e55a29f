//! Differential property tests: placeholder until issue 5.
