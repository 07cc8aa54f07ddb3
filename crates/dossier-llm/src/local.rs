//! The local chat model: llama.cpp's `llama-server` with a GGUF that
//! `scripts/setup-llm` installs, started on demand.
//!
//! Two models can be installed in `.tools/models/`: Qwen2.5-Coder-0.5B-Instruct
//! (always; what [`LocalServer::start`] and the tests run) and Qwen2.5-Coder-1.5B-Instruct
//! (`scripts/setup-llm --with-1.5b`). [`LocalModel`] picks one; [`LlmSpec`] parses the
//! `--llm` values that name them.

use std::collections::VecDeque;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{LlmError, OpenAiChat};

/// File name of the 0.5B model in `.tools/models/` (`--llm local:0.5b`): the one
/// `scripts/setup-llm` always installs, and the one [`LocalServer::start`] runs.
pub const DEFAULT_GGUF_NAME: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// File name of the 1.5B model in `.tools/models/` (`--llm local:1.5b`), installed by
/// `scripts/setup-llm --with-1.5b`.
pub const GGUF_1_5B_NAME: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";

/// What to do when the local model is missing.
pub const SETUP_HINT: &str =
    "run scripts/setup-llm (builds .tools/llama/bin/llama-server and assembles the model in .tools/models/)";

/// What to do when the 1.5B model is missing.
pub const SETUP_HINT_1_5B: &str =
    "run scripts/setup-llm --with-1.5b (assembles the 1.5B model, 1.1 GB, in .tools/models/)";

/// Which installed model a [`LocalServer`] runs: what follows `local` in `--llm local`,
/// `--llm local:0.5b` and `--llm local:1.5b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LocalModel {
    /// `local`: the 1.5B when it is installed, else the 0.5B; `$DOSSIER_LLM_GGUF`, when
    /// set, replaces this choice.
    #[default]
    Auto,
    /// `local:0.5b`: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M ([`DEFAULT_GGUF_NAME`]).
    Qwen0_5B,
    /// `local:1.5b`: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M ([`GGUF_1_5B_NAME`]).
    Qwen1_5B,
}

impl LocalModel {
    /// The file in `.tools/models/` (none for [`Auto`](Self::Auto), which picks one).
    pub fn file_name(self) -> Option<&'static str> {
        match self {
            Self::Auto => None,
            Self::Qwen0_5B => Some(DEFAULT_GGUF_NAME),
            Self::Qwen1_5B => Some(GGUF_1_5B_NAME),
        }
    }

    fn setup_hint(self) -> &'static str {
        match self {
            Self::Qwen1_5B => SETUP_HINT_1_5B,
            Self::Auto | Self::Qwen0_5B => SETUP_HINT,
        }
    }
}

impl fmt::Display for LocalModel {
    /// The `--llm` value: `local`, `local:0.5b` or `local:1.5b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "local",
            Self::Qwen0_5B => "local:0.5b",
            Self::Qwen1_5B => "local:1.5b",
        })
    }
}

/// A chat model as a `--llm` value names it. [`LlmSpec::parse`] is the one parser of
/// those values; every command that takes `--llm` goes through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmSpec {
    /// `none`: no model.
    None,
    /// `local`, `local:0.5b` or `local:1.5b`: a [`LocalServer`] with that model.
    Local(LocalModel),
    /// An OpenAI-compatible base URL (`http://…` or `https://…`).
    Url(String),
}

impl LlmSpec {
    /// The values [`parse`](Self::parse) takes, for help texts and errors.
    pub const EXPECTED: &'static str = "none, local, local:0.5b, local:1.5b, or an http(s) URL";

    /// Parses a `--llm` value: `none`; `local` (the 1.5B when installed, else the 0.5B),
    /// `local:0.5b` or `local:1.5b` (the size in any case); or an `http://` / `https://`
    /// base URL. Anything else is [`LlmError::Setup`] listing the accepted values.
    pub fn parse(spec: &str) -> Result<Self, LlmError> {
        let bad = || LlmError::Setup(format!("--llm {spec:?}: expected {}", Self::EXPECTED));
        Ok(match spec {
            "none" => Self::None,
            "local" => Self::Local(LocalModel::Auto),
            url if url.starts_with("http://") || url.starts_with("https://") => {
                Self::Url(url.to_string())
            }
            other => {
                let size = other.strip_prefix("local:").ok_or_else(bad)?;
                Self::Local(match size.to_ascii_lowercase().as_str() {
                    "0.5b" => LocalModel::Qwen0_5B,
                    "1.5b" => LocalModel::Qwen1_5B,
                    _ => return Err(bad()),
                })
            }
        })
    }
}

impl FromStr for LlmSpec {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Where `llama-server` lives under a workspace root.
const SERVER_REL: &str = ".tools/llama/bin/llama-server";
/// Lines of the server's output kept for error messages.
const LOG_LINES: usize = 200;
/// Lines of that output quoted in an error.
const TAIL_LINES: usize = 30;

/// How to start a [`LocalServer`]. [`LocalServerConfig::locate`] fills in the installed
/// binary and model and the defaults; change fields before
/// [`LocalServer::start_with`].
#[derive(Debug, Clone, PartialEq)]
pub struct LocalServerConfig {
    /// The `llama-server` executable.
    pub server: PathBuf,
    /// The GGUF model file.
    pub gguf: PathBuf,
    /// Context size in tokens (`-c`), shared by the prompt and the answer. Default 4096.
    pub ctx_size: u32,
    /// CPU threads for generation and prompt processing (`-t`, `-tb`). Default 2, or
    /// `$DOSSIER_LLM_THREADS` with [`locate`](Self::locate). Keep the total over all
    /// running servers at or below the number of cores: llama.cpp's threads wait for
    /// each other at every step, so two 2-thread servers generating at once on 2 busy
    /// cores run several times slower than two 1-thread servers.
    pub threads: u32,
    /// How long to wait for `/health` to report ready. Default 120 s.
    pub ready_timeout: Duration,
    /// More `llama-server` arguments, appended after the built-in ones.
    pub extra_args: Vec<String>,
}

impl LocalServerConfig {
    /// The installed server and the default model with default settings.
    ///
    /// The server is `$DOSSIER_LLAMA_SERVER` when set, else `.tools/llama/bin/llama-server`
    /// in the nearest ancestor (of the running executable, or
    /// of this crate's source directory) that has one. The model is `$DOSSIER_LLM_GGUF`
    /// when set, else `.tools/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf` found the
    /// same way: the 0.5B, even where the 1.5B is installed too (the tests run this; see
    /// [`locate_model`](Self::locate_model) for `--llm local`). `$DOSSIER_LLM_THREADS`,
    /// when set, replaces the default thread count.
    /// Fails with [`LlmError::Setup`], saying to run `scripts/setup-llm`, when either
    /// file is missing, when the model is not a GGUF file, and when
    /// `$DOSSIER_LLM_THREADS` is not a positive number.
    pub fn locate() -> Result<Self, LlmError> {
        let server = locate_file("DOSSIER_LLAMA_SERVER", SERVER_REL, "llama-server")?;
        let gguf = match env_file("DOSSIER_LLM_GGUF", "the GGUF model")? {
            Some(gguf) => gguf,
            None => resolve_gguf(LocalModel::Qwen0_5B, None, &search_starts())?,
        };
        Self::installed(server, gguf)
    }

    /// Like [`locate`](Self::locate), with the model `model` names.
    ///
    /// [`LocalModel::Auto`] (`--llm local`) is `$DOSSIER_LLM_GGUF` when set, else
    /// `.tools/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf` when installed, else the
    /// 0.5B. [`LocalModel::Qwen0_5B`] and [`LocalModel::Qwen1_5B`] are that model's file in
    /// `.tools/models/` (`$DOSSIER_LLM_GGUF` does not apply); a missing 1.5B fails saying to
    /// run `scripts/setup-llm --with-1.5b`.
    pub fn locate_model(model: LocalModel) -> Result<Self, LlmError> {
        let server = locate_file("DOSSIER_LLAMA_SERVER", SERVER_REL, "llama-server")?;
        let env_gguf = match model {
            LocalModel::Auto => env_file("DOSSIER_LLM_GGUF", "the GGUF model")?,
            LocalModel::Qwen0_5B | LocalModel::Qwen1_5B => None,
        };
        let gguf = resolve_gguf(model, env_gguf, &search_starts())?;
        Self::installed(server, gguf)
    }

    /// `server` and `gguf` with the default settings and `$DOSSIER_LLM_THREADS`.
    fn installed(server: PathBuf, gguf: PathBuf) -> Result<Self, LlmError> {
        check_gguf(&gguf)?;
        let mut config = Self::new(server, gguf);
        if let Some(threads) = std::env::var_os("DOSSIER_LLM_THREADS").filter(|v| !v.is_empty()) {
            config.threads = threads
                .to_str()
                .and_then(|t| t.trim().parse().ok())
                .filter(|&t: &u32| t > 0)
                .ok_or_else(|| {
                    LlmError::Setup(format!(
                        "DOSSIER_LLM_THREADS={}: expected a positive number",
                        threads.to_string_lossy()
                    ))
                })?;
        }
        Ok(config)
    }

    /// Explicit paths with default settings; nothing is checked until
    /// [`LocalServer::start_with`].
    pub fn new(server: impl Into<PathBuf>, gguf: impl Into<PathBuf>) -> Self {
        Self {
            server: server.into(),
            gguf: gguf.into(),
            ctx_size: 4096,
            threads: 2,
            ready_timeout: Duration::from_secs(120),
            extra_args: Vec::new(),
        }
    }

    /// The model name the server answers to (`--alias`): the GGUF file name without
    /// `.gguf`.
    pub fn alias(&self) -> String {
        self.gguf
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".into())
    }

    /// The `llama-server` arguments for `port`.
    ///
    /// `--jinja` makes the server apply the model's own chat template, which is what
    /// turns `tools` into tool calls; `-np 1` gives the single slot the whole context.
    pub fn args(&self, port: u16) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "-m".into(),
            self.gguf.to_string_lossy().into_owned(),
            "--alias".into(),
            self.alias(),
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--jinja".into(),
            "-c".into(),
            self.ctx_size.to_string(),
            "-np".into(),
            "1".into(),
            "-t".into(),
            self.threads.to_string(),
            "-tb".into(),
            self.threads.to_string(),
            "--no-ui".into(),
        ];
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// `$var` when set (it must exist), else `rel` under the nearest ancestor that has it.
fn locate_file(var: &str, rel: &str, what: &str) -> Result<PathBuf, LlmError> {
    if let Some(path) = env_file(var, what)? {
        return Ok(path);
    }
    let starts = search_starts();
    find_above(&starts, &[rel]).ok_or_else(|| {
        LlmError::Setup(format!(
            "{what} not found: no {rel} above {}; {SETUP_HINT} (or set {var})",
            show(&starts)
        ))
    })
}

/// `$var` when set and not empty: it must name an existing file.
fn env_file(var: &str, what: &str) -> Result<Option<PathBuf>, LlmError> {
    let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let path = PathBuf::from(path);
    if path.is_file() {
        Ok(Some(path))
    } else {
        Err(LlmError::Setup(format!(
            "{var}={} does not exist; {SETUP_HINT}, or point {var} at {what}",
            path.display()
        )))
    }
}

/// The GGUF file `model` names, looked for as `.tools/models/FILE` above `starts`;
/// `env_gguf` (`$DOSSIER_LLM_GGUF`, already checked to exist) replaces
/// [`LocalModel::Auto`]'s choice and is ignored for an explicit size.
fn resolve_gguf(
    model: LocalModel,
    env_gguf: Option<PathBuf>,
    starts: &[PathBuf],
) -> Result<PathBuf, LlmError> {
    let rel = |name: &str| format!(".tools/models/{name}");
    let found = match model.file_name() {
        Some(name) => find_above(starts, &[&rel(name)]),
        // The nearest checkout with either model decides, then the 1.5B within it.
        None => env_gguf
            .or_else(|| find_above(starts, &[&rel(GGUF_1_5B_NAME), &rel(DEFAULT_GGUF_NAME)])),
    };
    found.ok_or_else(|| {
        let wanted = match model.file_name() {
            Some(name) => rel(name),
            None => format!("{} or {}", rel(GGUF_1_5B_NAME), rel(DEFAULT_GGUF_NAME)),
        };
        LlmError::Setup(format!(
            "the GGUF model for --llm {model} not found: no {wanted} above {}; {} (or set DOSSIER_LLM_GGUF and use --llm local)",
            show(starts),
            model.setup_hint()
        ))
    })
}

/// The first file among `rels` (in that order) under the nearest of `starts`'
/// ancestors that has one.
fn find_above(starts: &[PathBuf], rels: &[&str]) -> Option<PathBuf> {
    starts
        .iter()
        .flat_map(|start| start.ancestors())
        .flat_map(|dir| rels.iter().map(move |rel| dir.join(rel)))
        .find(|p| p.is_file())
}

fn show(starts: &[PathBuf]) -> String {
    let shown: Vec<String> = starts.iter().map(|s| s.display().to_string()).collect();
    shown.join(" or ")
}

/// Directories whose ancestors may hold `.tools/`: the running executable's (so
/// `target/debug/dossier` finds `<repo>/.tools`) and this crate's source directory at
/// build time (so tests find it whatever their working directory). Never the current
/// directory: a `.tools/` planted above wherever the user happens to stand must not
/// choose the program that runs (the same rule as the e5 engine's).
fn search_starts() -> Vec<PathBuf> {
    let mut starts = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    starts
}

/// Fails unless `path` starts with the GGUF magic.
fn check_gguf(path: &Path) -> Result<(), LlmError> {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| {
            LlmError::Setup(format!("cannot read {}: {e}; {SETUP_HINT}", path.display()))
        })?;
    if &magic != b"GGUF" {
        return Err(LlmError::Setup(format!(
            "{} is not a GGUF file; {SETUP_HINT}",
            path.display()
        )));
    }
    Ok(())
}

/// The last lines a child process wrote, kept by reader threads.
#[derive(Clone, Default)]
struct LogTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// Pipes still being read.
    open: Arc<AtomicUsize>,
}

impl LogTail {
    /// Drains `pipe` on a thread (so the child never blocks on a full pipe).
    fn follow(&self, pipe: impl Read + Send + 'static) {
        let lines = self.lines.clone();
        let open = self.open.clone();
        open.fetch_add(1, Ordering::SeqCst);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut lines = lines.lock().unwrap_or_else(|p| p.into_inner());
                if lines.len() == LOG_LINES {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// Waits (at most `limit`) until every pipe reached its end, i.e. all the output of
    /// an exited child has been collected.
    fn drain(&self, limit: Duration) {
        let started = Instant::now();
        while self.open.load(Ordering::SeqCst) > 0 && started.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn tail(&self, n: usize) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let skip = lines.len().saturating_sub(n);
        lines
            .iter()
            .skip(skip)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A running `llama-server` on a free localhost port, killed on drop.
///
/// ```no_run
/// use std::time::Duration;
/// use dossier_llm::{ChatModel, ChatRequest, LocalServer, Message};
///
/// let server = LocalServer::start()?; // .tools/ as installed by scripts/setup-llm
/// let model = server.chat_model(Duration::from_secs(120))?;
/// let answer = model.chat(&ChatRequest::new(vec![Message::user("2+2?")]))?;
/// # Ok::<(), dossier_llm::LlmError>(())
/// ```
pub struct LocalServer {
    child: Child,
    base_url: String,
    config: LocalServerConfig,
    log: LogTail,
}

impl std::fmt::Debug for LocalServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalServer")
            .field("pid", &self.child.id())
            .field("base_url", &self.base_url)
            .field("config", &self.config)
            .finish()
    }
}

/// Why one start attempt failed, and whether another port may help.
struct Attempt {
    error: LlmError,
    port_clash: bool,
}

impl LocalServer {
    /// Starts the installed server with the default model ([`LocalServerConfig::locate`]:
    /// the 0.5B, or `$DOSSIER_LLM_GGUF`) and waits until it is ready.
    pub fn start() -> Result<Self, LlmError> {
        Self::start_with(LocalServerConfig::locate()?)
    }

    /// Starts the installed server with `model` ([`LocalServerConfig::locate_model`]):
    /// what `--llm local`, `--llm local:0.5b` and `--llm local:1.5b` run.
    pub fn start_model(model: LocalModel) -> Result<Self, LlmError> {
        Self::start_with(LocalServerConfig::locate_model(model)?)
    }

    /// Starts `llama-server` as configured and waits until `/health` says it is ready
    /// (at most `config.ready_timeout`). A failure is [`LlmError::Setup`] when a file is
    /// missing and [`LlmError::Startup`], with the tail of the server's log, when the
    /// server exits or stays unready.
    pub fn start_with(config: LocalServerConfig) -> Result<Self, LlmError> {
        for path in [&config.server, &config.gguf] {
            if !path.is_file() {
                return Err(LlmError::Setup(format!(
                    "{} does not exist; {SETUP_HINT}",
                    path.display()
                )));
            }
        }
        check_gguf(&config.gguf)?;
        // The free port is found by binding and releasing it, so another process can take
        // it in between: then the server exits saying so, and another port is tried.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match Self::spawn(&config) {
                Ok(server) => return Ok(server),
                Err(a) if a.port_clash && attempts < 3 => continue,
                Err(a) => return Err(a.error),
            }
        }
    }

    fn spawn(config: &LocalServerConfig) -> Result<Self, Attempt> {
        let fail = |error| Attempt {
            error,
            port_clash: false,
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| fail(LlmError::Startup(format!("no free localhost port: {e}"))))?
            .port();
        let mut child = Command::new(&config.server)
            .args(config.args(port))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                fail(LlmError::Setup(format!(
                    "cannot run {}: {e}; {SETUP_HINT}",
                    config.server.display()
                )))
            })?;
        let log = LogTail::default();
        if let Some(out) = child.stdout.take() {
            log.follow(out);
        }
        if let Some(err) = child.stderr.take() {
            log.follow(err);
        }
        // From here on, dropping `server` kills the child.
        let mut server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}"),
            config: config.clone(),
            log,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), Attempt> {
        let started = Instant::now();
        let health = format!("{}/health", self.base_url);
        let client = crate::openai::http_agent(Duration::from_secs(5));
        let mut last = String::from("no answer yet");
        loop {
            if let Ok(resp) = client.get(&health).call() {
                if resp.status().is_success() {
                    return Ok(());
                }
                last = format!("HTTP {}", resp.status().as_u16());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.log.drain(Duration::from_secs(2));
                let tail = self.log.tail(TAIL_LINES);
                let lower = tail.to_ascii_lowercase();
                return Err(Attempt {
                    port_clash: lower.contains("bind") || lower.contains("address already in use"),
                    error: LlmError::Startup(format!(
                        "llama-server ({}) exited with {status} before it was ready; its last output:\n{tail}",
                        self.config.server.display()
                    )),
                });
            }
            if started.elapsed() > self.config.ready_timeout {
                return Err(Attempt {
                    port_clash: false,
                    error: LlmError::Startup(format!(
                        "llama-server at {} not ready after {:?} (last /health: {last}); its last output:\n{}",
                        self.base_url,
                        self.config.ready_timeout,
                        self.log.tail(TAIL_LINES)
                    )),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Root URL of the server (`http://127.0.0.1:PORT`), for [`OpenAiChat::new`].
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &LocalServerConfig {
        &self.config
    }

    /// Process id of the server.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An [`OpenAiChat`] for this server, giving up on a request after `timeout`.
    pub fn chat_model(&self, timeout: Duration) -> Result<OpenAiChat, LlmError> {
        OpenAiChat::new(&self.base_url, &self.config.alias(), timeout)
    }

    /// The last `lines` lines the server printed (for diagnosing a bad answer).
    pub fn log_tail(&self, lines: usize) -> String {
        self.log.tail(lines)
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A scratch directory unique to this test process and `name`.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dossier-llm-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn fake_gguf(dir: &Path) -> PathBuf {
        let path = dir.join("tiny-model.gguf");
        std::fs::write(&path, b"GGUF\x03\x00\x00\x00").unwrap();
        path
    }

    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("fake-llama-server");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn args_enable_jinja_small_context_and_two_threads() {
        let cfg = LocalServerConfig::new("/x/llama-server", "/m/qwen-q4.gguf");
        let args = cfg.args(8123).join(" ");
        assert_eq!(
            args,
            "-m /m/qwen-q4.gguf --alias qwen-q4 --host 127.0.0.1 --port 8123 --jinja -c 4096 -np 1 -t 2 -tb 2 --no-ui"
        );
        assert_eq!(cfg.alias(), "qwen-q4");
    }

    #[test]
    fn llm_specs_parse() {
        let ok = |s: &str| LlmSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(ok("none"), LlmSpec::None);
        assert_eq!(ok("local"), LlmSpec::Local(LocalModel::Auto));
        assert_eq!(ok("local:0.5b"), LlmSpec::Local(LocalModel::Qwen0_5B));
        assert_eq!(ok("local:1.5b"), LlmSpec::Local(LocalModel::Qwen1_5B));
        assert_eq!(ok("local:1.5B"), LlmSpec::Local(LocalModel::Qwen1_5B));
        assert_eq!(
            ok("http://127.0.0.1:8080/v1"),
            LlmSpec::Url("http://127.0.0.1:8080/v1".into())
        );
        assert_eq!(
            "https://api.example.com/v1".parse::<LlmSpec>().unwrap(),
            LlmSpec::Url("https://api.example.com/v1".into())
        );
        for bad in [
            "",
            "Local",
            "local:",
            "local:7b",
            "local:1.5",
            "local-1.5b",
            "ftp://x",
            "0.5b",
        ] {
            let e = LlmSpec::parse(bad).unwrap_err();
            assert!(matches!(e, LlmError::Setup(_)), "{bad}: {e:?}");
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("{bad:?}")) && msg.contains("local:0.5b, local:1.5b"),
                "{bad}: {msg}"
            );
        }
        // Display gives back the value that parses to it.
        for m in [LocalModel::Auto, LocalModel::Qwen0_5B, LocalModel::Qwen1_5B] {
            assert_eq!(ok(&m.to_string()), LlmSpec::Local(m));
        }
    }

    /// A fake checkout: `<root>/.tools/models/` with the named GGUF files, and the
    /// directory a binary would be found from (`<root>/target/debug`).
    fn checkout(name: &str, models: &[&str]) -> (PathBuf, PathBuf) {
        let root = scratch(name);
        std::fs::create_dir_all(root.join(".tools/models")).unwrap();
        for m in models {
            std::fs::write(root.join(".tools/models").join(m), b"GGUF\x03\x00\x00\x00").unwrap();
        }
        let start = root.join("target/debug");
        std::fs::create_dir_all(&start).unwrap();
        (root, start)
    }

    #[test]
    fn local_prefers_the_1_5b_when_installed() {
        let (root, start) = checkout("both", &[DEFAULT_GGUF_NAME, GGUF_1_5B_NAME]);
        let starts = [start];
        let models = root.join(".tools/models");
        let pick = |m| resolve_gguf(m, None, &starts).unwrap();
        assert_eq!(pick(LocalModel::Auto), models.join(GGUF_1_5B_NAME));
        assert_eq!(pick(LocalModel::Qwen1_5B), models.join(GGUF_1_5B_NAME));
        assert_eq!(pick(LocalModel::Qwen0_5B), models.join(DEFAULT_GGUF_NAME));

        // $DOSSIER_LLM_GGUF replaces only the choice `local` makes.
        let own = fake_gguf(&root);
        let pick = |m| resolve_gguf(m, Some(own.clone()), &starts).unwrap();
        assert_eq!(pick(LocalModel::Auto), own);
        assert_eq!(pick(LocalModel::Qwen0_5B), models.join(DEFAULT_GGUF_NAME));
        assert_eq!(pick(LocalModel::Qwen1_5B), models.join(GGUF_1_5B_NAME));
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn local_falls_back_to_the_0_5b_and_1_5b_says_how_to_install_it() {
        let (root, start) = checkout("small", &[DEFAULT_GGUF_NAME]);
        let starts = [start];
        let small = root.join(".tools/models").join(DEFAULT_GGUF_NAME);
        assert_eq!(
            resolve_gguf(LocalModel::Auto, None, &starts).unwrap(),
            small
        );
        assert_eq!(
            resolve_gguf(LocalModel::Qwen0_5B, None, &starts).unwrap(),
            small
        );

        let e = resolve_gguf(LocalModel::Qwen1_5B, Some(small.clone()), &starts).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LlmError::Setup(_)), "{e:?}");
        assert!(msg.contains("scripts/setup-llm --with-1.5b"), "{msg}");
        assert!(
            msg.contains("--llm local:1.5b") && msg.contains(GGUF_1_5B_NAME),
            "{msg}"
        );
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn no_model_installed_says_to_run_setup() {
        let (root, start) = checkout("none", &[]);
        let starts = [start.clone()];
        for m in [LocalModel::Auto, LocalModel::Qwen0_5B] {
            let msg = resolve_gguf(m, None, &starts).unwrap_err().to_string();
            assert!(msg.contains("run scripts/setup-llm ("), "{m}: {msg}");
            assert!(msg.contains(&start.display().to_string()), "{m}: {msg}");
        }
        let msg = resolve_gguf(LocalModel::Auto, None, &starts)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains(GGUF_1_5B_NAME) && msg.contains(DEFAULT_GGUF_NAME),
            "{msg}"
        );

        // Only the 1.5B: `local` runs it, `local:0.5b` does not fall back to it.
        let (root2, start2) = checkout("large", &[GGUF_1_5B_NAME]);
        let starts = [start2];
        let large = root2.join(".tools/models").join(GGUF_1_5B_NAME);
        assert_eq!(
            resolve_gguf(LocalModel::Auto, None, &starts).unwrap(),
            large
        );
        assert!(resolve_gguf(LocalModel::Qwen0_5B, None, &starts).is_err());
        let _ = std::fs::remove_dir_all(root);
        let _ = std::fs::remove_dir_all(root2);
    }

    #[test]
    fn the_nearest_checkout_decides() {
        // <outer>/.tools has both models, <outer>/inner/.tools only the 0.5B: from
        // inside `inner`, `local` is inner's 0.5B, and only `local:1.5b` looks further up.
        let (outer, _) = checkout("nested", &[GGUF_1_5B_NAME, DEFAULT_GGUF_NAME]);
        let inner = outer.join("inner");
        std::fs::create_dir_all(inner.join(".tools/models")).unwrap();
        std::fs::write(inner.join(".tools/models").join(DEFAULT_GGUF_NAME), b"GGUF").unwrap();
        let starts = [inner.join("target/debug")];
        let pick = |m| resolve_gguf(m, None, &starts).unwrap();
        assert_eq!(
            pick(LocalModel::Auto),
            inner.join(".tools/models").join(DEFAULT_GGUF_NAME)
        );
        assert_eq!(
            pick(LocalModel::Qwen1_5B),
            outer.join(".tools/models").join(GGUF_1_5B_NAME)
        );
        let _ = std::fs::remove_dir_all(outer);
    }

    #[test]
    fn missing_files_say_to_run_setup() {
        let dir = scratch("missing");
        let e = LocalServer::start_with(LocalServerConfig::new(dir.join("nope"), fake_gguf(&dir)))
            .unwrap_err();
        assert!(matches!(e, LlmError::Setup(_)), "{e:?}");
        assert!(e.to_string().contains("scripts/setup-llm"), "{e}");

        let not_gguf = dir.join("model.gguf");
        std::fs::write(&not_gguf, b"<html>").unwrap();
        let server = script(&dir, "exit 0");
        let e = LocalServer::start_with(LocalServerConfig::new(server, not_gguf)).unwrap_err();
        assert!(e.to_string().contains("not a GGUF file"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_server_that_dies_reports_its_output() {
        let dir = scratch("dies");
        let server = script(
            &dir,
            "echo 'loading model' >&2\necho 'error: unknown argument' >&2\nexit 3",
        );
        let e =
            LocalServer::start_with(LocalServerConfig::new(server, fake_gguf(&dir))).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LlmError::Startup(_)), "{e:?}");
        assert!(msg.contains("exit status: 3"), "{msg}");
        assert!(msg.contains("error: unknown argument"), "{msg}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_server_that_never_gets_ready_times_out() {
        let dir = scratch("hangs");
        let server = script(&dir, "echo 'warming up' >&2\nexec sleep 30");
        let mut cfg = LocalServerConfig::new(server, fake_gguf(&dir));
        cfg.ready_timeout = Duration::from_millis(500);
        let started = Instant::now();
        let e = LocalServer::start_with(cfg).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("not ready after") && msg.contains("warming up"),
            "{msg}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the child was not killed"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
