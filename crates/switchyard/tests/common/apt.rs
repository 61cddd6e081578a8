//! A system program a test needs: found on PATH (or in a known folder), else
//! installed with Debian's apt-get under a lock (one installer at a time,
//! across test processes), else a clear failure — never a skipped test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn find(names: &[&str], dirs: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut places: Vec<PathBuf> = std::env::split_paths(&path).collect();
    places.extend(dirs.iter().map(PathBuf::from));
    names
        .iter()
        .find_map(|n| places.iter().map(|d| d.join(n)).find(|p| p.is_file()))
}

/// The first of `names` on PATH or in `dirs`, installing `package` if none is.
pub fn binary(names: &[&str], dirs: &[&str], package: &str) -> PathBuf {
    if let Some(b) = find(names, dirs) {
        return b;
    }
    let lock_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{package}-install.lock"));
    let lock = std::fs::File::create(&lock_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("cannot lock {}: {e}", lock_path.display()));
    if let Some(b) = find(names, dirs) {
        return b;
    }
    eprintln!("{package} is not installed: installing Debian's {package} with apt-get");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| e.to_string())
            .and_then(|s| s.success().then_some(()).ok_or(s.to_string()))
    };
    let installed = apt(&["update", "-qq"]).and_then(|_| apt(&["install", "-y", "-qq", package]));
    match (installed, find(names, dirs)) {
        (_, Some(b)) => b,
        (Err(e), None) => panic!("{package} is needed and `apt-get install {package}` failed ({e}); install Debian's {package}"),
        (Ok(()), None) => panic!("`apt-get install {package}` succeeded but none of {names:?} was found"),
    }
}
