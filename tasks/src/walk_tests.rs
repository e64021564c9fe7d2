//! The walker's rule, tested once for every caller: links out never followed, loops ended, the
//! bounds named, the order fixed.

use std::os::unix::fs::symlink;

use super::*;
use crate::test_files::task_dir;

/// Records every entry as `rel` (with `@` for a link it may not enter, `/` for a directory
/// entered, `-` after leaving it) and enters everything.
#[derive(Default)]
struct Record(Vec<String>);

impl Visitor for Record {
    type Error = std::convert::Infallible;

    fn visit(&mut self, entry: &Entry) -> Result<Next, Self::Error> {
        let mark = match &entry.kind {
            Kind::Dir => "/",
            Kind::File => "",
            Kind::Special => "!",
            Kind::Link(LinkTo::Dir(_)) => "@/",
            Kind::Link(LinkTo::File(_)) => "@",
            Kind::Link(_) => "@?",
        };
        self.0.push(format!("{}{mark}", entry.rel));
        Ok(Next::Enter)
    }

    fn leave(&mut self, dir: &Entry) -> Result<(), Self::Error> {
        self.0.push(format!("{}-", dir.rel));
        Ok(())
    }
}

fn walk(walk: &TreeWalk) -> Result<Vec<String>, WalkError> {
    let mut record = Record::default();
    walk.walk(&mut record).map_err(|e| match e {
        Stopped::Walk(e) => e,
        Stopped::Visitor(never) => match never {},
    })?;
    Ok(record.0)
}

/// A tree and, beside it, a directory outside it, with a link to a file and one to a directory
/// out of the tree.
fn with_links_out() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = task_dir(&[("tree/a.txt", "a"), ("outside/secret", "s")]);
    let tree = dir.path().join("tree");
    symlink(dir.path().join("outside/secret"), tree.join("file-out")).unwrap();
    symlink("../outside", tree.join("dir-out")).unwrap();
    (dir, tree)
}

#[test]
fn links_out_of_the_root_are_never_followed() {
    let (_dir, tree) = with_links_out();
    for links in [Links::ToFiles, Links::Follow] {
        let err = walk(&TreeWalk::new(&tree, links)).unwrap_err();
        // `dir-out` comes first in name order.
        assert!(
            matches!(&err, WalkError::OutOfRoot { link, .. } if link.ends_with("dir-out")),
            "{links:?}: {err}"
        );
        std::fs::rename(tree.join("dir-out"), tree.join("z-dir-out")).unwrap();
        let err = walk(&TreeWalk::new(&tree, links)).unwrap_err();
        assert!(
            matches!(&err, WalkError::OutOfRoot { link, .. } if link.ends_with("file-out")),
            "{links:?}: {err}"
        );
        std::fs::rename(tree.join("z-dir-out"), tree.join("dir-out")).unwrap();
        // Skipped, they are never seen; kept, they are never resolved or entered.
        let seen = walk(&TreeWalk::new(&tree, links).escapes(Escapes::Skip)).unwrap();
        assert_eq!(seen, ["a.txt"], "{links:?}");
    }
    let kept = walk(&TreeWalk::new(&tree, Links::Keep)).unwrap();
    assert_eq!(kept, ["a.txt", "dir-out@?", "file-out@?"]);
}

#[test]
fn a_start_out_of_the_root_is_refused() {
    let (dir, tree) = with_links_out();
    let start = tree.join("dir-out");
    let walker = TreeWalk::new(&start, Links::Follow).confined_to(&tree);
    assert!(matches!(
        walk(&walker).unwrap_err(),
        WalkError::OutOfRoot { .. }
    ));
    assert!(walk(&walker.escapes(Escapes::Skip)).unwrap().is_empty());
    // Confined to the directory above, the same links lead inside.
    let walker = TreeWalk::new(&tree, Links::ToFiles).confined_to(dir.path());
    assert_eq!(walk(&walker).unwrap(), ["a.txt", "dir-out@/", "file-out@"]);
}

#[test]
fn links_inside_are_followed_only_when_asked() {
    let dir = task_dir(&[("lib/x.sh", "x"), ("tests/test.sh", "t")]);
    symlink("../lib", dir.path().join("tests/lib")).unwrap();
    symlink("../lib/x.sh", dir.path().join("tests/x.sh")).unwrap();
    symlink("nowhere", dir.path().join("tests/dangling")).unwrap();
    let tests = dir.path().join("tests");
    let to_files = TreeWalk::new(&tests, Links::ToFiles).confined_to(dir.path());
    assert_eq!(
        walk(&to_files).unwrap(),
        ["dangling@?", "lib@/", "test.sh", "x.sh@"]
    );
    let follow = TreeWalk::new(&tests, Links::Follow).confined_to(dir.path());
    assert_eq!(
        walk(&follow).unwrap(),
        [
            "dangling@?",
            "lib@/",
            "lib/x.sh",
            "lib-",
            "test.sh",
            "x.sh@"
        ]
    );
}

#[test]
fn a_link_loop_is_ended() {
    let dir = task_dir(&[("a/b/file", "f")]);
    symlink("../..", dir.path().join("a/b/up")).unwrap();
    let follow = TreeWalk::new(dir.path(), Links::Follow);
    let err = walk(&follow).unwrap_err();
    assert!(
        matches!(&err, WalkError::Loop { link, .. } if link.ends_with("a/b/up")),
        "{err}"
    );
    let skipped = walk(&follow.escapes(Escapes::Skip)).unwrap();
    assert_eq!(skipped, ["a/", "a/b/", "a/b/file", "a/b-", "a-"]);
    // Two links leading to each other's directory, neither above the other at first.
    let dir = task_dir(&[("x/f", "f"), ("y/g", "g")]);
    symlink("../y", dir.path().join("x/to-y")).unwrap();
    symlink("../x", dir.path().join("y/to-x")).unwrap();
    let err = walk(&TreeWalk::new(dir.path(), Links::Follow)).unwrap_err();
    assert!(matches!(err, WalkError::Loop { .. }), "{err}");
}

#[test]
fn the_entry_bound_is_a_named_error() {
    let dir = task_dir(&[("a", ""), ("b", ""), ("c/d", "")]);
    let bound = |entries| Limits {
        entries,
        depth: MAX_DEPTH,
    };
    let walker = TreeWalk::new(dir.path(), Links::Keep);
    assert_eq!(walk(&walker.clone().limits(bound(4))).unwrap().len(), 5);
    let err = walk(&walker.limits(bound(3))).unwrap_err();
    assert!(
        matches!(err, WalkError::TooManyEntries { limit: 3, .. }),
        "{err}"
    );
}

#[test]
fn the_depth_bound_is_a_named_error() {
    let dir = task_dir(&[("1/2/3/file", "")]);
    let bound = |depth| Limits {
        entries: MAX_ENTRIES,
        depth,
    };
    let walker = TreeWalk::new(dir.path(), Links::Keep);
    assert!(walk(&walker.clone().limits(bound(4))).is_ok());
    let err = walk(&walker.limits(bound(3))).unwrap_err();
    assert!(
        matches!(&err, WalkError::TooDeep { limit: 3, path } if path.ends_with("1/2/3/file")),
        "{err}"
    );
}

#[test]
fn order_is_byte_order_of_names_a_directory_before_its_contents() {
    // Created out of order, so that the file system's own order is unlikely to be the result.
    let dir = task_dir(&[
        ("a.txt", ""),
        ("a/x", ""),
        ("B", ""),
        ("a-b", ""),
        ("a/Y", ""),
        ("é", ""),
    ]);
    let expected = ["B", "a/", "a/Y", "a/x", "a-", "a-b", "a.txt", "é"];
    for links in [Links::Keep, Links::ToFiles, Links::Follow] {
        assert_eq!(walk(&TreeWalk::new(dir.path(), links)).unwrap(), expected);
    }
}

#[test]
fn the_visitor_may_pass_over_a_directory_or_stop() {
    let dir = task_dir(&[("a/x", ""), ("b/y", ""), ("c", "")]);
    struct Partial(Vec<String>);
    impl Visitor for Partial {
        type Error = ();
        fn visit(&mut self, entry: &Entry) -> Result<Next, ()> {
            self.0.push(entry.rel.clone());
            Ok(match entry.rel.as_str() {
                "a" => Next::Pass,
                "b/y" => Next::Stop,
                _ => Next::Enter,
            })
        }
    }
    let mut partial = Partial(Vec::new());
    TreeWalk::new(dir.path(), Links::Keep)
        .walk(&mut partial)
        .unwrap();
    assert_eq!(partial.0, ["a", "b", "b/y"]);
}

#[test]
fn special_files_are_reported_never_opened() {
    let dir = task_dir(&[("a", "")]);
    let fifo = dir.path().join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    symlink("fifo", dir.path().join("to-fifo")).unwrap();
    assert_eq!(
        walk(&TreeWalk::new(dir.path(), Links::Follow)).unwrap(),
        ["a", "fifo!", "to-fifo@?"]
    );
}
