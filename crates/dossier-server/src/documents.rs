//! Documents over HTTP: listing and reading what the caller may read (sections of the
//! exact version a citation names), and, for admin keys, uploading documents (a new
//! document, or a new version of one), deleting them, and bulk ingest as a job.
//!
//! **Invariants:**
//! - Reads are judged by tenant and ACL from the caller's principal; an unreadable
//!   document reads like one that does not exist.
//! - An admin key writes only its own tenant: uploaded items naming another tenant,
//!   and principals whose id another tenant holds, are refused (reported as problems).
//! - Uploaded files are kept under the uploads directory (`TENANT/REQUEST-ID/NAME`), so
//!   every version's `source_uri` keeps pointing at the text that was cited.
//! - Every commit empties the answer cache; writes are refused once shutdown begins.

use std::path::{Path as FsPath, PathBuf};

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use dossier_engine::dossier_store::principals::PrincipalWriter;
use dossier_engine::{DocumentInfo, IngestAs, IngestReport, SectionView};
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, Failure};
use crate::jobs::JobInfo;
use crate::routes::{blocking, body, kbs_in_query, query, scope_of, DateQuery};
use crate::AppState;

/// Largest upload body: a bulk ingest may carry many files.
pub(crate) const MAX_UPLOAD_BYTES: usize = 64 << 20;
/// Files per upload.
const MAX_FILES: usize = 10_000;

#[derive(OpenApi)]
#[openapi(
    paths(
        list_documents,
        document_versions,
        section,
        upload,
        upload_version,
        delete_document,
        delete_version,
        start_ingest_job
    ),
    components(schemas(UploadBody, UploadFile, DeleteResult))
)]
pub struct DocumentsApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/documents", get(list_documents).post(upload))
        .route(
            "/v1/documents/{doc_id}",
            get(document_versions).delete(delete_document),
        )
        .route("/v1/documents/{doc_id}/versions", post(upload_version))
        .route(
            "/v1/documents/{doc_id}/versions/{version}",
            delete(delete_version),
        )
        .route("/v1/sections/{chunk_id}", get(section))
        .route("/v1/jobs/ingest", post(start_ingest_job))
        .layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES))
}

/// Files to ingest: Markdown with front matter, text, HTML, PDF, DOCX, XLSX and CSV,
/// corpus JSONL, record tables (a `.jsonl`, `.csv` or `.xlsx` with its `.schema.yaml`),
/// principals (`principals.yaml`) — as the CLI reads them from disk. Binary files come
/// as base64; metadata for a file without front matter comes in `meta` (or as its
/// `NAME.meta.yaml` sidecar among the files).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadBody {
    pub files: Vec<UploadFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadFile {
    /// A file name (no directories); its extension says how it is read.
    pub name: String,
    /// The file's text, or with `encoding: base64` its bytes (PDF, DOCX, XLSX).
    pub content: String,
    /// How `content` is written: `utf-8` (the default) or `base64`.
    #[serde(default)]
    pub encoding: ContentEncoding,
    /// The file's metadata, as Markdown front matter would give it (`id`, `version`,
    /// `title`, `acl`, `kb`, `effective_from`, `supersedes`, …): for PDF, DOCX and the
    /// other files that have no place for it. Kept as the file's `.meta.yaml` sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
}

/// How an uploaded file's content is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum ContentEncoding {
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "base64")]
    Base64,
}

/// A sidecar's name: metadata for the file named before it.
fn is_sidecar(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with(".meta.yaml") || n.ends_with(".meta.yml")
}

/// A file's bytes as uploaded.
fn content_bytes(f: &UploadFile) -> Result<Vec<u8>, Failure> {
    use base64::Engine as _;
    match f.encoding {
        ContentEncoding::Utf8 => Ok(f.content.as_bytes().to_vec()),
        ContentEncoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(f.content.trim())
            .map_err(|e| Failure::Invalid(format!("{}: content is not base64: {e}", f.name))),
    }
}

/// What a delete removed (`DOC@VERSION` each).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeleteResult {
    pub removed: Vec<String>,
}

#[utoipa::path(get, path = "/v1/documents", tag = "documents",
    params(DateQuery),
    security(("api_key" = [])),
    responses(
        (status = 400, description = "Bad query string (an unknown or malformed parameter)", body = ErrorBody),
        (status = 200, description = "Every document version the caller may read, with its status on the date", body = Vec<dossier_engine::DocumentInfo>),
        (status = 401, description = "No or unknown API key", body = ErrorBody)))]
pub async fn list_documents(
    State(state): State<AppState>,
    caller: Caller,
    q: Result<Query<DateQuery>, QueryRejection>,
) -> Result<Json<Vec<DocumentInfo>>, ApiError> {
    let rid = caller.request_id.clone();
    let q = query(&rid, q)?;
    let scope = scope_of(&caller, q.now, q.as_of, &kbs_in_query(&rid, &q.kb)?);
    let engine = state.engine.clone();
    let docs = blocking(&rid, move || {
        engine
            .documents_visible(&scope, None)
            .map_err(Failure::from)
    })
    .await?;
    Ok(Json(docs))
}

#[utoipa::path(get, path = "/v1/documents/{doc_id}", tag = "documents",
    params(("doc_id" = String, Path, description = "Document id"), DateQuery),
    security(("api_key" = [])),
    responses(
        (status = 400, description = "Bad query string (an unknown or malformed parameter)", body = ErrorBody),
        (status = 200, description = "The versions of the document the caller may read", body = Vec<dossier_engine::DocumentInfo>),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such document for the caller (unknown and unreadable read the same)", body = ErrorBody)))]
pub async fn document_versions(
    State(state): State<AppState>,
    caller: Caller,
    Path(doc_id): Path<String>,
    q: Result<Query<DateQuery>, QueryRejection>,
) -> Result<Json<Vec<DocumentInfo>>, ApiError> {
    let rid = caller.request_id.clone();
    let q = query(&rid, q)?;
    let scope = scope_of(&caller, q.now, q.as_of, &kbs_in_query(&rid, &q.kb)?);
    let engine = state.engine.clone();
    let docs = blocking(&rid, move || {
        let v = engine
            .documents_visible(&scope, Some(&doc_id))
            .map_err(Failure::from)?;
        if v.is_empty() {
            return Err(Failure::NotFound);
        }
        Ok(v)
    })
    .await?;
    Ok(Json(docs))
}

#[utoipa::path(get, path = "/v1/sections/{chunk_id}", tag = "documents",
    params(("chunk_id" = String, Path, description = "A cited chunk id, `DOC@VERSION#N` (URL-encoded)"), DateQuery),
    security(("api_key" = [])),
    responses(
        (status = 400, description = "Bad query string (an unknown or malformed parameter)", body = ErrorBody),
        (status = 200, description = "The section of that exact version, every chunk of it in order", body = dossier_engine::SectionView),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such section for the caller (unknown and unreadable read the same)", body = ErrorBody)))]
pub async fn section(
    State(state): State<AppState>,
    caller: Caller,
    Path(chunk_id): Path<String>,
    q: Result<Query<DateQuery>, QueryRejection>,
) -> Result<Json<SectionView>, ApiError> {
    let rid = caller.request_id.clone();
    let q = query(&rid, q)?;
    let scope = scope_of(&caller, q.now, q.as_of, &kbs_in_query(&rid, &q.kb)?);
    let engine = state.engine.clone();
    let s = blocking(&rid, move || {
        engine.section_of(&scope, &chunk_id).map_err(Failure::from)
    })
    .await?;
    Ok(Json(s))
}

/// A file name safe to write: one path component, no hidden files, printable.
fn safe_name(name: &str) -> Result<String, Failure> {
    let bad = || {
        Failure::Invalid(format!(
            "file name {name:?} must be a plain file name with an extension"
        ))
    };
    let base = FsPath::new(name)
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(bad)?;
    if base != name
        || base.starts_with('.')
        || !base.contains('.')
        || base.chars().any(|c| c.is_control() || c == '\\')
    {
        return Err(bad());
    }
    Ok(base.to_string())
}

/// Writes the files under `TENANT/REQUEST-ID/` of the uploads directory and returns
/// their paths.
fn write_upload(dir: &FsPath, files: &[UploadFile]) -> Result<Vec<PathBuf>, Failure> {
    if files.is_empty() {
        return Err(Failure::Invalid("no files".into()));
    }
    if files.len() > MAX_FILES {
        return Err(Failure::Invalid(format!(
            "at most {MAX_FILES} files per upload"
        )));
    }
    let mut names = std::collections::HashSet::new();
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for f in files {
        let name = safe_name(&f.name)?;
        out.push((name.clone(), content_bytes(f)?));
        if let Some(meta) = &f.meta {
            // JSON is YAML: the sidecar is the object as given.
            let text = serde_json::to_string_pretty(meta).unwrap_or_default();
            out.push((format!("{name}.meta.yaml"), text.into_bytes()));
        }
    }
    for (name, _) in &out {
        if !names.insert(name.to_ascii_lowercase()) {
            return Err(Failure::Invalid(format!(
                "file {name} appears twice (a `meta` field is its .meta.yaml sidecar)"
            )));
        }
    }
    for (name, _) in out.iter().filter(|(n, _)| is_sidecar(n)) {
        let described = &name[..name.len() - name.rsplit('.').next().map_or(0, |e| e.len() + 6)];
        if !names.contains(&described.to_ascii_lowercase()) {
            return Err(Failure::Invalid(format!(
                "{name} describes {described}, which is not in this upload"
            )));
        }
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::Internal(format!("{}: {e}", dir.display())))?;
    let mut paths = Vec::new();
    for (name, bytes) in &out {
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| Failure::Internal(format!("{}: {e}", path.display())))?;
        // A sidecar is read beside its file, not as a file of its own.
        if !is_sidecar(name) {
            paths.push(path);
        }
    }
    Ok(paths)
}

/// Problems name files as the caller named them, not by the server's paths.
fn relative_problems(mut report: IngestReport, dir: &FsPath) -> IngestReport {
    let prefix = format!("{}/", dir.display());
    for p in &mut report.problems {
        *p = p.replace(&prefix, "");
    }
    report
}

/// Uploads and ingests synchronously; the shared body of the two upload routes.
async fn ingest_upload(
    state: &AppState,
    caller: &Caller,
    files: Vec<UploadFile>,
    expect_doc: Option<String>,
) -> Result<IngestReport, ApiError> {
    let rid = caller.request_id.clone();
    let permit = state.begin_expensive_write(caller)?;
    let dir = upload_dir(state, caller)?;
    let engine = state.engine.clone();
    let tenant = caller.tenant.clone();
    let (keys, me) = (state.keys.clone(), caller.principal.clone());
    let cite = upload_uri(&caller.tenant, &rid.0);
    let report = blocking(&rid, move || {
        let _permit = permit;
        let paths = write_upload(&dir, &files)?;
        if let Some(doc) = &expect_doc {
            // A new version must be of the document the route names.
            let opts = dossier_ingest_options(&tenant);
            for p in &paths {
                let (items, _) = dossier_ingest::parse_file(p, &opts);
                for item in items {
                    match item {
                        dossier_ingest::Item::Document(d) if &d.meta.doc_id == doc => {}
                        dossier_ingest::Item::Document(d) => {
                            let _ = std::fs::remove_dir_all(&dir);
                            return Err(Failure::Invalid(format!(
                                "{} is document {}, not {doc}",
                                p.file_name()
                                    .map(|n| n.to_string_lossy().to_string())
                                    .unwrap_or_default(),
                                d.meta.doc_id
                            )));
                        }
                        _ => {
                            let _ = std::fs::remove_dir_all(&dir);
                            return Err(Failure::Invalid(
                                "a new version takes document files only".into(),
                            ));
                        }
                    }
                }
            }
        }
        let key_names = |id: &str| keys.names_principal(id);
        let report = engine
            .ingest_as(
                &paths,
                upload_as(&dir, &cite, &tenant, &me, &key_names),
                &mut (),
            )
            .map_err(Failure::from)?;
        if report.documents_added == 0
            && report.documents_unchanged == 0
            && report.records == 0
            && report.principals == 0
        {
            let _ = std::fs::remove_dir_all(&dir);
            let report = relative_problems(report, &dir);
            return Err(Failure::Invalid(format!(
                "nothing ingested: {}",
                report.problems.join("; ")
            )));
        }
        Ok(relative_problems(report, &dir))
    })
    .await;
    // Whatever was committed (even by a failed ingest) must not be answered from the
    // cache.
    state.cache.invalidate_tenant(&caller.tenant);
    report
}

/// How an upload is ingested: as the key's tenant admin, under the one principal rule
/// (an upload never changes the uploader's own principal, whatever the key's scopes: an
/// operator changes it with `PUT /v1/principals/{id}`), its files cited as
/// `upload://TENANT/REQUEST-ID/NAME` rather than by the server's path.
fn upload_as<'a>(
    dir: &'a FsPath,
    cite: &'a str,
    tenant: &'a str,
    me: &'a str,
    key_names: &'a dyn Fn(&str) -> bool,
) -> IngestAs<'a> {
    IngestAs {
        writer: PrincipalWriter::TenantAdmin {
            tenant,
            principal: me,
            operator: false,
            key_names,
        },
        cite_as: Some((dir, cite)),
    }
}

/// Where one request's upload is kept: `TENANT/REQUEST-ID/` below the uploads
/// directory. A tenant is a name, never a path (ids refuse one at ingest; a store from
/// before that rule may still hold one, so it is checked here too, where it would
/// matter).
fn upload_dir(state: &AppState, caller: &Caller) -> Result<PathBuf, ApiError> {
    let rid = &caller.request_id;
    dossier_core::ids::check_tenant(&caller.tenant).map_err(|e| {
        ApiError::new(
            rid,
            Failure::Invalid(format!("uploads are refused for this key's tenant: {e}")),
        )
    })?;
    Ok(state.uploads_dir().join(&caller.tenant).join(&rid.0))
}

/// The URI prefix uploaded files are cited under.
fn upload_uri(tenant: &str, rid: &str) -> String {
    format!("upload://{tenant}/{rid}/")
}

fn dossier_ingest_options(tenant: &str) -> dossier_ingest::IngestOptions {
    dossier_ingest::IngestOptions {
        default_tenant: tenant.into(),
        ..Default::default()
    }
}

#[utoipa::path(post, path = "/v1/documents", tag = "documents",
    request_body = UploadBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The ingest report (as `dossier ingest --json`); `problems` lists what was skipped, with file:line", body = dossier_engine::IngestReport),
        (status = 400, description = "Bad body or names, or nothing could be ingested", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody),
        (status = 429, description = "The tenant runs as many expensive operations as it may", body = ErrorBody),
        (status = 503, description = "The server is shutting down", body = ErrorBody)))]
pub async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    b: Result<Json<UploadBody>, JsonRejection>,
) -> Result<Json<IngestReport>, ApiError> {
    let b = body(&caller.request_id, b)?;
    Ok(Json(ingest_upload(&state, &caller, b.files, None).await?))
}

#[utoipa::path(post, path = "/v1/documents/{doc_id}/versions", tag = "documents",
    params(("doc_id" = String, Path, description = "The document the new version belongs to")),
    request_body = UploadBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The ingest report; the file's front matter gives the version, its dates and any `supersedes`", body = dossier_engine::IngestReport),
        (status = 400, description = "A file is not a version of this document", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody)))]
pub async fn upload_version(
    State(state): State<AppState>,
    caller: Caller,
    Path(doc_id): Path<String>,
    b: Result<Json<UploadBody>, JsonRejection>,
) -> Result<Json<IngestReport>, ApiError> {
    let b = body(&caller.request_id, b)?;
    Ok(Json(
        ingest_upload(&state, &caller, b.files, Some(doc_id)).await?,
    ))
}

async fn delete_spec(
    state: &AppState,
    caller: &Caller,
    spec: String,
) -> Result<Json<DeleteResult>, ApiError> {
    let rid = caller.request_id.clone();
    state.begin_write(caller)?;
    let engine = state.engine.clone();
    let tenant = caller.tenant.clone();
    let removed = blocking(&rid, move || {
        engine.delete(&spec, Some(&tenant)).map_err(Failure::from)
    })
    .await;
    state.cache.invalidate_tenant(&caller.tenant);
    Ok(Json(DeleteResult { removed: removed? }))
}

#[utoipa::path(delete, path = "/v1/documents/{doc_id}", tag = "documents",
    params(("doc_id" = String, Path, description = "Document id: every version is removed")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "What was removed", body = DeleteResult),
        (status = 400, description = "An id naming a version (`DOC@VERSION`): use the version route", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody),
        (status = 404, description = "No such document in the key's tenant", body = ErrorBody)))]
pub async fn delete_document(
    State(state): State<AppState>,
    caller: Caller,
    Path(doc_id): Path<String>,
) -> Result<Json<DeleteResult>, ApiError> {
    if doc_id.contains('@') {
        return Err(ApiError::new(
            &caller.request_id,
            Failure::Invalid(
                "use /v1/documents/{doc_id}/versions/{version} to delete one version".into(),
            ),
        ));
    }
    delete_spec(&state, &caller, doc_id).await
}

#[utoipa::path(delete, path = "/v1/documents/{doc_id}/versions/{version}", tag = "documents",
    params(("doc_id" = String, Path, description = "Document id"), ("version" = String, Path, description = "The version to remove")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "What was removed", body = DeleteResult),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody),
        (status = 404, description = "No such version in the key's tenant", body = ErrorBody)))]
pub async fn delete_version(
    State(state): State<AppState>,
    caller: Caller,
    Path((doc_id, version)): Path<(String, String)>,
) -> Result<Json<DeleteResult>, ApiError> {
    delete_spec(&state, &caller, format!("{doc_id}@{version}")).await
}

#[utoipa::path(post, path = "/v1/jobs/ingest", tag = "jobs",
    request_body = UploadBody,
    security(("api_key" = [])),
    responses(
        (status = 202, description = "The job, queued; follow it at /v1/jobs/{id}", body = JobInfo),
        (status = 400, description = "Bad body or names", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "The key has no admin scope", body = ErrorBody),
        (status = 429, description = "The tenant runs as many expensive operations as it may", body = ErrorBody),
        (status = 503, description = "The server is shutting down", body = ErrorBody)))]
pub async fn start_ingest_job(
    State(state): State<AppState>,
    caller: Caller,
    b: Result<Json<UploadBody>, JsonRejection>,
) -> Result<(StatusCode, Json<JobInfo>), ApiError> {
    let rid = caller.request_id.clone();
    let b = body(&rid, b)?;
    let permit = state.begin_expensive_write(&caller)?;
    let dir = upload_dir(&state, &caller)?;
    // Files are written before answering, so a bad name is the request's error.
    let files = b.files;
    let write_dir = dir.clone();
    let paths = blocking(&rid, move || write_upload(&write_dir, &files)).await?;
    let mut job = state.jobs.start(&caller.tenant, "ingest", &rid.0);
    state.record_jobs(&rid).await?;
    let info = state
        .jobs
        .get(None, &caller.tenant, job.id())
        .ok_or_else(|| ApiError::new(&rid, Failure::Internal("job vanished".into())))?;
    let engine = state.engine.clone();
    let cache = state.cache.clone();
    let tenant = caller.tenant.clone();
    let (keys, me) = (state.keys.clone(), caller.principal.clone());
    let cite = upload_uri(&caller.tenant, &rid.0);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let key_names = |id: &str| keys.names_principal(id);
        let how = upload_as(&dir, &cite, &tenant, &me, &key_names);
        let outcome = engine.ingest_as(&paths, how, &mut job);
        cache.invalidate_tenant(&tenant);
        // The job's end means its documents are in the tenant's graph too (requests
        // meanwhile answer from the previous one; see `maintain`).
        if let Err(e) = engine.refresh_graph(&tenant) {
            eprintln!("dossier-server: refreshing tenant {tenant}'s graph failed: {e}");
        }
        match outcome {
            Ok(report) => {
                let report = relative_problems(report, &dir);
                job.finish(serde_json::to_value(report).map_err(|e| e.to_string()));
            }
            Err(e) => job.finish(Err(e.to_string())),
        }
    });
    Ok((StatusCode::ACCEPTED, Json(info)))
}
