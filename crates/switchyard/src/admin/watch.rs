//! Reload on file change: the config file's folder is watched (editors
//! replace a file by renaming a new one over it, so watching the file's
//! inode alone would go deaf after the first save), events for the file are
//! debounced, and each burst is one `reload::on_change` — validated whole,
//! swapped atomically, the old config kept on error — beside SIGHUP and
//! `POST /admin/reload`. (A config in etcd is followed by
//! `admin::etcd_source` instead.)

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use notify_debouncer_mini::notify::RecursiveMode;
use notify_debouncer_mini::{new_debouncer, DebounceEventResult};
use tokio_util::sync::CancellationToken;

use crate::app::App;

/// Writes closer together than this are one change (an editor's
/// truncate-then-write, or save-to-temp-then-rename).
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// Watch the config file `path` of `app`; `None` when its folder cannot be
/// watched (said in the log: SIGHUP and the admin API still reload).
pub fn watch(
    app: App,
    path: Arc<Path>,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    let name = path.file_name()?.to_owned();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let handler = move |res: DebounceEventResult| {
        if let Ok(events) = res {
            if events.iter().any(|e| e.path.file_name() == Some(&name)) {
                let _ = tx.send(());
            }
        }
    };
    let mut debouncer = match new_debouncer(DEBOUNCE, handler) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!("config file changes will not be noticed ({e}); SIGHUP and POST /admin/reload still reload");
            return None;
        }
    };
    if let Err(e) = debouncer.watcher().watch(&dir, RecursiveMode::NonRecursive) {
        tracing::warn!(dir = %dir.display(), "config file changes will not be noticed ({e}); SIGHUP and POST /admin/reload still reload");
        return None;
    }
    tracing::info!(config = %path.display(), "watching the config file: it reloads when it changes");
    Some(tokio::spawn(async move {
        // The watcher lives as long as this task.
        let _debouncer = debouncer;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                got = rx.recv() => {
                    if got.is_none() {
                        return;
                    }
                    while rx.try_recv().is_ok() {}
                    // Problems are logged and counted by the reload itself.
                    super::reload::on_change(&app).await;
                }
            }
        }
    }))
}
