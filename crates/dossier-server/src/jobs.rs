//! Long work as jobs: bulk ingest and index rebuilds run on the blocking pool after the
//! request that started them has answered `202 Accepted`; `GET /v1/jobs/{id}` shows
//! their progress.
//!
//! **Invariants:** a job belongs to the tenant of the admin key that started it and is
//! invisible (404, like an unknown id) to every other tenant. Shutdown waits for running
//! jobs ([`Jobs::wait_idle`]); each commit a job makes is one catalog transaction, so a
//! job stopped by a crash leaves whole batches or nothing.
//!
//! With a shared store every replica's jobs are mirrored into the database
//! ([`Jobs::sync`], run by the replica's follower loop, never on the async runtime):
//! any replica shows any job of the caller's tenant, and a job whose replica stopped
//! renewing its heartbeat (killed, partitioned) is reported failed by another.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dossier_engine::dossier_store::postgres::PgCatalog;
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
    /// Changed since the last [`Jobs::sync`].
    dirty: bool,
}

/// Every job since the server started.
pub struct Jobs {
    jobs: Mutex<BTreeMap<String, Job>>,
    /// Drawn at start and part of every id: a restarted server (whose embedded store
    /// keeps no jobs) never hands out an id an earlier process gave, so a client
    /// polling an old id reads 404, not another job's outcome.
    boot: String,
    next: AtomicU64,
    running: AtomicU64,
    idle: tokio::sync::Notify,
    /// Set when the store is shared: this replica's name in the jobs table.
    owner: std::sync::OnceLock<String>,
}

impl Default for Jobs {
    fn default() -> Jobs {
        Jobs {
            jobs: Mutex::default(),
            boot: format!("{:08x}", rand::random::<u32>()),
            next: AtomicU64::default(),
            running: AtomicU64::default(),
            idle: tokio::sync::Notify::default(),
            owner: std::sync::OnceLock::default(),
        }
    }
}

/// A job whose replica has not renewed its heartbeat for this long is reported failed.
pub const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// Most jobs a list shows.
const LIST_LIMIT: i64 = 200;

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
        // Replicas of one store, and one server before and after a restart, number
        // their jobs apart.
        let id = format!("job-{}-{n}", self.boot);
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
                dirty: true,
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

    /// Mirrors jobs into the shared store's database from now on, as `owner`.
    pub fn share(&self, owner: String) {
        let _ = self.owner.set(owner);
    }

    /// The job `id` if it belongs to `tenant`: this replica's, or with a shared store
    /// any replica's. Blocking (a database read): call it off the async runtime.
    pub fn get(&self, shared: Option<&PgCatalog>, tenant: &str, id: &str) -> Option<JobInfo> {
        let local = self
            .lock()
            .get(id)
            .filter(|j| j.tenant == tenant)
            .map(|j| j.info.clone());
        if local.is_some() || self.owner.get().is_none() {
            return local;
        }
        let body = shared?.job_get(tenant, id).ok().flatten()?;
        serde_json::from_slice(&body).ok()
    }

    /// The jobs of `tenant`, newest first: this replica's, or with a shared store every
    /// replica's (this replica's own state wins, being the freshest). Blocking.
    pub fn list(&self, shared: Option<&PgCatalog>, tenant: &str) -> Vec<JobInfo> {
        let mut v: Vec<JobInfo> = self
            .lock()
            .values()
            .filter(|j| j.tenant == tenant)
            .map(|j| j.info.clone())
            .collect();
        if let (Some(_), Some(pg)) = (self.owner.get(), shared) {
            for body in pg.job_list(tenant, LIST_LIMIT).unwrap_or_default() {
                if let Ok(j) = serde_json::from_slice::<JobInfo>(&body) {
                    if !v.iter().any(|l| l.id == j.id) {
                        v.push(j);
                    }
                }
            }
        }
        v.sort_by(|a, b| {
            b.started_at
                .cmp(&a.started_at)
                .then_with(|| job_number(&b.id).cmp(&job_number(&a.id)))
        });
        v.truncate(LIST_LIMIT as usize);
        v
    }

    /// With a shared store: writes the jobs that changed (and renews the heartbeat of
    /// those running), then reports failed the jobs of replicas that stopped. Blocking;
    /// the follower loop calls it.
    pub fn sync(&self, pg: &PgCatalog) -> Result<(), dossier_engine::dossier_store::Error> {
        let Some(owner) = self.owner.get() else {
            return Ok(());
        };
        let due: Vec<(String, String, JobInfo)> = {
            let mut jobs = self.lock();
            jobs.iter_mut()
                .filter(|(_, j)| j.dirty || matches!(j.info.status.as_str(), "queued" | "running"))
                .map(|(id, j)| {
                    j.dirty = false;
                    (id.clone(), j.tenant.clone(), j.info.clone())
                })
                .collect()
        };
        for (id, tenant, info) in due {
            let body = serde_json::to_vec(&info).unwrap_or_default();
            if let Err(e) = pg.job_save(&id, &tenant, owner, &info.status, &body) {
                // Written again on the next sync.
                if let Some(j) = self.lock().get_mut(&id) {
                    j.dirty = true;
                }
                return Err(e);
            }
        }
        pg.jobs_fail_abandoned(ABANDONED_AFTER, &|body, replica| {
            let mut info: JobInfo = match serde_json::from_slice(body) {
                Ok(i) => i,
                Err(_) => return body.to_vec(),
            };
            info.status = "failed".into();
            info.finished_at = Some(chrono::Utc::now().to_rfc3339());
            info.error = Some(format!(
                "the replica running it ({replica}) stopped (no heartbeat for {} s) during \
                 `{}`; each commit it made is whole and kept, nothing after it was written; \
                 send the upload again to finish (documents already stored are skipped)",
                ABANDONED_AFTER.as_secs(),
                info.stage
            ));
            serde_json::to_vec(&info).unwrap_or_else(|_| body.to_vec())
        })?;
        Ok(())
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
            j.dirty = true;
        }
    }
}

/// The number at the end of a job id, for ordering jobs started in the same instant.
fn job_number(id: &str) -> u64 {
    id.rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
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

    /// Issue 39: after a kill -9 of an embedded-store server, `job-1` read 404 and the
    /// next job was given `job-1` again.
    #[test]
    fn job_ids_are_not_reused_after_a_restart() {
        let mut seen = std::collections::HashSet::new();
        for _process in 0..50 {
            let jobs = Arc::new(Jobs::default());
            for _ in 0..3 {
                let h = jobs.start("t", "ingest", "r");
                assert!(seen.insert(h.id().to_string()), "{} given twice", h.id());
                h.finish(Ok(Value::Null));
            }
        }
    }

    #[tokio::test]
    async fn waiting_for_idle_ends_only_when_every_job_has_ended() {
        let jobs = Arc::new(Jobs::default());
        let a = jobs.start("shop", "ingest", "r1");
        let b = jobs.start("shop", "reindex", "r2");
        let (a_id, b_id) = (a.id().to_string(), b.id().to_string());
        let waiter = tokio::spawn({
            let jobs = jobs.clone();
            async move { jobs.wait_idle().await }
        });
        a.stage("embedding", 10);
        a.advance(4);
        assert_eq!(jobs.get(None, "shop", &a_id).unwrap().done, 4);
        assert!(
            jobs.get(None, "acme", &a_id).is_none(),
            "another tenant's job"
        );
        a.finish(Ok(Value::Null));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "job-2 still runs");
        drop(b); // a handle dropped without finishing marks its job failed
        waiter.await.unwrap();
        assert_eq!(jobs.get(None, "shop", &b_id).unwrap().status, "failed");
        assert_eq!(jobs.list(None, "shop")[0].id, b_id);
    }
}
