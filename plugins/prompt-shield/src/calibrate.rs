//! The score of a user message: the model's logit recalibrated by what the
//! model alone cannot weigh (issue 31, "calibrate separately by input kind").
//!
//! One threshold on the model's score treats a short question, a long page
//! and a text with an override phrase alike, yet their benign scores are
//! spread differently: short benign texts (quotations, questions in other
//! languages) reach high scores far more often than long ones, and an
//! injection in a long page shows as one window standing out from the rest
//! more than as a high score. A second, tiny logistic model over the logit,
//! the log of the length, the evidence flags and three window statistics
//! ([`features`], [`WEIGHTS`]: ten floats, a few operations per text) turns
//! these into one score, so every mode stays one threshold on it.
//!
//! Fitted on the **validation** split of the held-out set (as the thresholds
//! are), by `examples/calibrate.rs`, which also prints the out-of-fold
//! comparison that justified it (`eval/README.md`). Only user input is
//! scored this way: retrieved passages and non-user roles keep the model's
//! score and their own thresholds, which were measured on other sets.

use crate::detect::Assessment;
use crate::model::sigmoid;

/// Number of calibration inputs (the last is the intercept).
pub const FEATURES: usize = 10;

/// What each input is, in order (for the fitting program's output).
pub const NAMES: [&str; FEATURES] = [
    "logit / 10",
    "(ln chars - 6) / 2",
    "its square",
    "override or extraction phrase",
    "persona phrase",
    "encoded or obfuscated",
    "(best window - whole) / 5",
    "ln(1 + windows) / 3",
    "(best window - mean window) / 5",
    "intercept",
];

/// The calibration inputs of an assessed text of `chars` characters.
pub fn features(a: &Assessment, chars: usize) -> [f32; FEATURES] {
    let l = ((chars.max(1) as f32).ln() - 6.0) / 2.0;
    let w = &a.windows;
    let (over_whole, over_mean) = if w.count > 0 { ((w.best - w.whole) / 5.0, (w.best - w.mean) / 5.0) } else { (0.0, 0.0) };
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    [
        a.logit / 10.0,
        l,
        l * l,
        flag(a.overrides),
        flag(a.persona),
        flag(a.encoded || a.obfuscated),
        over_whole,
        (1.0 + w.count as f32).ln() / 3.0,
        over_mean,
        1.0,
    ]
}

/// The weights `examples/calibrate.rs -- --fit` printed for the committed
/// model (validation split; L2 1.0 on all but the intercept, benign texts
/// weighted 3). Refit whenever the model is retrained.
pub const WEIGHTS: [f32; FEATURES] = [7.4240, 1.3129, -0.4204, -0.7017, -0.7659, 0.6457, -0.1835, -3.0499, 1.6071, 0.9825];

/// The calibrated logit of an assessed user text of `chars` characters.
pub fn logit(a: &Assessment, chars: usize) -> f32 {
    features(a, chars).iter().zip(WEIGHTS.iter()).map(|(x, w)| x * w).sum()
}

/// The calibrated score (0..=1) of an assessed user text.
pub fn score(a: &Assessment, chars: usize) -> f32 {
    sigmoid(logit(a, chars))
}
