//! The `toolgate` binary: everything lives in the library; this only hands over the arguments.

fn main() -> std::process::ExitCode {
    toolgate::cli::main()
}
