//! Records the git commit the binary is built from, for `tafel --version`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=TAFEL_COMMIT");
    let commit = std::env::var("TAFEL_COMMIT")
        .ok()
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    // --no-optional-locks: a plain `git status` refreshes and rewrites the index,
    // which is watched below, so every build would run this script again and relink.
    let dirty =
        git(&["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    println!(
        "cargo:rustc-env=TAFEL_COMMIT={commit}{}",
        if dirty { "-dirty" } else { "" }
    );
    // A new commit moves HEAD or the branch it names; rebuild then. The branch's
    // own file, not `refs/heads`, whose mtime any other branch's commit changes.
    let branch = git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r]));
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        branch,
        git(&["rev-parse", "--git-path", "packed-refs"]),
        git(&["rev-parse", "--git-path", "index"]),
    ]
    .into_iter()
    .flatten()
    // A watched path that is missing (no packed-refs yet) would rerun every build.
    .filter(|p| std::path::Path::new(p).exists())
    {
        println!("cargo:rerun-if-changed={path}");
    }
}
