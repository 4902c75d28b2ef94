//! The static checks kube-apiserver's CEL type checker makes that matter for
//! a rule to be accepted: every identifier and function is declared, and a
//! rule whose result is plainly not a bool (a message expression plainly not
//! a string) is refused. Pure; works on the parsed AST only.
//!
//! It must never refuse an expression kube-apiserver accepts: where the type
//! of a result needs real type inference, the check passes it and the
//! evaluation reports the error instead.

use std::collections::HashSet;

use cel::Program;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::library;

/// The type names an expression may use as values (`type(x) == string`).
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "optional_type",
    "string",
    "type",
    "uint",
];

const TOO_DEEP: &str = "max recursion depth exceeded";

/// The deepest expression a rule may be, as cel-go's parser limits it: deep
/// enough for any rule a person writes, shallow enough that evaluating one
/// never exhausts a thread's stack.
pub(crate) const MAX_DEPTH: usize = 250;

/// What a compiled expression refers to.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    /// Undeclared names and functions, as `(expression id, message)`.
    pub(crate) problems: Vec<(u64, String)>,
    pub(crate) uses_old_self: bool,
}

/// Walk `program` with `variables` declared.
pub(crate) fn references(program: &Program, variables: &[&str]) -> Findings {
    let mut findings = Findings::default();
    let mut scope: Vec<String> = variables.iter().map(|v| v.to_string()).collect();
    walk(program.expression(), 0, &mut scope, &mut findings);
    findings
}

fn undeclared(findings: &mut Findings, id: u64, name: &str) {
    findings.problems.push((
        id,
        format!("undeclared reference to '{name}' (in container '')"),
    ));
}

fn walk(expr: &IdedExpr, depth: usize, scope: &mut Vec<String>, findings: &mut Findings) {
    if depth > MAX_DEPTH {
        if !findings.problems.iter().any(|(_, m)| m == TOO_DEEP) {
            findings.problems.push((expr.id, TOO_DEEP.to_string()));
        }
        return;
    }
    let depth = depth + 1;
    match &expr.expr {
        Expr::Ident(name) => {
            if name == "oldSelf" && scope.iter().any(|v| v == "oldSelf") {
                findings.uses_old_self = true;
            }
            // `@`-names are the parser's own, made by macro expansion.
            if !name.starts_with('@')
                && !scope.iter().any(|v| v == name)
                && !TYPE_NAMES.contains(&name.as_str())
            {
                undeclared(findings, expr.id, name);
            }
        }
        Expr::Select(select) => walk(&select.operand, depth, scope, findings),
        Expr::Call(call) => {
            let name = call.func_name.as_str();
            // Operators (`_==_`, `!_`, `@in`, ...) come from the grammar.
            let operator = !name.starts_with(|c: char| c.is_ascii_alphabetic());
            match call.target.as_deref() {
                // `sets.contains(a, b)`: a namespaced function, not a method.
                Some(IdedExpr {
                    expr: Expr::Ident(namespace),
                    ..
                }) if !scope.iter().any(|v| v == namespace)
                    && library::declares(&format!("{namespace}.{name}"), false) => {}
                Some(target) => {
                    walk(target, depth, scope, findings);
                    if !operator && !library::declares(name, true) {
                        undeclared(findings, expr.id, name);
                    }
                }
                None => {
                    if !operator && !library::declares(name, false) {
                        undeclared(findings, expr.id, name);
                    }
                }
            }
            for arg in &call.args {
                walk(arg, depth, scope, findings);
            }
        }
        Expr::Comprehension(comprehension) => {
            walk(&comprehension.iter_range, depth, scope, findings);
            walk(&comprehension.accu_init, depth, scope, findings);
            let depth = scope.len();
            scope.push(comprehension.accu_var.clone());
            scope.push(comprehension.iter_var.clone());
            if let Some(second) = &comprehension.iter_var2 {
                scope.push(second.clone());
            }
            walk(&comprehension.loop_cond, depth, scope, findings);
            walk(&comprehension.loop_step, depth, scope, findings);
            scope.truncate(depth + 1);
            walk(&comprehension.result, depth, scope, findings);
            scope.truncate(depth);
        }
        Expr::List(list) => {
            for element in &list.elements {
                walk(element, depth, scope, findings);
            }
        }
        Expr::Map(map) => walk_entries(&map.entries, depth, scope, findings),
        Expr::Struct(structure) => walk_entries(&structure.entries, depth, scope, findings),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn walk_entries(
    entries: &[cel::common::ast::IdedEntryExpr],
    depth: usize,
    scope: &mut Vec<String>,
    findings: &mut Findings,
) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::MapEntry(e) => {
                walk(&e.key, depth, scope, findings);
                walk(&e.value, depth, scope, findings);
            }
            EntryExpr::StructField(f) => walk(&f.value, depth, scope, findings),
        }
    }
}

/// The result type when the expression's outermost form decides it without
/// inference: a literal, a list or map, or a call that always yields a
/// string or a number. `None` when it takes inference to know.
pub(crate) fn plain_type(program: &Program) -> Option<&'static str> {
    let strings: HashSet<&str> = [
        "string",
        "lowerAscii",
        "upperAscii",
        "trim",
        "replace",
        "format",
        "join",
        "substring",
        "charAt",
        "find",
    ]
    .into();
    let ints: HashSet<&str> = ["size", "int", "indexOf", "lastIndexOf"].into();
    match &program.expression().expr {
        Expr::Literal(literal) => Some(match literal {
            LiteralValue::Boolean(_) => "bool",
            LiteralValue::String(_) => "string",
            LiteralValue::Int(_) => "int",
            LiteralValue::UInt(_) => "uint",
            LiteralValue::Double(_) => "double",
            LiteralValue::Bytes(_) => "bytes",
            LiteralValue::Null => "null_type",
        }),
        Expr::List(_) => Some("list"),
        Expr::Map(_) => Some("map"),
        Expr::Call(call) if strings.contains(call.func_name.as_str()) => Some("string"),
        Expr::Call(call) if ints.contains(call.func_name.as_str()) => Some("int"),
        Expr::Call(call)
            if matches!(
                call.func_name.as_str(),
                "_==_"
                    | "_!=_"
                    | "_<_"
                    | "_<=_"
                    | "_>_"
                    | "_>=_"
                    | "_&&_"
                    | "_||_"
                    | "!_"
                    | "@in"
                    | "matches"
                    | "startsWith"
                    | "endsWith"
                    | "contains"
                    | "isSorted"
            ) =>
        {
            Some("bool")
        }
        _ => None,
    }
}
