//! Salience and decay, computed at read time.
//!
//! A record stores its salience *state*: a base value, the instant it was last
//! reinforced, and whether it is pinned. Its current salience is
//!
//! ```text
//! salience(t) = max(min(floor, base), base * 0.5 ^ ((t - reinforced_at) / half_life(type)))
//! ```
//!
//! Nothing ever multiplies a stored value on a timer, so decay is path independent:
//! evaluating at t1, re-anchoring there, and evaluating at t2 gives exactly the value
//! of evaluating at t2 directly (see the property tests). The reference daemon's
//! compounding sweep pruned month-scale facts in days; this design cannot.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};
use crate::record::MemoryType;

pub const SECONDS_PER_DAY: f64 = 86_400.0;

/// The decayable part of a record.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SalienceState {
    /// Salience at `reinforced_at`, in [0, 1].
    pub base: f64,
    pub reinforced_at: Timestamp,
    /// Pinned records never decay and are never pruned.
    pub pinned: bool,
}

/// Per-type numbers in days, used for half-lives and floors.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerType {
    pub episodic: f64,
    pub semantic: f64,
    pub competence: f64,
    pub working: f64,
    pub plan_graph: f64,
}

impl PerType {
    pub fn get(&self, t: MemoryType) -> f64 {
        match t {
            MemoryType::Episodic => self.episodic,
            MemoryType::Semantic => self.semantic,
            MemoryType::Competence => self.competence,
            MemoryType::Working => self.working,
            MemoryType::PlanGraph => self.plan_graph,
        }
    }
}

/// How salience fades. Defaults keep facts and skills for months and episodes for days:
///
/// | type | half-life | from 1.0 to the prune threshold 0.05 |
/// |---|---|---|
/// | episodic | 3 days | ~13 days |
/// | working | 1 day | ~4 days |
/// | plan_graph | 14 days | ~2 months |
/// | semantic | 180 days | ~2 years |
/// | competence | 365 days | ~4 years |
///
/// Reinforcement resets the clock, so a fact in use never fades.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DecayConfig {
    /// Half-life per memory type, in days.
    pub half_life_days: PerType,
    /// Salience never decays below `min(floor, base)`; per type.
    pub floor: PerType,
    /// A prune sweep drops the payload of unpinned live records whose current salience is below this.
    pub prune_threshold: f64,
    /// A prune never takes a record in its first this many days in the store, whatever its
    /// salience: an event's salience counts from when it happened, so history imported
    /// with old event times starts faded, and this leaves time to use, reinforce or pin it
    /// before a sweep drops its payload. Default 14.
    pub prune_min_age_days: f64,
}

impl Default for DecayConfig {
    fn default() -> Self {
        DecayConfig {
            half_life_days: PerType { episodic: 3.0, semantic: 180.0, competence: 365.0, working: 1.0, plan_graph: 14.0 },
            floor: PerType { episodic: 0.01, semantic: 0.01, competence: 0.01, working: 0.01, plan_graph: 0.01 },
            prune_threshold: 0.05,
            prune_min_age_days: 14.0,
        }
    }
}

impl DecayConfig {
    /// Checks every number; errors name the offending key.
    pub fn validate(&self) -> CoreResult<()> {
        for t in MemoryType::ALL {
            let hl = self.half_life_days.get(t);
            if !(hl.is_finite() && hl > 0.0) {
                return Err(CoreError::invalid("decay.half_life_days", format!("{t}: {hl} (must be a positive number of days)")));
            }
            let floor = self.floor.get(t);
            if !(0.0..=1.0).contains(&floor) {
                return Err(CoreError::invalid("decay.floor", format!("{t}: {floor} (must be within 0..=1)")));
            }
        }
        if !(self.prune_min_age_days.is_finite() && self.prune_min_age_days >= 0.0) {
            return Err(CoreError::invalid(
                "decay.prune_min_age_days",
                format!("{} (must be a number of days, 0 or more)", self.prune_min_age_days),
            ));
        }
        if !(0.0..=1.0).contains(&self.prune_threshold) {
            return Err(CoreError::invalid("decay.prune_threshold", format!("{} (must be within 0..=1)", self.prune_threshold)));
        }
        Ok(())
    }

    pub fn half_life_seconds(&self, t: MemoryType) -> f64 {
        self.half_life_days.get(t) * SECONDS_PER_DAY
    }

    /// Current salience of a record of type `t` at instant `at`.
    pub fn salience_at(&self, t: MemoryType, state: &SalienceState, at: Timestamp) -> f64 {
        if state.pinned {
            return state.base;
        }
        let elapsed = seconds_between(state.reinforced_at, at).max(0.0);
        let decayed = state.base * 0.5f64.powf(elapsed / self.half_life_seconds(t));
        decayed.max(self.floor.get(t).min(state.base))
    }

    /// A time-independent sort key: within one memory type, a larger anchor means a larger
    /// current salience at every instant (ignoring the floor). It is the instant, in unix
    /// seconds, at which the record's salience is (or was) exactly 1.0 on its decay curve:
    /// `reinforced_at + half_life * log2(base)`. Pinned records sort first.
    pub fn rank_anchor(&self, t: MemoryType, state: &SalienceState) -> f64 {
        if state.pinned {
            return f64::MAX;
        }
        let base = state.base.max(1e-12);
        unix_seconds(state.reinforced_at) + self.half_life_seconds(t) * base.log2()
    }

    /// The state after adding `delta` (negative to penalize) to the current salience at `at`.
    /// The result is clamped to [0, 1] and re-anchored at `at`.
    pub fn adjusted(&self, t: MemoryType, state: &SalienceState, delta: f64, at: Timestamp) -> SalienceState {
        let current = self.salience_at(t, state, at);
        SalienceState { base: (current + delta).clamp(0.0, 1.0), reinforced_at: at, pinned: state.pinned }
    }
}

/// Unix time in fractional seconds.
pub fn unix_seconds(t: Timestamp) -> f64 {
    t.as_second() as f64 + f64::from(t.subsec_nanosecond()) / 1e9
}

fn seconds_between(from: Timestamp, to: Timestamp) -> f64 {
    unix_seconds(to) - unix_seconds(from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use proptest::prelude::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).expect("in range")
    }

    fn ty() -> impl Strategy<Value = MemoryType> {
        prop::sample::select(MemoryType::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn decay_is_path_independent(t in ty(), base in 0.0f64..=1.0, t1 in 0i64..100_000_000, dt in 0i64..100_000_000) {
            let config = DecayConfig::default();
            let state = SalienceState { base, reinforced_at: at(0), pinned: false };
            let direct = config.salience_at(t, &state, at(t1 + dt));
            // Evaluate at t1, store that value as the new anchor (what a sweep that wrote
            // values back would do), then evaluate at t2.
            let reanchored = config.adjusted(t, &state, 0.0, at(t1));
            let via_t1 = config.salience_at(t, &reanchored, at(t1 + dt));
            prop_assert!((direct - via_t1).abs() <= 1e-12 + 1e-9 * direct, "direct {direct} via t1 {via_t1}");
        }

        #[test]
        fn many_sweeps_equal_one_evaluation(t in ty(), base in 0.0f64..=1.0, steps in prop::collection::vec(0i64..1_000_000, 1..50)) {
            let config = DecayConfig::default();
            let start = SalienceState { base, reinforced_at: at(0), pinned: false };
            let mut state = start;
            let mut now = 0;
            for step in &steps {
                now += step;
                state = config.adjusted(t, &state, 0.0, at(now));
            }
            let direct = config.salience_at(t, &start, at(now));
            prop_assert!((direct - config.salience_at(t, &state, at(now))).abs() <= 1e-9);
        }

        #[test]
        fn salience_stays_in_unit_interval_and_never_grows(t in ty(), base in 0.0f64..=1.0, a in 0i64..1_000_000_000, b in 0i64..1_000_000_000) {
            let config = DecayConfig::default();
            let state = SalienceState { base, reinforced_at: at(0), pinned: false };
            let (early, late) = (a.min(b), a.max(b));
            let s_early = config.salience_at(t, &state, at(early));
            let s_late = config.salience_at(t, &state, at(late));
            prop_assert!((0.0..=1.0).contains(&s_late));
            prop_assert!(s_late <= s_early);
        }

        #[test]
        fn rank_anchor_orders_like_salience(t in ty(), b1 in 0.02f64..=1.0, b2 in 0.02f64..=1.0, r1 in 0i64..10_000_000, r2 in 0i64..10_000_000, probe in 10_000_000i64..20_000_000) {
            let config = DecayConfig { floor: PerType { episodic: 0.0, semantic: 0.0, competence: 0.0, working: 0.0, plan_graph: 0.0 }, ..DecayConfig::default() };
            let s1 = SalienceState { base: b1, reinforced_at: at(r1), pinned: false };
            let s2 = SalienceState { base: b2, reinforced_at: at(r2), pinned: false };
            let (a1, a2) = (config.rank_anchor(t, &s1), config.rank_anchor(t, &s2));
            let (v1, v2) = (config.salience_at(t, &s1, at(probe)), config.salience_at(t, &s2, at(probe)));
            if (a1 - a2).abs() > 1e-3 {
                prop_assert_eq!(a1 > a2, v1 > v2, "anchors {} {} values {} {}", a1, a2, v1, v2);
            }
        }
    }

    #[test]
    fn semantic_facts_survive_months_and_episodes_fade_in_days() {
        let config = DecayConfig::default();
        let fresh = SalienceState { base: 1.0, reinforced_at: at(0), pinned: false };
        let month = at(0).checked_add(SignedDuration::from_hours(24 * 30)).expect("in range");
        let two_weeks = at(0).checked_add(SignedDuration::from_hours(24 * 14)).expect("in range");
        assert!(config.salience_at(MemoryType::Semantic, &fresh, month) > 0.85);
        assert!(config.salience_at(MemoryType::Competence, &fresh, month) > 0.9);
        assert!(config.salience_at(MemoryType::Episodic, &fresh, two_weeks) < config.prune_threshold);
    }

    #[test]
    fn pinned_records_do_not_decay() {
        let config = DecayConfig::default();
        let pinned = SalienceState { base: 0.7, reinforced_at: at(0), pinned: true };
        assert_eq!(config.salience_at(MemoryType::Episodic, &pinned, at(100_000_000)), 0.7);
    }

    #[test]
    fn floor_holds_and_never_lifts_a_low_base() {
        let config = DecayConfig::default();
        let state = SalienceState { base: 1.0, reinforced_at: at(0), pinned: false };
        assert_eq!(config.salience_at(MemoryType::Working, &state, at(1_000_000_000)), 0.01);
        let low = SalienceState { base: 0.001, reinforced_at: at(0), pinned: false };
        assert_eq!(config.salience_at(MemoryType::Working, &low, at(1_000_000_000)), 0.001);
    }

    #[test]
    fn invalid_config_names_the_key() {
        let mut config = DecayConfig::default();
        config.half_life_days.semantic = f64::NAN;
        let err = config.validate().expect_err("NaN half-life must be refused").to_string();
        assert!(err.contains("decay.half_life_days") && err.contains("semantic"), "{err}");
    }
}
