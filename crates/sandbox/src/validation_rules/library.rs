//! The CEL environment validation rules compile and run in: the CEL standard
//! library (with optional values) plus the Kubernetes libraries the rules may
//! use: cel-go's strings extension, the Kubernetes `lists` and `regex`
//! libraries and cel-go's `sets` extension. Pure.
//!
//! It must never declare a function kube-apiserver lacks under a name a
//! rule could call by accident, and it must never panic on a rule's values:
//! every overload answers an `ExecutionError` for input it cannot take.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use cel::common::types::{LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{Context, Env, ExecutionError, Value};
use regex::Regex;

/// The one environment every rule shares; building it registers a few
/// hundred overloads, so it is built once per process.
pub(crate) fn env() -> Arc<Env> {
    static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(build()));
    ENV.clone()
}

fn build() -> Env {
    let mut env = Env::stdlib();
    // The registrations below use fixed, distinct names and signatures, so a
    // failure would be a bug of this file, caught by the unit tests; the
    // environment is still usable without the overload that failed.
    let results = [
        env.add_extension(cel::extensions::strings),
        env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted),
        env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum),
        env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min),
        env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max),
        env.add_member_overload(
            "indexOf",
            "list_index_of",
            LIST_TYPE,
            vec![cel::common::types::DYN_TYPE],
            index_of,
        ),
        env.add_member_overload(
            "lastIndexOf",
            "list_last_index_of",
            LIST_TYPE,
            vec![cel::common::types::DYN_TYPE],
            last_index_of,
        ),
        env.add_member_overload("find", "string_find", STRING_TYPE, vec![STRING_TYPE], find),
        env.add_member_overload(
            "findAll",
            "string_find_all",
            STRING_TYPE,
            vec![STRING_TYPE],
            find_all,
        ),
        env.add_member_overload(
            "findAll",
            "string_find_all_n",
            STRING_TYPE,
            vec![STRING_TYPE, cel::common::types::INT_TYPE],
            find_all_n,
        ),
        env.add_overload(
            "sets.contains",
            "sets_contains",
            vec![LIST_TYPE, LIST_TYPE],
            sets_contains,
        ),
        env.add_overload(
            "sets.equivalent",
            "sets_equivalent",
            vec![LIST_TYPE, LIST_TYPE],
            sets_equivalent,
        ),
        env.add_overload(
            "sets.intersects",
            "sets_intersects",
            vec![LIST_TYPE, LIST_TYPE],
            sets_intersects,
        ),
    ];
    for result in results {
        if let Err(error) = result {
            tracing::error!(%error, "a CEL library overload could not be declared");
        }
    }
    env
}

/// Whether the environment declares a function `name`, called globally or
/// on a target. The CEL crate checks names only when a call runs, so a rule
/// is checked when compiled by calling the name once without arguments:
/// only an unknown name answers "undeclared reference". Cached per name.
pub(crate) fn declares(name: &str, member: bool) -> bool {
    static KNOWN: LazyLock<Mutex<HashMap<(String, bool), bool>>> = LazyLock::new(Default::default);
    let key = (name.to_string(), member);
    if let Some(known) = lock(&KNOWN).get(&key) {
        return *known;
    }
    let env = env();
    let probe = if member {
        format!("null.{name}()")
    } else {
        format!("{name}()")
    };
    let known = match env.compile(&probe) {
        Ok(program) => !matches!(
            program.execute(&Context::with_env(env.clone())),
            Err(ExecutionError::UndeclaredReference(ref undeclared)) if undeclared.as_str() == name
        ),
        Err(_) => false,
    };
    lock(&KNOWN).insert(key, known);
    known
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Answer<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// The arguments as plain values: the overloads here work on copies, which
/// is cheap at the sizes a schema allows.
fn values<const N: usize>(
    function: &str,
    args: Args<'_, '_>,
) -> Result<[Value; N], ExecutionError> {
    let values: Vec<Value> = args
        .iter()
        .map(|arg| Value::try_from(arg.as_ref()))
        .collect::<Result<_, _>>()?;
    values.try_into().map_err(|v: Vec<Value>| {
        ExecutionError::function_error(function, format!("expected {N} arguments, got {}", v.len()))
    })
}

fn answer<'b, 'v>(value: Value) -> Answer<'b, 'v> {
    let boxed: Box<dyn Val> = value.try_into()?;
    Ok(CowVal::Owned(boxed))
}

fn list(function: &str, value: &Value) -> Result<Items, ExecutionError> {
    match value {
        Value::List(items) => Ok(items.clone()),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected a list, got {}", other.type_of()),
        )),
    }
}

fn text<'a>(function: &str, value: &'a Value) -> Result<&'a str, ExecutionError> {
    match value {
        Value::String(s) => Ok(s.as_str()),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected a string, got {}", other.type_of()),
        )),
    }
}

/// Items compare only within one type, as in Kubernetes' `lists` library.
fn compare(function: &str, a: &Value, b: &Value) -> Result<std::cmp::Ordering, ExecutionError> {
    if std::mem::discriminant(a) != std::mem::discriminant(b) {
        return Err(ExecutionError::no_such_overload(
            function,
            vec![a.type_of().to_string(), b.type_of().to_string()],
        ));
    }
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::no_such_overload(function, vec![a.type_of().to_string()]))
}

fn is_sorted<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    let [items] = values("isSorted", args)?;
    let items = list("isSorted", &items)?;
    for pair in items.windows(2) {
        if compare("isSorted", &pair[0], &pair[1])? == std::cmp::Ordering::Greater {
            return answer(Value::Bool(false));
        }
    }
    answer(Value::Bool(true))
}

fn sum<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    let [items] = values("sum", args)?;
    let items = list("sum", &items)?;
    // The sum of no items is the zero of int, as upstream (which knows the
    // element type from the schema; a list of doubles sums to 0 there).
    let mut total = Value::Int(0);
    for (i, item) in items.iter().enumerate() {
        total = if i == 0 {
            item.clone()
        } else {
            match (&total, item) {
                (Value::Int(a), Value::Int(b)) => Value::Int(
                    a.checked_add(*b)
                        .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
                ),
                (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                    a.checked_add(*b)
                        .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
                ),
                (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
                (a, b) => {
                    return Err(ExecutionError::no_such_overload(
                        "sum",
                        vec![a.type_of().to_string(), b.type_of().to_string()],
                    ));
                }
            }
        };
    }
    answer(total)
}

fn extreme<'b, 'v>(function: &str, args: Args<'b, 'v>, keep: std::cmp::Ordering) -> Answer<'b, 'v> {
    let [items] = values(function, args)?;
    let items = list(function, &items)?;
    let mut best: Option<&Value> = None;
    for item in items.iter() {
        best = match best {
            Some(current) if compare(function, item, current)? != keep => Some(current),
            _ => Some(item),
        };
    }
    match best {
        Some(value) => answer(value.clone()),
        None => Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        )),
    }
}

fn min<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    extreme("min", args, std::cmp::Ordering::Less)
}

fn max<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    extreme("max", args, std::cmp::Ordering::Greater)
}

fn position<'b, 'v>(function: &str, args: Args<'b, 'v>, last: bool) -> Answer<'b, 'v> {
    let [items, wanted] = values(function, args)?;
    let items = list(function, &items)?;
    let found = if last {
        items.iter().rposition(|item| item == &wanted)
    } else {
        items.iter().position(|item| item == &wanted)
    };
    answer(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn index_of<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    position("indexOf", args, false)
}

fn last_index_of<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    position("lastIndexOf", args, true)
}

/// Patterns are compiled once per process, as schema patterns are.
fn regex(function: &str, pattern: &str) -> Result<Regex, ExecutionError> {
    static CACHE: LazyLock<Mutex<HashMap<String, Regex>>> = LazyLock::new(Default::default);
    if let Some(re) = lock(&CACHE).get(pattern) {
        return Ok(re.clone());
    }
    let re = Regex::new(pattern).map_err(|e| ExecutionError::function_error(function, e))?;
    lock(&CACHE).insert(pattern.to_string(), re.clone());
    Ok(re)
}

fn find<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    let [haystack, pattern] = values("find", args)?;
    let re = regex("find", text("find", &pattern)?)?;
    let found = re
        .find(text("find", &haystack)?)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    answer(Value::from(found))
}

fn find_all_up_to<'b, 'v>(
    haystack: &Value,
    pattern: &Value,
    limit: Option<usize>,
) -> Answer<'b, 'v> {
    let re = regex("findAll", text("findAll", pattern)?)?;
    let found: Vec<Value> = re
        .find_iter(text("findAll", haystack)?)
        .take(limit.unwrap_or(usize::MAX))
        .map(|m| Value::from(m.as_str()))
        .collect();
    answer(Value::List(Arc::new(found)))
}

fn find_all<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    let [haystack, pattern] = values("findAll", args)?;
    find_all_up_to(&haystack, &pattern, None)
}

fn find_all_n<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    let [haystack, pattern, n] = values("findAll", args)?;
    // A negative limit means all matches, as upstream.
    let limit = match n {
        Value::Int(n) if n >= 0 => Some(n as usize),
        _ => None,
    };
    find_all_up_to(&haystack, &pattern, limit)
}

/// A list's items, shared.
type Items = Arc<Vec<Value>>;

fn two_lists(function: &str, args: Args<'_, '_>) -> Result<(Items, Items), ExecutionError> {
    let [a, b] = values(function, args)?;
    Ok((list(function, &a)?, list(function, &b)?))
}

fn sets_contains<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    let (a, b) = two_lists("sets.contains", args)?;
    answer(Value::Bool(b.iter().all(|x| a.contains(x))))
}

fn sets_equivalent<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    let (a, b) = two_lists("sets.equivalent", args)?;
    answer(Value::Bool(
        b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x)),
    ))
}

fn sets_intersects<'b, 'v>(args: Args<'b, 'v>) -> Answer<'b, 'v> {
    let (a, b) = two_lists("sets.intersects", args)?;
    answer(Value::Bool(b.iter().any(|x| a.contains(x))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expression: &str) -> Result<Value, ExecutionError> {
        let env = env();
        let program = env.compile(expression).expect("compiles");
        program.execute(&Context::with_env(env))
    }

    #[test]
    fn the_kubernetes_list_functions_answer_as_upstream() {
        for (expression, want) in [
            ("[1, 2, 2, 5].isSorted()", Value::Bool(true)),
            ("['b', 'a'].isSorted()", Value::Bool(false)),
            ("[1, 2, 3].sum()", Value::Int(6)),
            ("[1.5, 2.5].sum()", Value::Float(4.0)),
            ("[3, 1, 2].min()", Value::Int(1)),
            ("['a', 'c', 'b'].max()", Value::from("c")),
            ("[1, 2, 1].indexOf(1)", Value::Int(0)),
            ("[1, 2, 1].lastIndexOf(1)", Value::Int(2)),
            ("[1, 2].indexOf(7)", Value::Int(-1)),
            ("'abc'.indexOf('c')", Value::Int(2)),
        ] {
            assert_eq!(eval(expression), Ok(want), "{expression}");
        }
        assert!(eval("[].max()").is_err(), "the max of nothing is an error");
        assert!(
            eval("[1, 'a'].isSorted()").is_err(),
            "mixed types do not compare"
        );
    }

    #[test]
    fn regex_and_sets_functions_answer_as_upstream() {
        for (expression, want) in [
            ("'abc 123 def 456'.find('[0-9]+')", Value::from("123")),
            ("'abc'.find('[0-9]+')", Value::from("")),
            ("'a1 b2 c3'.findAll('[0-9]').size()", Value::Int(3)),
            (
                "'a1 b2 c3'.findAll('[0-9]', 2)",
                Value::List(Arc::new(vec![Value::from("1"), Value::from("2")])),
            ),
            ("sets.contains([1, 2, 3], [3, 1])", Value::Bool(true)),
            ("sets.equivalent([1, 2], [2, 1, 1])", Value::Bool(true)),
            ("sets.intersects([1], [2])", Value::Bool(false)),
            ("'Ferry'.lowerAscii() == 'ferry'", Value::Bool(true)),
            ("'a,b'.split(',').size()", Value::Int(2)),
        ] {
            assert_eq!(eval(expression), Ok(want), "{expression}");
        }
    }

    #[test]
    fn declared_names_are_told_from_unknown_ones() {
        for (name, member) in [
            ("size", false),
            ("size", true),
            ("startsWith", true),
            ("matches", true),
            ("isSorted", true),
            ("findAll", true),
            ("lowerAscii", true),
            ("sets.contains", false),
            ("optional.of", false),
            ("orValue", true),
            ("int", false),
        ] {
            assert!(declares(name, member), "{name} (member: {member})");
        }
        assert!(!declares("frobnicate", false));
        assert!(!declares("frobnicate", true));
    }

    #[test]
    fn hostile_values_are_errors_not_panics() {
        for expression in [
            "1 / 0",
            "1 % 0",
            "9223372036854775807 + 1",
            "[9223372036854775807, 1].sum()",
            "'a'.matches('(')",
            "'a'.find('(')",
            "'a'.findAll('[')",
            "[1][5]",
            "'abc'.substring(5)",
            "'abc'.charAt(-1)",
            "[].min()",
            "[[1], 'a'].max()",
            "sets.contains(1, [1])",
            "{'a': 1}.b",
            "int('x')",
        ] {
            assert!(eval(expression).is_err(), "{expression}");
        }
    }
}
