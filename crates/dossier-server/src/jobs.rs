//! Long work as jobs: bulk ingest and index rebuilds run on the blocking pool after the
//! request that started them has answered `202 Accepted`; `GET /v1/jobs/{id}` shows
//! their progress.
//!
//! **Invariants:** a job belongs to the tenant of the admin key that started it and is
//! invisible (404, like an unknown id) to every other tenant. Shutdown waits for running
//! jobs ([`Jobs::wait_idle`]); each commit a job makes is one catalog transaction, so a
//! job stopped by a crash leaves whole batches or nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A job as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct JobInfo {
    pub id: String,
    /// `ingest` or `reindex`.
    pub kind: String,
    /// `queued`, `running`, `succeeded` or `failed`.
    pub status: String,
    /// What the job is doing now (`parsing`, `embedding`, `indexing`, `promoting`, …).
    pub stage: String,
    /// Units of the current stage done, and how many there are (0 when unknown).
    pub done: u64,
    pub total: u64,
    /// The request that started it.
    pub request_id: String,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// What the job produced (an ingest report, the promoted generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

struct Job {
    tenant: String,
    info: JobInfo,
}

/// Every job since the server started.
#[derive(Default)]
pub struct Jobs {
    jobs: Mutex<BTreeMap<String, Job>>,
    next: AtomicU64,
    running: AtomicU64,
    idle: tokio::sync::Notify,
}

/// A running job's handle for reporting progress; dropping it without
/// [`JobHandle::finish`] marks the job failed.
pub struct JobHandle {
    jobs: Arc<Jobs>,
    id: String,
    finished: bool,
}

impl Jobs {
    /// Registers a job of `tenant` and returns its handle (the job counts as running
    /// from here until the handle is finished or dropped).
    pub fn start(self: &Arc<Self>, tenant: &str, kind: &str, request_id: &str) -> JobHandle {
        let n = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let id = format!("job-{n}");
        self.running.fetch_add(1, Ordering::SeqCst);
        let info = JobInfo {
            id: id.clone(),
            kind: kind.into(),
            status: "queued".into(),
            stage: "queued".into(),
            done: 0,
            total: 0,
            request_id: request_id.into(),
            started_at: chrono::Utc::now().to_rfc3339(),
            finished_at: None,
            result: None,
            error: None,
        };
        self.lock().insert(
            id.clone(),
            Job {
                tenant: tenant.into(),
                info,
            },
        );
        JobHandle {
            jobs: self.clone(),
            id,
            finished: false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The job `id` if it belongs to `tenant`.
    pub fn get(&self, tenant: &str, id: &str) -> Option<JobInfo> {
        self.lock()
            .get(id)
            .filter(|j| j.tenant == tenant)
            .map(|j| j.info.clone())
    }

    /// The jobs of `tenant`, newest first.
    pub fn list(&self, tenant: &str) -> Vec<JobInfo> {
        let mut v: Vec<JobInfo> = self
            .lock()
            .values()
            .filter(|j| j.tenant == tenant)
            .map(|j| j.info.clone())
            .collect();
        v.sort_by_key(|j| std::cmp::Reverse(j.id[4..].parse::<u64>().unwrap_or(0)));
        v
    }

    /// How many jobs have not finished.
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::SeqCst)
    }

    /// Resolves once no job is running.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.running() == 0 {
                return;
            }
            notified.await;
        }
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut JobInfo)) {
        if let Some(j) = self.lock().get_mut(id) {
            f(&mut j.info);
        }
    }
}

impl JobHandle {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Enters a new stage of `total` units.
    pub fn stage(&self, stage: &str, total: u64) {
        self.jobs.update(&self.id, |j| {
            j.status = "running".into();
            j.stage = stage.into();
            j.done = 0;
            j.total = total;
        });
    }

    pub fn advance(&self, n: u64) {
        self.jobs.update(&self.id, |j| j.done += n);
    }

    /// Ends the job with its result or error.
    pub fn finish(mut self, outcome: Result<Value, String>) {
        self.finished = true;
        self.end(outcome);
    }

    fn end(&self, outcome: Result<Value, String>) {
        self.jobs.update(&self.id, |j| {
            j.finished_at = Some(chrono::Utc::now().to_rfc3339());
            match outcome {
                Ok(v) => {
                    j.status = "succeeded".into();
                    j.stage = "done".into();
                    j.result = Some(v);
                }
                Err(e) => {
                    j.status = "failed".into();
                    j.error = Some(e);
                }
            }
        });
        if self.jobs.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.jobs.idle.notify_waiters();
        }
    }
}

impl Drop for JobHandle {
    fn drop(&mut self) {
        if !self.finished {
            self.finished = true;
            self.end(Err("the job stopped without finishing".into()));
        }
    }
}

impl dossier_engine::Progress for JobHandle {
    fn start(&mut self, stage: &str, total: u64) {
        self.stage(stage, total);
    }

    fn advance(&mut self, n: u64) {
        JobHandle::advance(self, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiting_for_idle_ends_only_when_every_job_has_ended() {
        let jobs = Arc::new(Jobs::default());
        let a = jobs.start("shop", "ingest", "r1");
        let b = jobs.start("shop", "reindex", "r2");
        let waiter = tokio::spawn({
            let jobs = jobs.clone();
            async move { jobs.wait_idle().await }
        });
        a.stage("embedding", 10);
        a.advance(4);
        assert_eq!(jobs.get("shop", "job-1").unwrap().done, 4);
        assert!(jobs.get("acme", "job-1").is_none(), "another tenant's job");
        a.finish(Ok(Value::Null));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "job-2 still runs");
        drop(b); // a handle dropped without finishing marks its job failed
        waiter.await.unwrap();
        assert_eq!(jobs.get("shop", "job-2").unwrap().status, "failed");
        assert_eq!(jobs.list("shop")[0].id, "job-2");
    }
}
