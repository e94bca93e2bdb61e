//! `files.db`: the paths the last walk of the roots found (see [`super`]).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use rusqlite::params;

use super::{
    DEFAULT_FIND_RESULTS, FilePage, FileQuery, FilesReport, FoundFile, MAX_FIND_RESULTS,
    MAX_INDEXED_FILES, MAX_PATTERN_CHARS, MAX_WALK_DEPTH,
};
use crate::{
    Limits,
    error::{ErrorKind, StewardError},
    store::{
        Database, Migration, OpenOptions, Schema, StoreError,
        snapshot::{self, Snapshot},
    },
};

const SCHEMA: Schema = Schema {
    name: "files",
    migrations: &[Migration {
        version: 1,
        name: "files",
        sql: include_str!("../../migrations/files/001_files.sql"),
    }],
};

/// Why a walk or a question failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileStoreError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A question that cannot be asked (a bound, a pattern, a cursor, a root).
    #[error("{0}")]
    BadQuery(String),
    /// No root is configured.
    #[error("no folder is shared with Steward: set [files] roots in config.toml")]
    NoRoots,
}

impl StewardError for FileStoreError {
    fn code(&self) -> &'static str {
        match self {
            Self::Store(e) => e.code(),
            Self::BadQuery(_) => "FILES_BAD_QUERY",
            Self::NoRoots => "FILES_NO_ROOTS",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(e) => e.kind(),
            Self::BadQuery(_) => ErrorKind::InvalidInput,
            Self::NoRoots => ErrorKind::NotFound,
        }
    }
}

/// One listed file, as kept in memory.
#[derive(Debug, Clone)]
struct Row {
    path: PathBuf,
    root: PathBuf,
    /// The path below its root, `/`-separated.
    rel: String,
    folded: String,
    ext: String,
    size: u64,
    mtime: i64,
}

/// The store.
#[derive(Debug)]
pub struct FileStore {
    db: Database,
    /// Every listed file, newest first.
    rows: Snapshot<Vec<Row>>,
    /// Whether a question was asked already: the first is answered by SQLite alone (what a
    /// one-shot command pays), later ones from the copy in memory.
    asked: std::sync::atomic::AtomicBool,
}

/// One file a walk found.
struct Found {
    path: PathBuf,
    name: String,
    ext: String,
    size: u64,
    mtime: i64,
}

/// Lists the regular files under `root` (links not followed, secrets and the home skipped),
/// at most `budget` more; `Err` when the root itself cannot be listed, else whether every
/// folder below it was listed whole.
fn walk(
    root: &Path,
    home: Option<&Path>,
    budget: &mut usize,
    out: &mut Vec<Found>,
) -> std::io::Result<bool> {
    let mut whole = true;
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut first = true;
    while let Some((dir, depth)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if first => return Err(e),
            Err(_) => {
                whole = false;
                continue;
            }
        };
        first = false;
        for entry in entries {
            let Ok(entry) = entry else {
                whole = false;
                continue;
            };
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                whole = false;
                continue;
            };
            let below = path.strip_prefix(root).unwrap_or(&path);
            if kind.is_symlink()
                || home.is_some_and(|h| crate::paths::in_private_home(&path, h))
                || crate::paths::is_secret(below)
            {
                continue;
            }
            if kind.is_dir() {
                if depth < MAX_WALK_DEPTH {
                    stack.push((path, depth + 1));
                } else {
                    whole = false;
                }
            } else if kind.is_file() {
                if *budget == 0 {
                    return Ok(false);
                }
                let Ok(meta) = entry.metadata() else {
                    whole = false;
                    continue;
                };
                let name = entry.file_name().to_string_lossy().into_owned();
                let ext = Path::new(&name)
                    .extension()
                    .map(|e| e.to_string_lossy().to_lowercase())
                    .unwrap_or_default();
                let mtime = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                out.push(Found { path, name, ext, size: meta.len(), mtime });
                *budget -= 1;
            }
        }
    }
    Ok(whole)
}

/// A glob as a regex over the path below the root (or the name, without `/`).
fn glob_regex(glob: &str) -> Result<regex::Regex, FileStoreError> {
    let mut re = String::from("(?i)^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                // `**/` also matches no folder at all.
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    regex::RegexBuilder::new(&re)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| FileStoreError::BadQuery(format!("glob {glob:?}: {e}")))
}

impl FileStore {
    /// Opens (creating if needed) `<home>/files.db`.
    pub fn open(home: &Path, limits: &Limits) -> Result<Self, FileStoreError> {
        let path = home.join("files.db");
        let db = Database::open(&path, &SCHEMA, OpenOptions::small_writes(limits))?;
        crate::store::restrict_file(&path);
        Ok(Self { db, rows: Snapshot::default(), asked: std::sync::atomic::AtomicBool::new(false) })
    }

    /// Walks every root and brings the list up to date: new, changed and gone files counted;
    /// a root that cannot be listed, or a walk stopped at a bound, removes nothing; the files
    /// of roots no longer configured go.
    pub fn index(&self, roots: &[PathBuf], home: &Path) -> Result<FilesReport, FileStoreError> {
        if roots.is_empty() {
            return Err(FileStoreError::NoRoots);
        }
        let home = home.canonicalize().ok();
        let mut report = FilesReport::default();
        let mut budget = MAX_INDEXED_FILES;
        let mut walked: Vec<(PathBuf, Vec<Found>, bool)> = Vec::new();
        let mut configured = Vec::new();
        for r in roots {
            let Ok(root) = r.canonicalize() else {
                report.unreadable.push(format!("{}: not found", r.display()));
                continue;
            };
            configured.push(root.to_string_lossy().into_owned());
            let mut found = Vec::new();
            match walk(&root, home.as_deref(), &mut budget, &mut found) {
                Ok(whole) => {
                    report.truncated |= budget == 0;
                    walked.push((root, found, whole && budget > 0));
                }
                Err(e) => report.unreadable.push(format!("{}: {e}", root.display())),
            }
        }
        let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
        let (added, changed, removed, files) = self.db.write(|tx| {
            let run: i64 = tx
                .query_row("SELECT coalesce(max(seen), 0) + 1 FROM files", [], |r| r.get(0))
                .map_err(q("walk number"))?;
            let (mut added, mut changed, mut removed) = (0, 0, 0);
            for (root, found, whole) in &walked {
                let root_s = root.to_string_lossy().into_owned();
                let known: HashMap<String, (i64, i64)> = {
                    let mut stmt = tx
                        .prepare("SELECT path, size, mtime FROM files WHERE root = ?1")
                        .map_err(q("prepare known files"))?;
                    let rows = stmt
                        .query_map([&root_s], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
                        .map_err(q("known files"))?;
                    rows.collect::<Result<_, _>>().map_err(q("known file"))?
                };
                let mut up = tx
                    .prepare_cached(
                        "INSERT INTO files (path, root, name, folded, ext, size, mtime, seen)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                         ON CONFLICT (path) DO UPDATE SET root = excluded.root,
                           size = excluded.size, mtime = excluded.mtime, seen = excluded.seen",
                    )
                    .map_err(q("prepare file"))?;
                for f in found {
                    let path = f.path.to_string_lossy().into_owned();
                    let size = i64::try_from(f.size).unwrap_or(i64::MAX);
                    match known.get(&path) {
                        None => added += 1,
                        Some(&(s, m)) if (s, m) != (size, f.mtime) => changed += 1,
                        Some(_) => {}
                    }
                    up.execute(params![
                        path,
                        root_s,
                        f.name,
                        crate::paths::fold_name(&f.name),
                        f.ext,
                        size,
                        f.mtime,
                        run
                    ])
                    .map_err(q("file"))?;
                }
                if *whole {
                    removed += tx
                        .execute(
                            "DELETE FROM files WHERE root = ?1 AND seen <> ?2",
                            params![root_s, run],
                        )
                        .map_err(q("gone files"))?;
                }
            }
            // Roots no longer configured (not those configured but unreadable now).
            let mut stale = Vec::new();
            {
                let mut stmt =
                    tx.prepare("SELECT DISTINCT root FROM files").map_err(q("prepare roots"))?;
                let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(q("roots"))?;
                for r in rows {
                    let r = r.map_err(q("root"))?;
                    let gone = !configured.contains(&r)
                        && !roots.iter().any(|c| c.to_string_lossy() == r.as_str());
                    if gone {
                        stale.push(r);
                    }
                }
            }
            for r in stale {
                removed +=
                    tx.execute("DELETE FROM files WHERE root = ?1", [r]).map_err(q("old root"))?;
            }
            if added + changed + removed > 0 {
                snapshot::bump(tx)?;
            }
            let files: i64 =
                tx.query_row("SELECT count(*) FROM files", [], |r| r.get(0)).map_err(q("count"))?;
            Ok::<_, StoreError>((added, changed, removed, usize::try_from(files).unwrap_or(0)))
        })?;
        report.roots = walked.iter().filter(|(_, _, whole)| *whole).count();
        report.added = added;
        report.changed = changed;
        report.removed = removed;
        report.files = files;
        Ok(report)
    }

    fn rows(&self) -> Result<std::sync::Arc<Vec<Row>>, FileStoreError> {
        let rows = self.rows.get(&self.db, |c| {
            let mut stmt = c
                .prepare(
                    "SELECT path, root, folded, ext, size, mtime FROM files
                     ORDER BY mtime DESC, path",
                )
                .map_err(|e| StoreError::query("prepare files", e))?;
            let rows = stmt
                .query_map([], |r| {
                    let path: String = r.get(0)?;
                    let root: String = r.get(1)?;
                    let rel = Path::new(&path)
                        .strip_prefix(&root)
                        .map_or_else(|_| path.clone(), |p| p.to_string_lossy().replace('\\', "/"));
                    Ok(Row {
                        path: PathBuf::from(path),
                        root: PathBuf::from(root),
                        rel,
                        folded: r.get(2)?,
                        ext: r.get(3)?,
                        size: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
                        mtime: r.get(5)?,
                    })
                })
                .map_err(|e| StoreError::query("files", e))?;
            let all = rows
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::query("file row", e))?;
            Ok::<_, FileStoreError>(Some(all))
        })?;
        Ok(rows.unwrap_or_default())
    }

    /// The listed files whose extension is one of `exts` (lowercase), newest first, at most
    /// `max`.
    pub fn with_extensions(
        &self,
        exts: &[&str],
        max: usize,
    ) -> Result<Vec<PathBuf>, FileStoreError> {
        Ok(self
            .rows()?
            .iter()
            .filter(|r| exts.contains(&r.ext.as_str()))
            .take(max)
            .map(|r| r.path.clone())
            .collect())
    }

    /// [`Self::find`] answered by SQLite: every condition but a glob, newest first.
    fn find_sql(
        &self,
        q: &FileQuery,
        words: &[String],
        ext: Option<&str>,
        root: Option<&Path>,
        offset: usize,
        limit: usize,
    ) -> Result<FilePage, FileStoreError> {
        use rusqlite::types::Value;
        let mut cond = vec!["1 = 1".to_owned()];
        let mut args: Vec<Value> = Vec::new();
        for w in words {
            args.push(Value::Text(w.clone()));
            cond.push(format!("instr(folded, ?{}) > 0", args.len()));
        }
        if let Some(e) = ext {
            args.push(Value::Text(e.to_owned()));
            cond.push(format!("ext = ?{}", args.len()));
        }
        if let Some(r) = root {
            args.push(Value::Text(r.to_string_lossy().into_owned()));
            cond.push(format!("root = ?{}", args.len()));
        }
        for (v, op) in [(q.modified_after, "mtime >="), (q.modified_before, "mtime <")] {
            if let Some(v) = v {
                args.push(Value::Integer(v));
                cond.push(format!("{op} ?{}", args.len()));
            }
        }
        for (v, op) in [(q.min_size, "size >="), (q.max_size, "size <=")] {
            if let Some(v) = v {
                args.push(Value::Integer(crate::store::int(v)));
                cond.push(format!("{op} ?{}", args.len()));
            }
        }
        let filter = cond.join(" AND ");
        let qe = |ctx: &'static str| move |e| StoreError::query(ctx, e);
        let (files, total) = self.db.read(|c| {
            let total: i64 = c
                .query_row(
                    &format!("SELECT count(*) FROM files WHERE {filter}"),
                    rusqlite::params_from_iter(args.iter()),
                    |r| r.get(0),
                )
                .map_err(qe("count files"))?;
            let mut page_args = args.clone();
            page_args.push(Value::Integer(crate::store::int(limit)));
            page_args.push(Value::Integer(crate::store::int(offset)));
            let n = args.len();
            let mut stmt = c
                .prepare(&format!(
                    "SELECT path, root, size, mtime FROM files WHERE {filter}
                     ORDER BY mtime DESC, path LIMIT ?{} OFFSET ?{}",
                    n + 1,
                    n + 2
                ))
                .map_err(qe("prepare find"))?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(page_args.iter()), |r| {
                    Ok(FoundFile {
                        path: PathBuf::from(r.get::<_, String>(0)?),
                        root: PathBuf::from(r.get::<_, String>(1)?),
                        size: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                        modified: r.get(3)?,
                    })
                })
                .map_err(qe("find"))?;
            let files = rows.collect::<Result<Vec<_>, _>>().map_err(qe("found file"))?;
            Ok::<_, FileStoreError>((files, usize::try_from(total).unwrap_or(0)))
        })?;
        let next = offset + files.len();
        Ok(FilePage { files, total, next_cursor: (next < total).then(|| next.to_string()) })
    }

    /// The files matching `q`, newest first, one page at a time.
    pub fn find(&self, q: &FileQuery) -> Result<FilePage, FileStoreError> {
        let bad = |m: String| FileStoreError::BadQuery(m);
        let limit = q.limit.unwrap_or(DEFAULT_FIND_RESULTS);
        if limit == 0 || limit > MAX_FIND_RESULTS {
            return Err(bad(format!("limit {limit}: 1 to {MAX_FIND_RESULTS}")));
        }
        let offset: usize = match q.cursor.as_deref() {
            None => 0,
            Some(c) => c.parse().map_err(|_| bad(format!("cursor {c:?} is not one of ours")))?,
        };
        for p in [&q.name, &q.glob].into_iter().flatten() {
            if p.chars().count() > MAX_PATTERN_CHARS {
                return Err(bad(format!("a pattern of at most {MAX_PATTERN_CHARS} characters")));
            }
        }
        let words: Vec<String> = q
            .name
            .as_deref()
            .map(|n| crate::paths::fold_name(n).split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let glob = q.glob.as_deref().map(|g| (glob_regex(g.trim()), g.contains('/')));
        let glob = match glob {
            Some((Ok(re), deep)) => Some((re, deep)),
            Some((Err(e), _)) => return Err(e),
            None => None,
        };
        let ext = q.extension.as_deref().map(|e| e.trim().trim_start_matches('.').to_lowercase());
        let root = match &q.root {
            Some(r) => Some(r.canonicalize().map_err(|_| {
                bad(format!("root {}: not one of the shared folders", r.display()))
            })?),
            None => None,
        };
        // The first question without a glob: SQLite answers it alone (the same conditions and
        // order as the copy in memory), so a one-shot command does not load every row.
        if glob.is_none() && !self.asked.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return self.find_sql(q, &words, ext.as_deref(), root.as_deref(), offset, limit);
        }
        let rows = self.rows()?;
        let mut total = 0;
        let mut files = Vec::new();
        for r in rows.iter() {
            let name = r.rel.rsplit('/').next().unwrap_or(&r.rel);
            let ok = words.iter().all(|w| r.folded.contains(w.as_str()))
                && glob
                    .as_ref()
                    .is_none_or(|(re, deep)| re.is_match(if *deep { &r.rel } else { name }))
                && ext.as_ref().is_none_or(|e| r.ext == *e)
                && q.modified_after.is_none_or(|t| r.mtime >= t)
                && q.modified_before.is_none_or(|t| r.mtime < t)
                && q.min_size.is_none_or(|s| r.size >= s)
                && q.max_size.is_none_or(|s| r.size <= s)
                && root.as_ref().is_none_or(|x| r.root == *x);
            if !ok {
                continue;
            }
            if total >= offset && files.len() < limit {
                files.push(FoundFile {
                    path: r.path.clone(),
                    root: r.root.clone(),
                    size: r.size,
                    modified: r.mtime,
                });
            }
            total += 1;
        }
        let next = offset + files.len();
        Ok(FilePage { files, total, next_cursor: (next < total).then(|| next.to_string()) })
    }
}
