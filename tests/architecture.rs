//! The rooms of `docs/architecture.md` hold for the code: every source
//! folder is a room the document names, each room imports only the rooms
//! its row allows (so the rooms cannot form a cycle), and the rooms marked
//! pure do no I/O. The document is the source of truth; this test keeps the
//! code to it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// What a pure room may not touch: the network, files, the Kubernetes API.
/// Pure types from `kube::core` (such as `Selector`) are fine.
/// `Api<` and `Api::` catch the Kubernetes API however it was imported.
const IO: &[&str] = &[
    "kube::Api",
    "kube::Client",
    "kube::api::",
    "Api<",
    "Api::",
    "reqwest",
    "tokio::net",
    "tokio::fs",
    "std::fs",
    "std::net",
];

struct Room {
    may_use: BTreeSet<String>,
    pure: bool,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The room table of the architecture document: rows of the form
/// `` | `room` | what it holds | `a`, `b` | pure | ``.
fn rooms() -> BTreeMap<String, Room> {
    let doc =
        fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let mut rooms = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() != 6 || !cells[1].starts_with('`') {
            continue;
        }
        let name = cells[1].trim_matches('`').to_owned();
        let may_use = cells[3]
            .split(',')
            .map(|room| room.trim().trim_matches('`').to_owned())
            .filter(|room| !room.is_empty() && room != "—")
            .collect();
        let pure = match cells[4] {
            "pure" => true,
            "I/O" => false,
            other => panic!("room {name}: the last column says `{other}`, not `pure` or `I/O`"),
        };
        rooms.insert(name, Room { may_use, pure });
    }
    assert!(
        rooms.len() > 5,
        "no room table found in docs/architecture.md"
    );
    rooms
}

/// Every `.rs` file under `dir` (or `dir` itself when it is a file).
fn sources(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_owned()];
    }
    let mut files = Vec::new();
    for entry in fs::read_dir(path).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The room a source path belongs to: its first component under `src/`.
fn room_path(name: &str) -> Option<PathBuf> {
    let dir = root().join("src").join(name);
    let file = root().join("src").join(format!("{name}.rs"));
    [dir, file].into_iter().find(|p| p.exists())
}

/// The code of a file without its comments, so that prose naming a module
/// is not taken for an import.
fn code(path: &Path) -> String {
    without_comments(&fs::read_to_string(path).unwrap())
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rooms a piece of code names: `crate::room`, `ferry::room` and
/// `crate::{room, …}`.
fn rooms_named(code: &str, known: &BTreeMap<String, Room>) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for prefix in ["crate::", "ferry::"] {
        for (at, _) in code.match_indices(prefix) {
            let rest = &code[at + prefix.len()..];
            let words: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                group
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|w| w.trim().split("::").next().unwrap_or(""))
                    .collect()
            } else {
                vec![
                    rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or(""),
                ]
            };
            named.extend(
                words
                    .into_iter()
                    .filter(|w| known.contains_key(*w))
                    .map(str::to_owned),
            );
        }
    }
    named
}

#[test]
fn every_source_folder_is_a_room_of_the_architecture_document() {
    let rooms = rooms();
    for name in rooms.keys() {
        assert!(
            room_path(name).is_some(),
            "docs/architecture.md names the room `{name}`, but src/ has no {name}/ or {name}.rs"
        );
    }
    for entry in fs::read_dir(root().join("src")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" || name == "main" {
            continue;
        }
        assert!(
            rooms.contains_key(&name),
            "src/{} is not a room of docs/architecture.md: add it to the table",
            path.file_name().unwrap().to_string_lossy()
        );
    }
}

#[test]
fn each_room_imports_only_the_rooms_its_row_allows() {
    let rooms = rooms();
    let mut wrong = Vec::new();
    for (name, room) in &rooms {
        for file in sources(&room_path(name).unwrap()) {
            for used in rooms_named(&code(&file), &rooms) {
                if used != *name && !room.may_use.contains(&used) {
                    let file = file.strip_prefix(root()).unwrap().display().to_string();
                    wrong.push(format!("{file} uses `{used}`, which `{name}` may not"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the flow:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_rooms_allowed_to_use_each_other_form_no_cycle() {
    let rooms = rooms();
    // Depth-first search for a back edge.
    fn visit<'a>(
        name: &'a str,
        rooms: &'a BTreeMap<String, Room>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if done.contains(name) {
            return;
        }
        assert!(
            !path.contains(&name),
            "the rooms form a cycle: {} -> {name}",
            path.join(" -> ")
        );
        path.push(name);
        for next in &rooms[name].may_use {
            assert!(
                rooms.contains_key(next),
                "`{name}` may use `{next}`, which is no room"
            );
            visit(next, rooms, path, done);
        }
        path.pop();
        done.insert(name);
    }
    let mut done = BTreeSet::new();
    for name in rooms.keys() {
        visit(name, &rooms, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_pure_rooms_do_no_io() {
    let rooms = rooms();
    let pure: Vec<&String> = rooms
        .iter()
        .filter(|(_, r)| r.pure)
        .map(|(n, _)| n)
        .collect();
    for required in ["policy", "contract", "guardrails"] {
        assert!(
            pure.iter().any(|name| *name == required),
            "`{required}` must be marked pure in docs/architecture.md"
        );
    }
    let mut found = Vec::new();
    for name in pure {
        for file in sources(&room_path(name).unwrap()) {
            let code = code(&file);
            for needle in IO {
                if code.contains(needle) {
                    let file = file.strip_prefix(root()).unwrap().display().to_string();
                    found.push(format!("{file} uses {needle}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "I/O in a pure room:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_imports_in_every_form() {
    let mut known = BTreeMap::new();
    for name in ["a", "b", "c", "d"] {
        known.insert(
            name.to_owned(),
            Room {
                may_use: BTreeSet::new(),
                pure: false,
            },
        );
    }
    let text = "use crate::a::X;\nuse crate::{b::Y, c};\nlet z = ferry::d::f();\n\
                crate::nope::g();\n/// [`x`](crate::a::x) is prose\n";
    let named = rooms_named(&without_comments(text), &known);
    assert_eq!(
        named,
        BTreeSet::from(["a", "b", "c", "d"].map(str::to_owned))
    );
    let prose = rooms_named(
        &without_comments("//! see crate::a\nfn f() {} // crate::b"),
        &known,
    );
    assert!(prose.is_empty(), "{prose:?}");
}
