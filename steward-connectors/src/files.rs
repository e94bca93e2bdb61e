//! The shared folders watched (`notify`: inotify, FSEvents, ReadDirectoryChangesW): a burst of
//! changes under a root wakes the runner's `files-index` job once it has been quiet for
//! [`QUIET`] (at most [`MAX_DELAY`] after the first change). An optimization only: the job
//! runs on its schedule anyway, and a missed event only delays it. Changes inside the Steward
//! home (which may lie under a root) are ignored, or indexing would wake itself.

use std::{
    path::PathBuf,
    sync::mpsc,
    time::{Duration, Instant},
};

use notify::{RecursiveMode, Watcher as _};
use steward_core::runner::{JobName, Trigger, Waker};

/// Quiet time after the last change before the job is woken.
/// Fixed (not a setting).
pub const QUIET: Duration = Duration::from_secs(3);
/// Longest a burst of changes delays the wake.
/// Fixed (not a setting).
pub const MAX_DELAY: Duration = Duration::from_secs(60);
/// Shortest time between two wakes (a file written without pause wakes the job at most this
/// often).
/// Fixed (not a setting).
pub const MIN_GAP: Duration = Duration::from_secs(120);

/// Watches the roots for `files-index`.
#[derive(Debug, Clone)]
pub struct RootsTrigger {
    /// The roots.
    pub roots: Vec<PathBuf>,
    /// The Steward home (its changes are not the person's).
    pub home: PathBuf,
}

struct Running {
    _watcher: notify::RecommendedWatcher,
    // Dropping the watcher closes the channel; the debounce thread then ends.
}

impl Trigger for RootsTrigger {
    fn name(&self) -> String {
        format!("watch {} shared folder(s)", self.roots.len())
    }

    fn start(&self, wake: Waker) -> Result<Box<dyn Send>, String> {
        let (tx, rx) = mpsc::channel::<()>();
        // The home as written and as resolved: events come in the spelling of the watched root.
        let mut homes = vec![self.home.clone()];
        if let Ok(c) = self.home.canonicalize() {
            homes.push(c);
        }
        let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            let ours = |p: &std::path::Path| {
                homes.iter().any(|h| steward_core::paths::in_private_home(p, h))
            };
            match ev {
                // An event without paths (the queue overflowed: rescan) counts as a change.
                Ok(ev)
                    if !ev.kind.is_access()
                        && (ev.paths.is_empty() || !ev.paths.iter().all(|p| ours(p))) =>
                {
                    let _ = tx.send(());
                }
                Err(_) => {
                    let _ = tx.send(());
                }
                Ok(_) => {}
            }
        })
        .map_err(|e| e.to_string())?;
        let mut watched = 0;
        for r in &self.roots {
            match watcher.watch(r, RecursiveMode::Recursive) {
                Ok(()) => watched += 1,
                Err(e) => {
                    tracing::warn!(root = %r.display(), error = %e, "shared folder not watched")
                }
            }
        }
        if watched == 0 {
            return Err("no shared folder could be watched".to_owned());
        }
        std::thread::Builder::new()
            .name("steward-roots-watch".to_owned())
            .spawn(move || {
                // Each burst: wait for quiet (or the longest delay), then wake once; never two
                // wakes closer than MIN_GAP.
                let mut last_wake: Option<Instant> = None;
                while rx.recv().is_ok() {
                    if let Some(w) = last_wake {
                        let left = MIN_GAP.saturating_sub(w.elapsed());
                        if !left.is_zero() {
                            // Changes meanwhile are folded into the wake after the gap.
                            std::thread::sleep(left);
                            while rx.try_recv().is_ok() {}
                        }
                    }
                    let first = Instant::now();
                    loop {
                        match rx.recv_timeout(QUIET) {
                            Ok(()) if first.elapsed() < MAX_DELAY => {}
                            Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) => break,
                            Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    wake.wake(JobName::FilesIndex);
                    last_wake = Some(Instant::now());
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Box::new(Running { _watcher: watcher }))
    }
}
