//! One budget object, checked in one place.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

/// Limits of one run.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Budget {
    /// Tool calls in all (each is one step of the trace).
    pub max_steps: usize,
    pub max_calls_per_tool: usize,
    /// Serialised as `{secs, nanos}`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub max_wall: Duration,
    /// Distinct evidence chunks kept.
    pub max_evidence: usize,
    /// Model tokens (prompt + completion), when a model is configured.
    pub max_tokens: u64,
    /// Retries of a call that timed out (other statuses are never retried).
    pub max_retries: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_steps: 16,
            max_calls_per_tool: 8,
            max_wall: Duration::from_secs(120),
            max_evidence: 40,
            max_tokens: 12_000,
            max_retries: 1,
        }
    }
}

/// What a run has used, and every time a limit stopped something.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BudgetUse {
    pub limits: Budget,
    pub steps: usize,
    pub calls: BTreeMap<String, usize>,
    pub evidence: usize,
    pub tokens: u64,
    pub elapsed_ms: u64,
    /// Limits that were reached (each stopped an action instead of being exceeded).
    pub limits_reached: Vec<String>,
    /// Times a limit was exceeded after the fact (must stay zero).
    pub overruns: usize,
    #[serde(skip)]
    started: Option<Instant>,
}

impl BudgetUse {
    pub fn new(limits: Budget) -> BudgetUse {
        BudgetUse {
            limits,
            steps: 0,
            calls: BTreeMap::new(),
            evidence: 0,
            tokens: 0,
            elapsed_ms: 0,
            limits_reached: vec![],
            overruns: 0,
            started: Some(Instant::now()),
        }
    }

    fn elapsed(&self) -> Duration {
        self.started.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Whether one more call of `tool` fits; records the reason when it does not.
    pub fn admit_call(&mut self, tool: &str) -> bool {
        let reason = if self.steps >= self.limits.max_steps {
            Some(format!("steps ({})", self.limits.max_steps))
        } else if self.calls.get(tool).copied().unwrap_or(0) >= self.limits.max_calls_per_tool {
            Some(format!(
                "calls of {tool} ({})",
                self.limits.max_calls_per_tool
            ))
        } else if self.elapsed() >= self.limits.max_wall {
            Some(format!("wall time ({:?})", self.limits.max_wall))
        } else if self.tokens >= self.limits.max_tokens {
            Some(format!("model tokens ({})", self.limits.max_tokens))
        } else {
            None
        };
        match reason {
            Some(r) => {
                if !self.limits_reached.contains(&r) {
                    self.limits_reached.push(r);
                }
                false
            }
            None => {
                self.steps += 1;
                *self.calls.entry(tool.to_string()).or_default() += 1;
                true
            }
        }
    }

    /// How many more evidence chunks may be kept.
    pub fn evidence_room(&mut self) -> usize {
        let room = self.limits.max_evidence.saturating_sub(self.evidence);
        if room == 0 {
            let r = format!("evidence ({})", self.limits.max_evidence);
            if !self.limits_reached.contains(&r) {
                self.limits_reached.push(r);
            }
        }
        room
    }

    pub fn add_evidence(&mut self, n: usize) {
        self.evidence += n;
        if self.evidence > self.limits.max_evidence {
            self.overruns += 1;
        }
    }

    /// Whether a model call fits the token budget.
    pub fn admit_model_call(&mut self) -> bool {
        if self.tokens >= self.limits.max_tokens || self.elapsed() >= self.limits.max_wall {
            let r = "model tokens or wall time".to_string();
            if !self.limits_reached.contains(&r) {
                self.limits_reached.push(r);
            }
            return false;
        }
        true
    }

    pub fn add_tokens(&mut self, n: u64) {
        self.tokens += n;
    }

    pub fn finish(&mut self) {
        self.elapsed_ms = self.elapsed().as_millis() as u64;
        if self.steps > self.limits.max_steps {
            self.overruns += 1;
        }
    }

    pub fn out_of_time(&self) -> bool {
        self.elapsed() >= self.limits.max_wall
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_stop_calls_and_are_recorded_once() {
        let mut b = BudgetUse::new(Budget {
            max_steps: 3,
            max_calls_per_tool: 2,
            ..Budget::default()
        });
        assert!(b.admit_call("record"));
        assert!(b.admit_call("record"));
        assert!(!b.admit_call("record"));
        assert!(!b.admit_call("record"));
        assert!(b.admit_call("document_search"));
        assert!(!b.admit_call("document_search"));
        b.finish();
        assert_eq!(b.steps, 3);
        assert_eq!(b.overruns, 0);
        assert_eq!(b.limits_reached.len(), 2, "{:?}", b.limits_reached);
    }
}
