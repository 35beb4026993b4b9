//! Prometheus metrics, kept by hand (a handful of counters and one histogram do not need
//! a metrics crate): requests and latencies per transport and method, errors, hook
//! events and background job runs. Record counts by type are read from the store at
//! scrape time.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Debug, Default)]
struct Inner {
    requests: BTreeMap<(String, String, String), u64>,
    latency: BTreeMap<(String, String), Histogram>,
    errors: BTreeMap<(String, String, String), u64>,
    hooks: BTreeMap<(String, String), u64>,
    jobs: BTreeMap<(String, String), u64>,
    /// When each server-side error happened, for "errors in the last hour".
    recent_errors: VecDeque<Instant>,
}

impl Inner {
    /// Records a server-side error now, forgetting those older than an hour (so the list
    /// stays bounded when nobody reads it).
    fn error_now(&mut self) {
        self.forget_old_errors();
        self.recent_errors.push_back(Instant::now());
    }

    fn forget_old_errors(&mut self) {
        let hour = Duration::from_secs(3600);
        while self.recent_errors.front().is_some_and(|t| t.elapsed() > hour) {
            self.recent_errors.pop_front();
        }
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One finished request. `code`: the stable error code, or `ok`.
    pub fn request(&self, transport: &str, method: &str, code: &str, server_fault: bool, elapsed: Duration) {
        let mut m = self.lock();
        *m.requests.entry((transport.into(), method.into(), code.into())).or_default() += 1;
        let h = m.latency.entry((transport.into(), method.into())).or_default();
        let secs = elapsed.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                h.counts[i] += 1;
            }
        }
        h.sum += secs;
        h.count += 1;
        if code != "ok" {
            *m.errors.entry((transport.into(), method.into(), code.into())).or_default() += 1;
        }
        if server_fault {
            m.error_now();
        }
    }

    /// A hook event. A failed hook still answers its caller, so it counts among the
    /// errors of the last hour: the daemon's status is where it shows.
    pub fn hook(&self, hook: &str, ok: bool) {
        let mut m = self.lock();
        *m.hooks.entry((hook.into(), if ok { "ok" } else { "error" }.into())).or_default() += 1;
        if !ok {
            m.error_now();
        }
    }

    pub fn job(&self, job: &str, ok: bool) {
        let mut m = self.lock();
        *m.jobs.entry((job.into(), if ok { "ok" } else { "error" }.into())).or_default() += 1;
        if !ok {
            m.error_now();
        }
    }

    /// Server-side errors (5xx, failed jobs, failed hooks) in the last hour.
    pub fn errors_last_hour(&self) -> u64 {
        let mut m = self.lock();
        m.forget_old_errors();
        m.recent_errors.len() as u64
    }

    /// The Prometheus text exposition. `records`: (type, all, live) counts; `extra`: gauges.
    pub fn render(&self, records: &[(String, i64, i64)], extra: &[(&str, &str, f64)]) -> String {
        let errors_last_hour = self.errors_last_hour();
        let m = self.lock();
        let mut out = String::new();
        let _ = writeln!(out, "# HELP mneme_requests_total Requests handled, by transport, method and result code.");
        let _ = writeln!(out, "# TYPE mneme_requests_total counter");
        for ((t, method, code), n) in &m.requests {
            let _ = writeln!(out, "mneme_requests_total{{transport=\"{t}\",method=\"{method}\",code=\"{code}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP mneme_request_duration_seconds Request latency, by transport and method.");
        let _ = writeln!(out, "# TYPE mneme_request_duration_seconds histogram");
        for ((t, method), h) in &m.latency {
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "mneme_request_duration_seconds_bucket{{transport=\"{t}\",method=\"{method}\",le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(out, "mneme_request_duration_seconds_bucket{{transport=\"{t}\",method=\"{method}\",le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "mneme_request_duration_seconds_sum{{transport=\"{t}\",method=\"{method}\"}} {}", h.sum);
            let _ = writeln!(out, "mneme_request_duration_seconds_count{{transport=\"{t}\",method=\"{method}\"}} {}", h.count);
        }
        let _ = writeln!(out, "# HELP mneme_errors_total Requests that failed, by transport, method and error code.");
        let _ = writeln!(out, "# TYPE mneme_errors_total counter");
        for ((t, method, code), n) in &m.errors {
            let _ = writeln!(out, "mneme_errors_total{{transport=\"{t}\",method=\"{method}\",code=\"{code}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP mneme_errors_last_hour Server-side errors (5xx, failed jobs, failed hooks) in the last hour.");
        let _ = writeln!(out, "# TYPE mneme_errors_last_hour gauge");
        let _ = writeln!(out, "mneme_errors_last_hour {errors_last_hour}");
        let _ = writeln!(out, "# HELP mneme_hook_events_total Agent hook events, by hook and result.");
        let _ = writeln!(out, "# TYPE mneme_hook_events_total counter");
        for ((hook, result), n) in &m.hooks {
            let _ = writeln!(out, "mneme_hook_events_total{{hook=\"{hook}\",result=\"{result}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP mneme_job_runs_total Background job runs, by job and result.");
        let _ = writeln!(out, "# TYPE mneme_job_runs_total counter");
        for ((job, result), n) in &m.jobs {
            let _ = writeln!(out, "mneme_job_runs_total{{job=\"{job}\",result=\"{result}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP mneme_records Records in the store, by memory type (all, including tombstones).");
        let _ = writeln!(out, "# TYPE mneme_records gauge");
        for (t, all, _) in records {
            let _ = writeln!(out, "mneme_records{{type=\"{t}\"}} {all}");
        }
        let _ = writeln!(out, "# HELP mneme_live_records Live (non-tombstone) records, by memory type.");
        let _ = writeln!(out, "# TYPE mneme_live_records gauge");
        for (t, _, live) in records {
            let _ = writeln!(out, "mneme_live_records{{type=\"{t}\"}} {live}");
        }
        for (name, help, v) in extra {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {v}");
        }
        out
    }
}
