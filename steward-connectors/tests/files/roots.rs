//! `[files] roots` in `config.toml`: read and checked, handed to the handle, and every path
//! asked for guarded against them.

use steward_core::StewardError as _;

#[test]
fn the_configured_roots_bound_every_path_and_bad_ones_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (docs, elsewhere, home) =
        (base.join("Documents"), base.join("elsewhere"), base.join("home"));
    for d in [&docs, &elsewhere, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(docs.join("lease.pdf"), b"%PDF").unwrap();
    std::fs::write(elsewhere.join("other.pdf"), b"%PDF").unwrap();
    std::fs::write(home.join("config.toml"), format!("[files]\nroots = [{docs:?}]\n")).unwrap();
    assert_eq!(steward_connectors::home::file_roots(&home).unwrap(), std::slice::from_ref(&docs));
    let s = steward_connectors::home::open(Some(home.clone())).unwrap();
    assert_eq!(s.file_roots(), std::slice::from_ref(&docs));
    assert_eq!(s.guard_path(std::path::Path::new("lease.pdf")).unwrap(), docs.join("lease.pdf"));
    assert_eq!(
        s.guard_path(&elsewhere.join("other.pdf")).unwrap_err().code(),
        "PATH_OUTSIDE_ROOTS"
    );
    assert_eq!(s.guard_path(&home.join("config.toml")).unwrap_err().code(), "PATH_OUTSIDE_ROOTS");

    // Roots that cannot work are refused when the config is read, each saying why.
    for (roots, why) in [
        ("[\"Documents\"]", "not an absolute path"),
        (&format!("[{:?}]", home.join("inside")), "inside the Steward home"),
    ] {
        std::fs::write(home.join("config.toml"), format!("[files]\nroots = {roots}\n")).unwrap();
        let e = steward_connectors::home::file_roots(&home).unwrap_err();
        assert!(e.to_string().contains(why), "{roots}: {e}");
    }
    std::fs::write(home.join("config.toml"), "[files]\nroot = []\n").unwrap();
    assert!(steward_connectors::home::file_roots(&home).is_err(), "unknown keys are refused");
    // Without roots nothing is reachable.
    std::fs::write(home.join("config.toml"), "").unwrap();
    let bare = steward_connectors::home::open(Some(home)).unwrap();
    assert!(bare.file_roots().is_empty());
    assert_eq!(bare.guard_path(&docs.join("lease.pdf")).unwrap_err().code(), "PATH_OUTSIDE_ROOTS");
}
