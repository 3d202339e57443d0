//! Reading a callgrind profile for the functions one object executed: the input of
//! `link/hot-functions.txt` (see the `hot-functions` binary).
//!
//! callgrind writes names compressed: the first mention of an object or function is
//! `ob=(N) name` / `fn=(N) name`, later ones only `ob=(N)` / `fn=(N)`. Function ids are shared
//! between `fn=` (the function whose costs follow) and `cfn=` (a function it called), so a
//! name may be introduced by either. Objects likewise between `ob=` and `cob=`.

use std::collections::{HashMap, HashSet};

/// The mangled names of the functions of `object` (the path callgrind names it by) that have
/// costs in `profile`, in the order they first appear. Names callgrind could not resolve (it
/// writes their address) are left out, as is the `'N` suffix it gives recursion levels.
pub fn executed_functions(profile: &str, object: &str) -> Vec<String> {
    let mut objects: HashMap<&str, &str> = HashMap::new();
    let mut functions: HashMap<&str, &str> = HashMap::new();
    let mut current_object = "";
    let mut seen = HashSet::new();
    let mut executed = Vec::new();
    for line in profile.lines() {
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        let Some((id, name)) = compressed(rest) else {
            continue;
        };
        match key {
            "ob" | "cob" => {
                if let Some(name) = name {
                    objects.insert(id, name);
                }
                if key == "ob" {
                    current_object = objects.get(id).copied().unwrap_or_default();
                }
            }
            "fn" | "cfn" => {
                if let Some(name) = name {
                    functions.insert(id, name);
                }
                if key != "fn" || current_object != object {
                    continue;
                }
                let Some(name) = functions.get(id) else {
                    continue;
                };
                let name = name.split('\'').next().unwrap_or_default();
                if name.is_empty() || name.starts_with("0x") {
                    continue;
                }
                if seen.insert(name) {
                    executed.push(name.to_owned());
                }
            }
            _ => {}
        }
    }
    executed
}

/// `(N) name` or `(N)`: the id and the name, if this mention introduces it.
fn compressed(text: &str) -> Option<(&str, Option<&str>)> {
    let rest = text.strip_prefix('(')?;
    let (id, after) = rest.split_once(')')?;
    let name = after.strip_prefix(' ').filter(|name| !name.is_empty());
    Some((id, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = "\
version: 1
creator: callgrind-3.19.0
cmd: /work/target/release/toolgate serve
events: Ir
ob=(1) /work/target/release/toolgate
fl=(1) ???
fn=(1) _ZN8toolgate4main17h0123456789abcdefE
0x10 3
cob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6
cfi=(2) ???
cfn=(2) memcpy
calls=1 0x20
0x10 5
cob=(1)
cfn=(3) _ZN5hyper5proto4read17h1111111111111111E'2
calls=1 0x30
0x11 7
ob=(2)
fn=(2)
0x20 9
ob=(1)
fn=(3)
0x30 4
fn=(4) 0x0000000000401000
0x40 1
fn=(1)
0x10 1
";

    #[test]
    fn functions_of_the_object_in_first_seen_order() {
        let executed = executed_functions(PROFILE, "/work/target/release/toolgate");
        assert_eq!(
            executed,
            [
                "_ZN8toolgate4main17h0123456789abcdefE",
                // Introduced by a `cfn=` line; its own costs come later under `fn=(3)`.
                "_ZN5hyper5proto4read17h1111111111111111E",
            ]
        );
    }

    #[test]
    fn other_objects_and_unresolved_addresses_are_left_out() {
        let executed = executed_functions(PROFILE, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(executed, ["memcpy"]);
        assert!(executed_functions(PROFILE, "/nowhere").is_empty());
    }
}
