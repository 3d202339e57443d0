//! The `toolgate` binary: everything lives in the library; this only hands over the arguments
//! and picks the allocator (a request allocates many small buffers; mimalloc frees them faster).
//! The `mimalloc` feature, on by default, chooses it; `--no-default-features` keeps the system's.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toolgate::main()
}
