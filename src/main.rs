//! The `toolgate` binary: everything lives in the library; this only hands over the arguments
//! and picks the allocator (a request allocates many small buffers; mimalloc frees them faster).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toolgate::cli::main()
}
