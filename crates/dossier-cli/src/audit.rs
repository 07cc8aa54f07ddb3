//! `dossier audit`: the store's audit log, read (or pruned) directly — the operator's
//! view, like the server's `GET /v1/audit`, with the same filters. Only the catalog is
//! opened (no embedder, no index). An embedded store is single-process: while a server
//! holds it, ask the server (`GET /v1/audit` with an operator key).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Subcommand;
use dossier_server::audit::{query_of, AuditParams};
use dossier_store::{AuditEntry, CatalogBackend, Store, StoreLocation, FORMAT_VERSION};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    action: Option<AuditAction>,
    #[command(flatten)]
    filter: Filter,
}

#[derive(Subcommand)]
pub enum AuditAction {
    /// Export, then delete, the entries (and the traces kept with them) older than the
    /// retention — the server's policy (`dossier serve` does the same every minute).
    Prune {
        /// Keep this many days (what `dossier serve --audit-retention-days` keeps).
        #[arg(long, default_value_t = dossier_server::DEFAULT_AUDIT_RETENTION_DAYS)]
        retention_days: u32,
        /// Where the deleted entries are written first, one JSONL file a run
        /// (default: `audit-export/` in an embedded store's directory, or in the
        /// current directory for a PostgreSQL store).
        #[arg(long)]
        export_dir: Option<std::path::PathBuf>,
    },
}

/// Which entries to list (newest first); every filter given must match.
#[derive(clap::Args)]
struct Filter {
    /// The principal who made the request.
    #[arg(long)]
    principal: Option<String>,
    /// The principal's tenant.
    #[arg(long)]
    tenant: Option<String>,
    /// `/v1/search`, `/v1/ask` or `/v1/chat/completions`.
    #[arg(long)]
    route: Option<String>,
    /// An answer status, `ok`/`degraded` (search), or an error code.
    #[arg(long)]
    status: Option<String>,
    #[arg(long)]
    request_id: Option<String>,
    /// Finished at or after this instant (RFC 3339).
    #[arg(long)]
    since: Option<String>,
    /// Finished before this instant (RFC 3339).
    #[arg(long)]
    until: Option<String>,
    /// Entries per page (at most 1000).
    #[arg(long, default_value_t = dossier_store::audit::DEFAULT_PAGE)]
    limit: usize,
    /// Continue after an earlier page (its `next_cursor`).
    #[arg(long)]
    cursor: Option<String>,
}

/// The catalog of the store at `location`, which must exist.
fn open(location: &StoreLocation) -> Result<Arc<dyn CatalogBackend>> {
    let shown = location.shown();
    let opened = Store::open_catalog(location).with_context(|| {
        format!(
            "opening store {shown} (an embedded store held by a running server is read through its GET /v1/audit)"
        )
    })?;
    let Some((m, catalog)) = opened else {
        bail!("no Dossier store at {shown} (pass --store)");
    };
    if m.format_version != FORMAT_VERSION {
        bail!(
            "store {shown} has format version {}, this build reads {FORMAT_VERSION}",
            m.format_version
        );
    }
    Ok(catalog)
}

pub fn run(location: &StoreLocation, args: &AuditArgs, json: bool) -> Result<ExitCode> {
    if let Some(AuditAction::Prune {
        retention_days,
        export_dir,
    }) = &args.action
    {
        if *retention_days == 0 {
            bail!("--retention-days 0 keeps every entry: nothing to prune");
        }
        let catalog = open(location)?;
        let export_dir = export_dir.clone().unwrap_or_else(|| match location {
            StoreLocation::Dir(d) => d.join("audit-export"),
            StoreLocation::Postgres { .. } => std::path::PathBuf::from("audit-export"),
        });
        let policy = dossier_server::audit::Retention {
            days: *retention_days,
            max_entries: 0,
            export_dir: Some(export_dir),
        };
        let done = dossier_server::audit::retain(catalog.as_ref(), &policy, chrono::Utc::now())
            .map_err(|e| anyhow!("pruning the audit log: {e}"))?;
        let pruned = &done.pruned;
        if json {
            crate::print_json(&serde_json::json!({
                "entries": pruned.entries,
                "traces": pruned.traces,
                "busy": pruned.busy,
                "exported": done.exported,
                "file": done.file,
            }))?;
        } else if pruned.busy {
            println!("another process is pruning the audit log; nothing done");
        } else {
            let file = done.file.as_ref().map_or(String::new(), |f| {
                format!(" (exported first to {})", f.display())
            });
            println!(
                "{} audit entries and {} traces older than {retention_days} days deleted{file}",
                pruned.entries, pruned.traces
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let f = &args.filter;
    let query = query_of(AuditParams {
        principal: f.principal.clone(),
        tenant: f.tenant.clone(),
        route: f.route.clone(),
        status: f.status.clone(),
        request_id: f.request_id.clone(),
        since: f.since.clone(),
        until: f.until.clone(),
        limit: Some(f.limit),
        cursor: f.cursor.clone(),
    })
    .map_err(anyhow::Error::msg)?;
    let page = open(location)?.audit_list(&query)?;
    if json {
        crate::print_json(&page)?;
        return Ok(ExitCode::SUCCESS);
    }
    if page.entries.is_empty() {
        println!("no audit entries");
    }
    for e in &page.entries {
        print_entry(e);
    }
    if let Some(c) = &page.next_cursor {
        println!("more: --cursor {c}");
    }
    Ok(ExitCode::SUCCESS)
}

fn print_entry(e: &AuditEntry) {
    let groups = if e.groups.is_empty() {
        String::new()
    } else {
        format!(" [{}]", e.groups.join(","))
    };
    println!(
        "{} {} {}@{}{groups} {} {} ({}){}",
        e.finished_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        e.request_id,
        e.principal,
        e.tenant,
        e.route,
        e.status,
        e.http_status,
        if e.cached { " cached" } else { "" }
    );
    match &e.question {
        Some(q) => println!("    question: {q}"),
        None => println!("    question blake3: {}", e.question_blake3),
    }
    if !e.tools.is_empty() {
        let tools: Vec<String> = e
            .tools
            .iter()
            .map(|t| format!("{}:{}", t.name, t.status))
            .collect();
        println!("    tools: {}", tools.join(" "));
    }
    if !e.evidence.is_empty() {
        println!("    evidence: {}", e.evidence.join(" "));
    }
    if !e.citations.is_empty() {
        println!("    citations: {}", e.citations.join(" "));
    }
    for r in &e.reasons {
        println!("    step {} {} {}: {}", r.step, r.action, r.status, r.note);
    }
}
