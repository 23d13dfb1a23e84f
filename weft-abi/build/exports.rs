// Which functions of the standard weft-abi implements: shared by weft-abi's build script (which
// makes stubs for the others) and weft-cli's (for `weft info --abi`), so both agree.

/// `(name, implemented)` for every function of `abi/functions.txt`, in its order.
pub fn functions(abi_crate: &std::path::Path) -> Vec<(String, bool)> {
    let list = std::fs::read_to_string(abi_crate.join("abi/functions.txt")).unwrap();
    let implemented = implemented(&abi_crate.join("src"));
    list.lines()
        .map(|proto| {
            let name = proto[..proto.find('(').unwrap()]
                .rsplit(' ')
                .next()
                .unwrap();
            let short = name.strip_prefix("MPI_").unwrap();
            (name.to_string(), implemented.contains(short))
        })
        .collect()
}

/// The names (without `MPI_`) of the functions `dir` exports with `export!(Name, ...)` lines.
pub fn implemented(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            names.extend(implemented(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                if let Some(rest) = line.trim_start().strip_prefix("export!(") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        names.insert(name);
                    }
                }
            }
        }
    }
    names
}
