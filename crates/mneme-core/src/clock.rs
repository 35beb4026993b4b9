//! Time as a dependency: production code reads [`SystemClock`], tests inject a
//! [`FixedClock`] and move it by hand. Nothing in mneme sleeps to test time.

use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};

/// A source of "now".
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct FixedClock {
    // Invariant: guards only the current instant; never held across calls.
    now: Mutex<Timestamp>,
}

impl FixedClock {
    pub fn new(now: Timestamp) -> Self {
        Self { now: Mutex::new(now) }
    }

    pub fn set(&self, now: Timestamp) {
        *self.now.lock().unwrap_or_else(|poison| poison.into_inner()) = now;
    }

    pub fn advance(&self, by: SignedDuration) {
        let mut guard = self.now.lock().unwrap_or_else(|poison| poison.into_inner());
        *guard = guard.checked_add(by).expect("test clocks stay within jiff's range");
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        *self.now.lock().unwrap_or_else(|poison| poison.into_inner())
    }
}
