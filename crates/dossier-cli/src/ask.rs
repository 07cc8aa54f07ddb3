//! `dossier ask`: the agent loop from the command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::NaiveDate;
use dossier_agent::{Agent, AskRequest, AskResponse, EngineTools};
use dossier_engine::{Engine, Mode};
use dossier_llm::{ChatModel, LlmSpec, LocalServer, OpenAiChat};

#[derive(clap::Args)]
pub struct AskArgs {
    question: String,
    /// Principal id (tenant and groups come from the ingested principals).
    #[arg(long = "as")]
    principal: String,
    /// The business clock (default: today).
    #[arg(long)]
    now: Option<NaiveDate>,
    /// Judge document versions in force on this date.
    #[arg(long)]
    as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases (within the principal's own; repeat the
    /// flag or separate with commas).
    #[arg(long = "kb", value_delimiter = ',')]
    kbs: Vec<String>,
    /// `global` asks the community reports; default: documents, records and graph.
    #[arg(long)]
    mode: Option<String>,
    /// Chat model: `none` (default: deterministic planner, extractive answer), `local`
    /// (starts the llama-server installed by scripts/setup-llm with the 1.5B model when
    /// installed, else the 0.5B), `local:0.5b` or `local:1.5b` (that model), or an
    /// OpenAI-compatible base URL (`http://host:port/v1`, model from --llm-model).
    #[arg(long, default_value = "none", env = "DOSSIER_LLM")]
    llm: String,
    /// Model name sent to an OpenAI-compatible server.
    #[arg(long, default_value = "default", env = "DOSSIER_LLM_MODEL")]
    llm_model: String,
    /// The most tool calls this ask may make.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_steps)]
    max_steps: usize,
    /// The most evidence chunks it may keep.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_evidence)]
    max_evidence: usize,
    /// The most model tokens it may use.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_tokens)]
    max_tokens: u64,
    #[command(flatten)]
    model_use: ModelUse,
    /// Write the whole trajectory (JSON) to this file.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write the audit entries (JSON: what the principal is not told, such as a record
    /// that exists but is not theirs) to this file. For the operator, never the caller.
    #[arg(long)]
    audit: Option<PathBuf>,
}

/// What a configured model may do in one ask, each bounded (0 turns that use off, and
/// the program's own part stands: the deterministic plan, the fusion order, the rules'
/// judgement, the extractive answer). On a CPU the model's calls are most of an ask's
/// time; these let an operator keep the ones worth it.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelUse {
    /// The most planning rounds a model may propose calls in.
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_planner_calls)]
    pub max_planner_calls: usize,
    /// Passages a model scores for the reranker (one call each).
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_model_reranks)]
    pub max_model_reranks: usize,
    /// Sub-questions a model checks for an answer in their evidence (one call each).
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_judge_calls)]
    pub max_judge_calls: usize,
    /// Answers a model writes (0 or 1).
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_writer_calls,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1))]
    pub max_writer_calls: usize,
    /// Translations of the question into the other language (Chinese ↔ English) a
    /// model makes when the first search left it uncovered (0 or 1).
    #[arg(long, default_value_t = dossier_agent::Budget::default().max_translate_calls,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1))]
    pub max_translate_calls: usize,
}

impl ModelUse {
    /// `base` with these limits.
    pub fn budget(&self, base: dossier_agent::Budget) -> dossier_agent::Budget {
        dossier_agent::Budget {
            max_planner_calls: self.max_planner_calls,
            max_model_reranks: self.max_model_reranks,
            max_judge_calls: self.max_judge_calls,
            max_writer_calls: self.max_writer_calls,
            max_translate_calls: self.max_translate_calls,
            ..base
        }
    }
}

/// A chat model as the `--llm` flags name it ([`LlmSpec::parse`]): `none`, `local`,
/// `local:0.5b` or `local:1.5b` (starts the llama-server installed by scripts/setup-llm;
/// the returned handle keeps it running), or an OpenAI-compatible base URL with
/// `model_name`.
pub struct Llm {
    pub model: Option<std::sync::Arc<dyn ChatModel>>,
    _server: Option<LocalServer>,
}

impl Llm {
    pub fn connect(spec: &str, model_name: &str) -> Result<Llm> {
        let timeout = Duration::from_secs(180);
        Ok(match LlmSpec::parse(spec)? {
            LlmSpec::None => Llm {
                model: None,
                _server: None,
            },
            LlmSpec::Local(which) => {
                let s = LocalServer::start_model(which)
                    .with_context(|| format!("starting the local model (--llm {which})"))?;
                Llm {
                    model: Some(std::sync::Arc::new(s.chat_model(timeout)?)),
                    _server: Some(s),
                }
            }
            LlmSpec::Url(url) => Llm {
                model: Some(std::sync::Arc::new(
                    OpenAiChat::new(&url, model_name, timeout)?
                        .with_api_key_env("DOSSIER_LLM_API_KEY"),
                )),
                _server: None,
            },
        })
    }

    /// The model, or an error saying one is needed.
    pub fn required(&self) -> Result<&dyn ChatModel> {
        self.model
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("this command needs a model: --llm local or a URL"))
    }
}

pub fn run(engine: &Engine, args: &AskArgs, json: bool) -> Result<ExitCode> {
    let mode = match args.mode.as_deref() {
        None => None,
        Some(m) => {
            let m: Mode = m.parse()?;
            if m != Mode::Global {
                bail!("ask --mode takes only `global` (other questions pick their own tools)");
            }
            Some(m)
        }
    };
    let llm = Llm::connect(&args.llm, &args.llm_model)?;
    let tools = EngineTools::new(engine);
    let agent = Agent {
        engine,
        tools: &tools,
        model: llm.model.as_deref(),
    };
    let mut req = AskRequest::new(
        &args.principal,
        &args.question,
        args.now
            .unwrap_or_else(|| chrono::Local::now().date_naive()),
    );
    req.as_of = args.as_of;
    req.kbs = args.kbs.clone();
    req.mode = mode;
    req.budget = dossier_agent::Budget {
        max_steps: args.max_steps,
        max_evidence: args.max_evidence,
        max_tokens: args.max_tokens,
        ..args.model_use.budget(dossier_agent::Budget::default())
    };
    let asked = agent.ask_audited(&req)?;
    if let Some(path) = &args.audit {
        std::fs::write(path, serde_json::to_string_pretty(&asked.audit)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let resp = asked.response;
    if let Some(path) = &args.trace {
        std::fs::write(path, serde_json::to_string_pretty(&resp.trace)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if json {
        crate::print_json(&resp)?;
    } else {
        print_human(&resp);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_human(r: &AskResponse) {
    let status = serde_json::to_value(r.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    println!("[{status}]");
    println!("{}", r.answer);
    if !r.gaps.is_empty() && !r.answer.contains(&r.gaps[0]) {
        for g in &r.gaps {
            println!("gap: {g}");
        }
    }
    if !r.citations.is_empty() {
        println!();
        for c in &r.citations {
            println!(
                "[{}] {}@{} § {} <{}>  “{}”",
                c.mark, c.doc_id, c.version, c.section, c.source_uri, c.quote
            );
        }
    }
    let t = &r.trace;
    let calls: Vec<String> = t
        .budget
        .calls
        .iter()
        .map(|(k, v)| format!("{k}×{v}"))
        .collect();
    println!(
        "\ntrajectory: {} steps ({}), {} rejected, {} sub-questions ({} covered), planner {}, writer {}, {} ms",
        t.steps.len(),
        calls.join(" "),
        t.rejected_proposals.len(),
        t.sub_questions.len(),
        t.sub_questions.iter().filter(|s| s.covered).count(),
        t.planner,
        t.writer,
        t.budget.elapsed_ms
    );
}
