//! What `ferry policy new` writes, per language: the templates of
//! `policies/templates/`, the contract, and this version's SDKs, compiled
//! into the binary so that a scaffold needs no checkout of Ferry.

/// A file to write: its path in the scaffold and its template.
pub(super) type Template = (&'static str, &'static str);

macro_rules! template {
    ($path:literal) => {
        include_str!(concat!("../../policies/templates/", $path))
    };
}

pub(super) const COMMON: &[Template] = &[
    (
        "fixtures/moves-to-a-cheaper-cluster.yaml",
        template!("common/fixtures/moves-to-a-cheaper-cluster.yaml"),
    ),
    (
        "snapshots/two-clusters.json",
        template!("common/snapshots/two-clusters.json"),
    ),
];
/// Contract v2, which the Python and JavaScript SDKs implement.
pub(super) const CONTRACT: Template = (
    "wit/policy.wit",
    include_str!("../../policies/wit/v2/policy.wit"),
);
pub(super) const RUST: &[Template] = &[
    ("Cargo.toml", template!("rust/Cargo.toml.tmpl")),
    ("src/lib.rs", template!("rust/src/lib.rs")),
    ("README.md", template!("rust/README.md")),
    (".gitignore", "/target\n"),
];
pub(super) const PYTHON: &[Template] = &[
    ("app.py", template!("python/app.py")),
    ("requirements.txt", template!("python/requirements.txt")),
    ("README.md", template!("python/README.md")),
    (".gitignore", "/.venv\n/policy.wasm\n__pycache__/\n"),
    CONTRACT,
];
pub(super) const JS: &[Template] = &[
    ("policy.js", template!("js/policy.js")),
    ("package.json", template!("js/package.json")),
    ("build.mjs", include_str!("../../policies/js/build.mjs")),
    ("README.md", template!("js/README.md")),
    (".gitignore", "/node_modules\n/policy.wasm\n"),
    CONTRACT,
];

macro_rules! python_sdk {
    ($($file:literal),*) => {
        &[$((
            concat!("sdk/ferry_policy/", $file),
            include_str!(concat!("../../policies/python/sdk/ferry_policy/", $file)),
        )),*]
    };
}

/// This version's SDKs, for a scaffold given no `--sdk-path`. A JavaScript
/// policy always has its SDK in `sdk/`: this one, or the one given.
pub(super) const PYTHON_SDK: &[Template] = python_sdk!(
    "__init__.py",
    "component.py",
    "cost.py",
    "params.py",
    "plan.py",
    "types.py"
);
pub(super) const JS_SDK: &[Template] = &[(
    "sdk/ferry-policy.js",
    include_str!("../../policies/js/sdk/ferry-policy.js"),
)];
