//! The queries this server answered lately, for shadowing a draft index with real
//! traffic (`POST /v1/jobs/reindex`). In memory only and bounded; read by nothing but the
//! operator's reindex job, which replays each query under the principal that asked it,
//! so the replay reads no more than that principal could.

use std::collections::VecDeque;
use std::sync::Mutex;

use dossier_engine::shadow::ShadowQuery;

/// Queries kept (the newest).
pub const RECENT_QUERIES: usize = 500;

#[derive(Default)]
pub struct RecentQueries {
    queries: Mutex<VecDeque<ShadowQuery>>,
}

impl RecentQueries {
    /// Keeps one answered query, dropping the oldest past [`RECENT_QUERIES`].
    pub fn push(&self, principal: &str, query: &str) {
        let mut q = self.queries.lock().unwrap_or_else(|p| p.into_inner());
        if q.back()
            .is_some_and(|b| b.principal == principal && b.query == query)
        {
            return;
        }
        if q.len() == RECENT_QUERIES {
            q.pop_front();
        }
        q.push_back(ShadowQuery {
            principal: principal.to_string(),
            query: query.to_string(),
        });
    }

    /// The kept queries, oldest first.
    pub fn snapshot(&self) -> Vec<ShadowQuery> {
        let q = self.queries.lock().unwrap_or_else(|p| p.into_inner());
        q.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_and_skips_immediate_repeats() {
        let r = RecentQueries::default();
        for i in 0..RECENT_QUERIES + 10 {
            r.push("u7", &format!("q{i}"));
            r.push("u7", &format!("q{i}"));
        }
        let s = r.snapshot();
        assert_eq!(s.len(), RECENT_QUERIES);
        assert_eq!(s[0].query, "q10");
        assert_eq!(s.last().unwrap().query, format!("q{}", RECENT_QUERIES + 9));
    }
}
