//! What a directory walk follows (issue 39): a FIFO was skipped without a problem, and
//! a symlink to `/etc/passwd` inside an ingested directory was followed and ingested.

use std::path::PathBuf;

use dossier_ingest::discover;

#[test]
fn a_fifo_inside_an_ingested_directory_is_a_problem_not_a_silent_skip() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("notes.md");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    std::fs::write(dir.path().join("ok.md"), "# ok\n\nfine\n").unwrap();
    let (files, problems) = discover(&[dir.path().to_path_buf()]);
    assert_eq!(files, [dir.path().join("ok.md")]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].to_string().contains("not a regular file"),
        "{problems:?}"
    );
}

#[test]
fn a_symlink_that_leaves_the_ingested_tree_is_refused_unless_named() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.md");
    std::fs::write(&secret, "# secret\n\nroot:x:0:0\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/inside.md"), "# inside\n\ntext\n").unwrap();
    std::os::unix::fs::symlink(&secret, dir.path().join("passwd.md")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("etc.txt")).unwrap();
    // A link that stays inside the tree is followed.
    std::os::unix::fs::symlink(
        dir.path().join("sub/inside.md"),
        dir.path().join("alias.md"),
    )
    .unwrap();
    let (files, problems) = discover(&[dir.path().to_path_buf()]);
    let names: Vec<PathBuf> = files
        .iter()
        .map(|f| f.strip_prefix(dir.path()).unwrap().to_path_buf())
        .collect();
    assert_eq!(
        names,
        [PathBuf::from("alias.md"), PathBuf::from("sub/inside.md")]
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems
        .iter()
        .all(|p| p.to_string().contains("leads out of the directory")));
    // Named explicitly, the link is followed: the caller asked for it.
    let (files, problems) = discover(&[dir.path().join("passwd.md")]);
    assert_eq!(files.len(), 1);
    assert!(problems.is_empty());
}
