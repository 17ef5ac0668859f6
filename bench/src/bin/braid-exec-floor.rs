//! The exec floor: a static binary that does nothing. Spawning it the way a runtime spawns a
//! plugin (CNI variables, a configuration on stdin that it never reads) and reaping it is the
//! least any plugin call can cost on the machine; `braid-bench` measures it beside the
//! delegator's VERSION so that every other figure can be read against it.

fn main() {}
